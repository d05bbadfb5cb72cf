"""from_pytorch: a torch.export program or a TorchScript model to an IRModule.

torch is imported here, lazily, so that importing partita.frontends never imports it.
"""

from __future__ import annotations

import io
import os
import zipfile

from partita.frontends.errors import PyTorchError, PyTorchFormatError

from partita.ir import IRModule
from partita.passes.infer_type import infer_type

from .inputs import example_specs

MAX_FILE_BYTES = 2**33
MATCHES = ("qnn", "pytorch_eager")


def from_pytorch(
    model_or_path,
    example_inputs=None,
    *,
    convert_qdq: bool = True,
    float_bias: bool = False,
    match: str = "qnn",
    engine: str | None = None,
    avx512_vnni: bool | None = None,
) -> IRModule:
    """Convert a PyTorch model into an IRModule whose ``main`` takes the model's inputs.

    ``model_or_path``: a torch.export ExportedProgram or its ``.pt2`` file (float, or PT2E
    quantized by torchao's convert_pt2e), a TorchScript module or ``.pt`` file (eager or FX
    quantized, traced), the bytes of either file, or an ``nn.Module`` (exported with
    ``example_inputs``). ``example_inputs`` (tensors, arrays or shapes) fixes the input shapes:
    TorchScript files need it, programs with dynamic dimensions too. PT2E quantize/dequantize
    groups become QNN ops through the QDQ rewrites unless ``convert_qdq`` is False. TorchScript
    convolutions and linear layers become qnn ops with fbgemm's output stage (qnn.requantize
    "fbgemm", bit-exact with PyTorch's x86 kernels), or, with ``float_bias``, the same
    arithmetic as float ops. ``match="pytorch_eager"`` reproduces PyTorch's own float32 CPU
    execution of a program: QDQ groups stay dequantize -> float op -> quantize, convolutions
    and global average pools sum as PyTorch 2.13's kernels (accumulate="torch_cpu"),
    quantize rounds x * float32(1 / scale). Every node's span names the FX node (or
    TorchScript value) and its target. See docs/pytorch.md.

    ``engine`` is the quantized engine whose kernels to reproduce for a TorchScript model:
    "x86", "fbgemm" or "onednn" (default: ``torch.backends.quantized.engine``, which PyTorch
    runs the model with). Under "x86", PyTorch gives a convolution to oneDNN when the CPU has
    AVX512-VNNI, the groups are at most 100 and the weights symmetric, else to fbgemm;
    ``avx512_vnni`` (default: this CPU's, as PyTorch reads it) picks another machine's choice.
    """
    if match not in MATCHES:
        raise PyTorchError(f"match must be one of {MATCHES}, got {match!r}")
    eager = match == "pytorch_eager"
    torch = _import_torch()
    specs = example_specs(example_inputs)
    model = _load(torch, model_or_path, example_inputs)
    if isinstance(model, torch.export.ExportedProgram):
        from .fx_graph import FxGraph
        from .residual import fold_residual_convs

        mod = FxGraph(model, specs, {"torch_cpu": eager}).convert()
        infer_type(mod["main"])
        if eager and convert_qdq:  # a target with the NPU runs the QDQ groups as qnn ops
            qnn = FxGraph(model, specs, {"torch_cpu": False}).convert()
            infer_type(qnn["main"])
            variant = fold_residual_convs(_qdq_to_qnn(qnn))  # x86 quantizers' conv + add
            _offer_integer(mod, variant, "PyTorch's float32 CPU execution")
        return _qdq_to_qnn(mod) if convert_qdq and not eager else mod
    from .ts_graph import TsGraph

    if specs is None:
        raise PyTorchError(
            "a TorchScript model has no static input shapes: pass example_inputs "
            "(tensors or shapes, one per input)"
        )
    graph = TsGraph(model, specs, float_bias)
    graph.options["torch_cpu"] = eager
    graph.options["engine"] = _engine(torch, engine)
    graph.options["avx512_vnni"] = (
        bool(torch.cpu._is_vnni_supported()) if avx512_vnni is None else bool(avx512_vnni)
    )
    mod = graph.convert()
    infer_type(mod["main"])
    if not eager and not float_bias:
        integer = TsGraph(model, specs, False)
        integer.options.update(graph.options, integer=True)
        variant = integer.convert()
        infer_type(variant["main"])
        _offer_integer(mod, variant, f"PyTorch's {graph.options['engine']} quantized kernels")
    return mod


def _offer_integer(mod: IRModule, variant: IRModule, runtime: str) -> None:
    """Offer ``variant`` (integer semantics) to targets with an accelerator, with a note per
    output of what it computes differently from ``runtime`` (backends/npu/semantics.py)."""
    from partita.ir import Call, Tuple
    from partita.ir.visitor import post_order

    def departures(root) -> int:
        return sum(
            isinstance(c, Call)
            and (
                getattr(c.attrs, "semantics", "") in ("fbgemm", "onednn")
                or getattr(c.attrs, "accumulate", "exact") not in ("exact", None)
                or getattr(c.op, "name", "") in ("nn.conv2d", "nn.dense", "nn.matmul")
            )
            for c in post_order(root)
        )

    body = mod["main"].body
    roots = list(body.fields) if isinstance(body, Tuple) else [body]
    names = list(mod.attrs.get("output_names") or ())
    if len(names) != len(roots):
        names = [f"output_{i}" for i in range(len(roots))]
    outputs = []
    for name, root in zip(names, roots):
        n = departures(root)
        outputs.append(
            {
                "name": name,
                "equal": n == 0,
                "detail": f"{n} of the ops it depends on round, sum or run in float "
                f"differently there and run as integer ops here",
            }
        )
    if all(o["equal"] for o in outputs):
        return
    variant.attrs["semantics_note"] = {
        "runtime": f"{runtime} on this CPU",
        "semantics": "integer semantics (exact int32 sums, integer bias, fixed-point "
        "requantization, every QDQ group an integer op), as NPU toolchains compile it",
        "outputs": outputs,
        "how": "build for a target without the NPU to reproduce PyTorch bit for bit",
    }
    mod.attrs["integer_semantics"] = variant


ENGINES = ("x86", "fbgemm", "onednn")


def _engine(torch, engine: str | None) -> str:
    engine = torch.backends.quantized.engine if engine is None else engine
    if engine not in ENGINES:
        raise PyTorchError(
            f"engine must be one of {ENGINES} (the quantized engines of x86 CPUs), got {engine!r}"
        )
    return engine


def _import_torch():
    try:
        import torch
    except ImportError:
        raise PyTorchError("from_pytorch needs torch: pip install 'partita[torch]'") from None
    # Quantized PT2E programs reference quantized_decomposed ops, registered by this import.
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    return torch


def _load(torch, obj, example_inputs):
    if isinstance(obj, (torch.export.ExportedProgram, torch.jit.ScriptModule)):
        return obj
    if isinstance(obj, torch.nn.Module):
        return _export(torch, obj, example_inputs)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return _load_bytes(torch, bytes(obj), "<bytes>")
    if isinstance(obj, (str, os.PathLike)):
        return _load_bytes(torch, _read(obj), os.fspath(obj))
    raise PyTorchError(
        f"from_pytorch takes an ExportedProgram, a TorchScript module, an "
        f"nn.Module, a path or bytes, not {type(obj).__name__}"
    )


def _export(torch, model, example_inputs):
    if example_inputs is None:
        raise PyTorchError("exporting an nn.Module needs example_inputs (its input tensors)")
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not all(isinstance(a, torch.Tensor) for a in args):
        raise PyTorchError("exporting an nn.Module needs example_inputs as torch tensors")
    try:
        return torch.export.export(model.eval(), args)
    except Exception as e:  # torch raises many kinds here; the user needs the message
        raise PyTorchError(f"torch.export failed: {type(e).__name__}: {e}") from None


def _read(path) -> bytes:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise PyTorchFormatError(f"{os.fspath(path)!r} is {size} bytes, too large a model")
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise PyTorchError(
            f"cannot read the PyTorch model {os.fspath(path)!r}: {e.strerror or e}"
        ) from None


def _load_bytes(torch, data: bytes, where: str):
    """A .pt2 (torch.export archive) or TorchScript .pt, told apart by the zip's contents."""
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise PyTorchFormatError(
            f"{where} is not a PyTorch model archive (not a zip file: {e})"
        ) from None
    kind = (
        "torchscript"
        if any(n.endswith("constants.pkl") or "/code/" in n for n in names)
        else "export"
        if any("/models/" in n or n.endswith("archive_format") for n in names)
        else None
    )
    if kind is None:
        raise PyTorchFormatError(
            f"{where} is a zip file but neither a torch.export archive "
            f"(.pt2) nor a TorchScript file"
        )
    try:
        if kind == "export":
            return torch.export.load(io.BytesIO(data))
        return torch.jit.load(io.BytesIO(data), map_location="cpu")
    except Exception as e:  # corrupt archives fail deep inside torch with many error types
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise PyTorchFormatError(
            f"{where}: torch cannot load this "
            f"{'.pt2 archive' if kind == 'export' else 'TorchScript file'}"
            f" ({type(e).__name__}: {msg})"
        ) from None


def _qdq_to_qnn(mod: IRModule) -> IRModule:
    """The shared QDQ -> QNN rewrites (frontends/qdq.py) with "onnx" semantics, the closest to
    PyTorch's reference arithmetic (float32 scales, round half to even)."""
    from partita.frontends.qdq import qdq_to_qnn

    return qdq_to_qnn(mod, semantics="onnx")
