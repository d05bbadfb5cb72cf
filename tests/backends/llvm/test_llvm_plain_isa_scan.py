"""``llvm -isa=plain`` code never needs AVX2 or AVX-512: for every test model (tests/models, as
test_llvm_every_model takes them; of the networks the small ones in NETS), the IR of its
``-isa=plain`` build names no x86-specific intrinsic (``@llvm.x86.*``), no kernel records an
ISA other than plain, and the region needs nothing of the CPU. For the models with layers that
saturate pairs (ONNX Runtime's and PyTorch's x86 u8 MAC kernels, a path that used to take AVX2
intrinsics there; of the networks one per frontend, their compile is slow) the same IR is also
compiled for the baseline x86-64 CPU and its disassembly scanned for ymm / zmm registers and
AVX-512 mask registers: none may appear."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from partita.backends import llvm as llvm_backend
from partita.backends.llvm.runtime import jit

import partita as P
from partita.cli.models import load_model

MODELS = Path(__file__).resolve().parents[2] / "models"
# networks: two small ones per frontend in every variant (their lowering takes seconds each)
NETS = ("mobilenet_v1_025_96", "mobilenet_v2_035_96", "pt2e_x86_mobilenetv2", "float_mobilenetv2")
FILES = sorted(
    p for p in MODELS.rglob("*")
    if p.suffix in (".tflite", ".onnx", ".pt2") and "large" not in p.parts
    and p.parent.name not in ("transformers",)
    and (p.parent.name not in ("nets", "pytorch") or p.name.startswith(NETS)
         or p.stem.endswith("_ops"))
)  # fmt: skip
ASM_NETS = ("mobilenet_v1_025_96.qop_u8s8_pc.onnx", "mobilenet_v2_035_96.qop_u8s8_pc.onnx")
SCAN = re.compile(r"@\"?llvm\.x86\.[\w.]+")  # llvmlite quotes names with dots
WIDE = re.compile(r"%[yz]mm\d|%k[0-7]\b")  # AVX (256-bit), AVX-512 (512-bit, mask registers)


class _Captured(Exception):
    pass


def plain_ir(mod, monkeypatch) -> tuple[list[str], list]:
    """The LLVM IR texts of ``mod``'s ``-isa=plain`` build (its first llvm region) and the
    plan's kernels, generated afresh (no region cache); nothing is compiled."""
    seen: dict = {}
    real_lower = llvm_backend.lower_function

    def lower(*args, **kwargs):
        seen["plan"] = real_lower(*args, **kwargs)
        return seen["plan"]

    def compile_parts(texts, *args, **kwargs):
        seen["texts"] = [t() for t in texts]
        raise _Captured

    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setattr(llvm_backend, "lower_function", lower)
    monkeypatch.setattr(llvm_backend, "compile_parts", compile_parts)
    with pytest.raises(_Captured):
        P.build(mod, "llvm -isa=plain")
    return seen["texts"], seen["plan"].kernels


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(MODELS)))
def test_plain_builds_use_no_x86_extension(path, monkeypatch):
    try:
        texts, kernels = plain_ir(load_model(path), monkeypatch)
    except P.PartitaError as e:  # what is refused whole is test_llvm_every_model's concern
        pytest.skip(f"refused: {str(e).splitlines()[0]}")
    assert texts
    for text in texts:
        found = sorted(set(SCAN.findall(text)))
        assert not found, found
    isas = {k.params.get("isa") for k in kernels} - {None, "plain"}
    assert not isas, isas
    pairs = any(k.params.get("pairs") for k in kernels)
    if path.parent.name == "nets" and path.name not in ASM_NETS:
        pairs = False
    if path.parent.name == "pytorch":  # one of them
        pairs = pairs and path.name == "pt2e_x86_ops.pt2"
    if not pairs or shutil.which("objdump") is None:
        return
    for text in texts:  # baseline x86-64: SSE2 at most, so any AVX would be the IR's doing
        obj = jit._compile(text, "x86-64", "")
        listing = _disassemble(obj)
        wide = sorted(set(WIDE.findall(listing)))
        assert not wide, wide


def _disassemble(obj: bytes) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".o") as f:
        f.write(obj)
        f.flush()
        return subprocess.run(["objdump", "-d", f.name], capture_output=True, text=True,
                              check=True).stdout


def test_the_scan_finds_the_avx2_kernels_intrinsics(monkeypatch):
    """The scan can fail: the same model's -isa=avx2 IR names x86 intrinsics."""
    path = MODELS / "onnx" / "nets" / ASM_NETS[0]
    mod = load_model(path)
    seen = {}

    def compile_parts(texts, *args, **kwargs):
        seen["texts"] = [t() for t in texts]
        raise _Captured

    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setattr(llvm_backend, "compile_parts", compile_parts)
    with pytest.raises(_Captured):
        P.build(mod, "llvm -isa=avx2")
    assert any(SCAN.search(t) for t in seen["texts"])
