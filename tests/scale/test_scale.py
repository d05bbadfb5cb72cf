"""Sweeps and evaluation: grids, records, failures, resume, and the same results on every engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import partita as P
from partita.scale import evaluate, expand_target, get_engine, sweep
from partita.scale.report import pareto, table, to_csv

NETS = Path(__file__).resolve().parents[1] / "models" / "tflite" / "nets"
MODELS = [NETS / "mobilenet_v1_025_128.tflite", NETS / "resnet_mini_64.tflite"]
TIMES = ("compile_s", "cpu_time_s")


def stable(records):
    return [{k: v for k, v in r.items() if k not in TIMES} for r in records]


def test_brace_lists_expand_to_the_grid_in_order():
    assert expand_target("ref") == ["ref"]
    assert expand_target("npu -config={a,b} -sram={1k, 2k}, llvm") == [
        "npu -config=a -sram=1k, llvm",
        "npu -config=a -sram=2k, llvm",
        "npu -config=b -sram=1k, llvm",
        "npu -config=b -sram=2k, llvm",
    ]
    with pytest.raises(P.PartitaError, match="empty brace list"):
        expand_target("npu -config={}")


def test_sweep_records_and_one_failed_point_does_not_stop_the_others(tmp_path):
    bad = tmp_path / "broken.tflite"
    bad.write_bytes(b"TFL3" + bytes(64))
    records = sweep([*MODELS, bad], "ref", engine="local:2")
    assert [r["model"] for r in records] == [m.name for m in MODELS] + ["broken.tflite"]
    assert [r["status"] for r in records] == ["ok", "ok", "failed"]
    assert "TFLite" in records[2]["error"] or "tflite" in records[2]["error"].lower()
    assert records[0]["ops"] == 30 and records[0]["macs"] == 13_318_144
    assert "failed" in table(records) and to_csv(records).startswith("model,target,status")


def test_local_pool_sizes_give_the_same_records():
    one = sweep(MODELS, "ref", engine="local:1")
    two = sweep(MODELS, "ref", engine="local:2")
    assert stable(one) == stable(two)


def test_out_dir_is_written_as_points_arrive_and_resume_skips_them(tmp_path):
    seen = []
    sweep(MODELS[:1], "ref", engine="local:1", out_dir=tmp_path, on_record=seen.append)
    lines = (tmp_path / "sweep.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "ok"
    seen.clear()
    records = sweep(
        MODELS, "ref", engine="local:1", out_dir=tmp_path, resume=True, on_record=seen.append
    )
    assert [r["model"] for r in seen] == [MODELS[1].name]  # only the new point ran
    assert [r["model"] for r in records] == [m.name for m in MODELS]


def test_pareto_front():
    points = [(1, 10), (2, 5), (3, 5), (4, 1), (4, 2)]
    assert pareto(points) == [0, 1, 3]


def test_unknown_engine_and_missing_ray_say_what_to_do(monkeypatch):
    with pytest.raises(P.PartitaError, match="unknown engine 'gpu'"):
        get_engine("gpu")
    import builtins

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(P.PartitaError, match=r"pip install 'partita\[ray\]'"):
        get_engine("ray")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (12, 128, 128, 3), dtype=np.int8)
    path = tmp_path_factory.mktemp("data") / "val.npz"
    np.savez(path, images=x, labels=rng.integers(0, 16, 12))
    return path


def test_evaluate_against_tflite_and_the_interpreter(dataset):
    pytest.importorskip("ai_edge_litert")
    result = evaluate(MODELS[0], dataset, "ref", engine="local:2", chunk=5)
    assert result["samples"] == 12 and result["reference"] == "tflite"
    assert result["bit_exact"] == 1.0 and result["max_abs_diff"] == 0
    assert 0 <= result["accuracy"] <= 1 and result["samples_per_s"] > 0
    again = evaluate(MODELS[0], dataset, "ref", engine="local:1", limit=4, reference="interpreter")
    assert again["samples"] == 4 and again["top1_agreement"] == 1.0


def test_evaluate_refuses_data_of_the_wrong_shape(tmp_path):
    path = tmp_path / "wrong.npz"
    np.savez(path, x=np.zeros((2, 8, 8, 3), np.int8))
    with pytest.raises(P.PartitaError, match="the model takes Tensor"):
        evaluate(MODELS[0], path, "ref", engine="local:1")


@pytest.mark.slow
def test_ray_gives_the_same_records_as_the_local_pool(dataset):
    pytest.importorskip("ray")
    import ray

    engine = get_engine("ray", workers=2)
    try:
        assert stable(sweep(MODELS, "ref", engine=engine)) == stable(
            sweep(MODELS, "ref", engine="local:2")
        )
        local = evaluate(MODELS[0], dataset, "ref", engine="local:2", chunk=4)
        remote = evaluate(MODELS[0], dataset, "ref", engine=engine, chunk=4)
        for key in ("samples", "accuracy", "top1_agreement", "bit_exact", "max_abs_diff"):
            assert local[key] == remote[key]
    finally:
        ray.shutdown()


def test_npu_sweep_over_presets_and_sram_sizes_through_the_cli(capsys, tmp_path):
    import partita.cli as cli

    target = "npu -config={u55-128,u55-256,u65-256} -sram={256k,512k,1m}, ref"
    status = cli.main(["sweep", str(MODELS[0]), "-t", target, "--engine", "local:2", "--json",
                       "--out", str(tmp_path)])
    records = json.loads(capsys.readouterr().out)
    assert status == 0 and len(records) == 9
    assert all(r["status"] == "ok" and r["npu_cycles"] > 0 for r in records)
    by = {r["target"]: r for r in records}
    u55 = by["npu -config=u55-128 -sram=1m, ref"]["npu_cycles"]
    assert by["npu -config=u55-256 -sram=1m, ref"]["npu_cycles"] <= u55  # more MACs, not slower
    assert by["npu -config=u65-256 -sram=256k, ref"]["npu_sram_peak_bytes"] <= 256 * 1024
    assert by["npu -config=u65-256 -sram=1m, ref"]["npu_macs_per_cycle"] == 256
    status = cli.main(["eval", str(MODELS[0]), "--data", str(_random_npz(tmp_path)), "-t",
                       "npu, ref", "--engine", "local:2", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0 and result["bit_exact"] == 1.0


def _random_npz(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "samples.npz"
    np.savez(path, x=rng.integers(-128, 128, (6, 128, 128, 3), dtype=np.int8))
    return path


class _InterruptedAfterOne:
    """An engine whose user presses Ctrl-C after the first finished job."""

    name = "interrupted"

    def __init__(self):
        self.inner = get_engine("local:1")

    def run(self, task, jobs):
        for n, item in enumerate(self.inner.run(task, jobs)):
            if n == 1:
                raise KeyboardInterrupt
            yield item


def test_ctrl_c_stops_a_sweep_and_an_eval_cleanly_and_keeps_what_finished(
    capsys, tmp_path, monkeypatch
):
    import partita.cli as cli
    import partita.scale as scale

    monkeypatch.setattr(scale, "get_engine", lambda *a, **k: _InterruptedAfterOne())
    status = cli.main(["sweep", *map(str, MODELS), "-t", "ref", "--json", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    records = json.loads(captured.out)
    assert status == 1 and [r["model"] for r in records] == [MODELS[0].name]
    assert "interrupted: 1 of 2 points finished" in captured.err and "--resume" in captured.err
    assert len((tmp_path / "sweep.jsonl").read_text().splitlines()) == 1
    data = np.load(_random_npz(tmp_path))["x"]
    result = evaluate(MODELS[0], data, "ref", engine=_InterruptedAfterOne(), chunk=2)
    assert result["interrupted"] is True and result["samples"] == 2
