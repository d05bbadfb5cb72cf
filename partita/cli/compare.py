"""``partita compare``: every intermediate tensor of a compiled model against a reference,
layer by layer — the first op whose output differs and a histogram of the differences in LSB.

    partita compare model.tflite --target "npu, llvm" --against tflite
    partita compare model.onnx -t "npu, llvm" --against onnxruntime --json
    partita compare model.tflite -t "npu, llvm" --against "npu -config=u65-256, ref"

Every source op's output becomes an output of the compiled model too (its partitions then
return it; the arithmetic is the same, only the boundaries move), so the values are the ones
the accelerator and the host compute. The reference gives the same tensors: TFLite's
interpreter with ``experimental_preserve_all_tensors``, ONNX Runtime with every node output
added to the graph's outputs, partita's interpreter, or another target. Exit status 0 when every
tensor agrees within ``--tolerance`` LSB, 1 when one does not (for CI).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from partita.cli.errors import UsageError

EXAMPLES = """examples:
  partita compare model.tflite --target "npu, llvm" --against tflite
  partita compare model.onnx -t "npu, llvm" --against onnxruntime --tolerance 1
  partita compare model.tflite -t "npu, llvm" --against tflite_builtin   (reference vs optimized)
  partita compare model.tflite -t "npu, llvm" --against interpreter --json
  partita compare model.tflite -t "npu, llvm" --against "npu -config=u65-256, ref\""""

BUCKETS = ("0", "1", "2", "3-7", "8+")
# tflite: the kernels the model was imported for (--semantics; reference kernels by default);
# the others name TFLite's kernels explicitly
TFLITE_REFERENCES = ("tflite", "tflite_ref", "tflite_builtin", "tflite_xnnpack")


@dataclass
class LayerDiff:
    """One source op's output: where it ran and how far it is from the reference."""

    index: int
    op: str
    tensor: str
    shape: list
    max_lsb: float
    differing: int
    histogram: dict = field(default_factory=dict)
    note: str = ""


def _bucket(d: np.ndarray) -> dict:
    return {
        "0": int((d == 0).sum()),
        "1": int((d == 1).sum()),
        "2": int((d == 2).sum()),
        "3-7": int(((d >= 3) & (d < 8)).sum()),
        "8+": int((d >= 8).sum()),
    }


def layer_outputs(mod) -> list:
    """(index, op type, tensor name, node) for each source op's output in ``main``: the last
    node, in dataflow order, with the op's span and its output tensor's name."""
    from partita.ir import Call
    from partita.ir.graph import dataflow_order

    last: dict = {}
    for node in dataflow_order(mod["main"].body):
        span = getattr(node, "span", None)
        if type(node) is not Call or span is None or span.index is None:
            continue
        t = node.type_or_none
        if getattr(t, "dtype", None) is None:
            continue
        last[span.index] = (span.index, span.op_type or node.op_name, span.tensor or "", node)
    return [last[k] for k in sorted(last)]


def _with_outputs(mod, nodes):
    """``mod`` whose main also returns ``nodes`` (after its own result)."""
    from partita.ir import IRModule, Tuple

    main = mod["main"]
    body = main.body
    results = list(body.fields) if type(body) is Tuple else [body]
    fn = main.with_body(Tuple(results + list(nodes)))
    out = IRModule({}, mod.attrs)
    for name, f in mod.items():
        out[name] = fn if name == "main" else f
    return out, len(results)


def _random_inputs(mod, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for p in mod["main"].params:
        t = p.type_annotation
        if np.dtype(t.dtype).kind in "iu":
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max + 1, t.shape, dtype=t.dtype))
        else:
            out.append(rng.standard_normal(t.shape).astype(t.dtype))
    return out


def _run_partita(mod, target: str, inputs) -> list:
    from partita import build

    return build(mod, target).run(*inputs)


def _tflite(path: str, inputs, layers, semantics: str | None = None) -> dict:
    """TFLite's tensors: the reference kernels (BUILTIN_REF) for ``semantics="tflite"`` (the
    frontend's default), the optimized builtin ones (no delegate) for ``"tflite_builtin"``."""
    import warnings

    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = {
        "tflite_builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        "tflite_xnnpack": OpResolverType.AUTO,
    }.get(semantics, OpResolverType.BUILTIN_REF)
    with warnings.catch_warnings():  # "preserve_all_tensors is for debugging": it is here
        warnings.simplefilter("ignore")
        interp = Interpreter(
            model_path=str(path),
            experimental_preserve_all_tensors=True,
            experimental_op_resolver_type=resolver,
        )
    interp.allocate_tensors()
    for detail, array in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], array)
    interp.invoke()
    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    out = {}
    for index, _op, tensor, _node in layers:
        if tensor in by_name:
            out[index] = interp.get_tensor(by_name[tensor])
    return out


def _onnxruntime(path: str, inputs, layers, match: str | None = None) -> dict:
    """ONNX Runtime with every compared tensor added to the graph's outputs (with
    ``match="ort_disable_all"`` its graph optimizations off, as the frontend then assumes;
    an output in the middle of a QDQ group also stops ORT fusing that group)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    have = {o.name for o in model.graph.output}
    for _i, _op, tensor, _node in layers:
        if tensor and tensor not in have:
            model.graph.output.append(onnx.ValueInfoProto(name=tensor))
            have.add(tensor)
    options = ort.SessionOptions()
    if match == "ort_disable_all":
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(names, feeds)))
    return {index: values[t] for index, _op, t, _n in layers if t in values}


def compare(
    mod,
    target: str,
    against: str,
    model_path=None,
    inputs=None,
    seed: int = 0,
    semantics: str | None = None,
    match: str | None = None,
) -> tuple[list[LayerDiff], list]:
    """Compare every source op's output of ``mod`` built for ``target`` with ``against``
    (tflite, onnxruntime, interpreter, or another target string). Returns the rows and the
    inputs used."""
    import partita as P

    layers = layer_outputs(mod)
    if not layers:
        raise UsageError("the model has no source ops with spans to compare")
    extended, n_results = _with_outputs(mod, [n for *_x, n in layers])
    inputs = list(inputs) if inputs is not None else _random_inputs(mod, seed)
    ours = _run_partita(extended, target, inputs)[n_results:]
    if against == "interpreter":
        theirs = dict(zip([i for i, *_x in layers], P.interpret(extended, inputs)[n_results:]))
    elif against in TFLITE_REFERENCES:
        kernels = semantics if against == "tflite" else against
        theirs = _tflite(model_path, inputs, layers, kernels)
    elif against in ("onnxruntime", "ort", "onnx"):
        theirs = _onnxruntime(model_path, inputs, layers, match)
    else:
        theirs = dict(
            zip([i for i, *_x in layers], _run_partita(extended, against, inputs)[n_results:])
        )
    rows = []
    for (index, op, tensor, _node), mine in zip(layers, ours):
        ref = theirs.get(index)
        if ref is None:
            rows.append(LayerDiff(index, op, tensor, list(mine.shape), 0.0, 0, {}, "no reference"))
            continue
        ref = np.asarray(ref)
        if ref.shape != mine.shape and ref.size == mine.size:
            ref = ref.reshape(mine.shape)
        if ref.shape != mine.shape or ref.dtype != mine.dtype:
            # not the same tensor (a QDQ model's float Conv output, fused here into an int8 op)
            note = f"{ref.dtype}{list(ref.shape)} in the reference: not compared"
            rows.append(LayerDiff(index, op, tensor, list(mine.shape), 0.0, 0, {}, note))
            continue
        if mine.dtype.kind in "iu":
            d = np.abs(mine.astype(np.int64) - ref.astype(np.int64))
        else:  # float: the difference in units of the reference's last place
            spacing = np.spacing(np.abs(ref.astype(mine.dtype))).astype(np.float64)
            d = np.round(np.abs(mine.astype(np.float64) - ref.astype(np.float64)) / spacing)
        rows.append(
            LayerDiff(
                index,
                op,
                tensor,
                list(mine.shape),
                float(d.max(initial=0)),
                int((d > 0).sum()),
                _bucket(d),
            )
        )
    return rows, inputs


def first_difference(rows, tolerance: float = 0) -> LayerDiff | None:
    """The first op (in source order) whose output differs by more than ``tolerance`` LSB."""
    return next((r for r in rows if r.max_lsb > tolerance), None)


def table(rows, against: str, tolerance: float) -> str:
    head = f"{'#':>4}  {'op':<20} {'max LSB':>8} {'differ':>8}  histogram |diff| in LSB"
    lines = [f"compared with {against}:", head]
    for r in rows:
        hist = " ".join(f"{k}:{v}" for k, v in r.histogram.items() if v) or r.note
        mark = " <" if r.max_lsb > tolerance else ""
        lines.append(
            f"{r.index:>4}  {r.op[:20]:<20} {r.max_lsb:>8g} {r.differing:>8}  {hist}{mark}"
        )
    first = first_difference(rows, tolerance)
    lines.append(
        f"first difference: #{first.index} {first.op} ({first.tensor}), up to {first.max_lsb:g} LSB"
        if first
        else f"every one of {len(rows)} tensors agrees (tolerance {tolerance:g} LSB)"
    )
    return "\n".join(lines) + "\n"


def add_parser(commands) -> None:
    """The ``compare`` command's arguments."""
    import argparse

    p = commands.add_parser(
        "compare",
        help="compare every intermediate tensor with a reference, layer by layer",
        description="Compile MODEL for TARGET and compare the output of every source op with "
        "TFLite (all tensors preserved), ONNX Runtime (every node output added), partita's "
        "interpreter or another target; print the first op that differs and a histogram of "
        "the differences in LSB per op. Exit status 1 when a tensor differs.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="a .tflite, .onnx or .pt2 model")
    p.add_argument(
        "--target", "-t", required=True, help='the composite target compiled, e.g. "npu, llvm"'
    )
    p.add_argument(
        "--against",
        required=True,
        metavar="REF",
        help="tflite (the kernels --semantics names), tflite_ref, tflite_builtin, "
        "tflite_xnnpack, onnxruntime, interpreter, or another target string",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0,
        metavar="LSB",
        help="differences up to this many LSB count as agreement (default 0)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument(
        "--semantics",
        choices=("tflite", "tflite_builtin"),
        help="TFLite: the reference kernels (default) or the optimized ones",
    )
    p.add_argument(
        "--match",
        metavar="MODE",
        help="ONNX: ort (default) or ort_disable_all (then ORT runs unoptimized too)",
    )
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...")
    p.add_argument("-v", "--verbose", action="store_true", help="show each step")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")


def compare_cmd(args, out, progress) -> int:
    """``partita compare``."""
    from partita.cli.models import load_model, parse_shapes

    ext = Path(args.model).suffix
    if args.against in TFLITE_REFERENCES and ext != ".tflite":
        raise UsageError("--against tflite compares a .tflite model")
    if args.against in ("onnxruntime", "ort", "onnx") and ext != ".onnx":
        raise UsageError("--against onnxruntime compares an .onnx model")
    with progress.step(f"import {Path(args.model).name}"):
        mod = load_model(args.model, parse_shapes(args.input_shape), args.semantics, args.match)
    with progress.step(f"compare with {args.against}"):
        rows, _inputs = compare(
            mod,
            args.target,
            args.against,
            args.model,
            seed=args.seed,
            semantics=args.semantics,
            match=args.match,
        )
    first = first_difference(rows, args.tolerance)
    if args.json:
        data = {
            "against": args.against,
            "tolerance": args.tolerance,
            "first_difference": asdict(first) if first else None,
            "rows": [asdict(r) for r in rows],
        }
        out.write(json.dumps(data, indent=2) + "\n")
    else:
        out.write(table(rows, args.against, args.tolerance))
    return 1 if first else 0
