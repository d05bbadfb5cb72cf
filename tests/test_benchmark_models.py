"""benchmarks/models.py: committed benchmark models by name, and the ones made on first use into
the cache folder, byte-identical to the generator's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_models", ROOT / "benchmarks" / "models.py")
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)


def test_committed_models_resolve_without_making_anything(tmp_path, monkeypatch):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    assert models.get_model("tflite/mobilenet_v1_100_224") == (
        ROOT / "tests/models/tflite/large/mobilenet_v1_100_224.tflite"
    )
    for net in models.LARGE_NETS:
        for config in ("qop_u8s8_pc", "qop_u8s8_pt"):
            path = models.get_model(f"onnx/{net}.{config}")
            assert path.parent == ROOT / "tests/models/onnx/large" and path.stat().st_size > 3e6
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "name", ["mobilenet_v1_100_224", "onnx/resnet_152", "onnx/mobilenet_v2_100_224.qdq_u4"]
)
def test_unknown_names_are_refused_by_name(name, tmp_path, monkeypatch):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=name.split("/")[-1].split(".")[-1]):
        models.get_model(name)


def test_names_and_configurations_match_the_generator(monkeypatch):
    pytest.importorskip("onnxruntime.quantization")
    pytest.importorskip("keras")
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gen_onnx_models as gen

    assert set(models.ONNX_CONFIGS) == set(gen.CONFIGS)
    assert set(models.LARGE_NETS) == set(gen.large_nets())
    monkeypatch.setenv(models.CACHE_ENV, "/somewhere/else")
    assert gen.cache_dir() == models.cache_dir() == Path("/somewhere/else")


@pytest.mark.slow
def test_models_made_on_first_use_equal_the_committed_bytes(tmp_path, monkeypatch):
    """The float MobileNet v1 1.0 224 is made into the cache; quantizing it again gives the
    committed QOperator file byte for byte, and a second get_model reuses the cached file."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf2onnx")
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    float_model = models.get_model("onnx/mobilenet_v1_100_224")
    assert float_model == tmp_path / "mobilenet_v1_100_224.onnx"
    assert float_model.stat().st_size > 5e6
    made = tmp_path / "mobilenet_v1_100_224.qop_u8s8_pt.onnx"
    models._make("mobilenet_v1_100_224", "qop_u8s8_pt", made)
    committed = ROOT / "tests/models/onnx/large/mobilenet_v1_100_224.qop_u8s8_pt.onnx"
    assert made.read_bytes() == committed.read_bytes()
    stamp = float_model.stat().st_mtime_ns
    assert models.get_model("onnx/mobilenet_v1_100_224") == float_model
    assert float_model.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == [float_model.name, made.name]
