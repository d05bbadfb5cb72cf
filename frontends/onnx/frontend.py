"""from_onnx: an ONNX model to an IRModule, one converter per node (table.py)."""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Mapping

import numpy as np
import onnx
from partita.frontends.errors import (
    ONNXConversionError,
    ONNXError,
    ONNXFormatError,
)
from partita.frontends.errors import (
    ONNXUnsupportedOperatorError as UnsupportedOperatorError,
)

from partita.errors import PartitaError
from partita.ir import Call, Constant, Expr, Function, IRModule, Span, TensorType, Tuple, Var
from partita.passes.infer_type import infer_type

from .context import NodeContext, Unsupported
from .ort_fusion import ort_unfused_nodes
from .ort_kernels import ORT_CPUS, ort_int8_kernel, saturate_pairs
from .reader import DTYPES, Model, input_type, load, read
from .table import CONVERTERS

# Ops never folded even when every input is constant: QDQ rewrites must still see the
# quantize/dequantize of a weight.
NO_FOLD = {"QuantizeLinear", "DequantizeLinear", "Constant"}
MAX_FOLD_ELEMENTS = 1 << 24
MATCHES = ("ort", "ort_disable_all")
# QDQ rules whose float op keeps MLAS arithmetic under match="ort_disable_all".
MLAS_GROUPS = {
    "conv_to_qnn",
    "dense_to_qnn",
    "global_pool_to_qnn",
    "add_to_qnn",
    "multiply_to_qnn",
    "subtract_to_qnn",
}


def from_onnx(
    path_or_model,
    input_shapes: Mapping[str, tuple] | None = None,
    qdq_to_qnn: bool = True,
    match: str = "ort",
    ort_threads: int | None = None,
    freeze_params: bool = True,
    ort_cpu: str | None = None,
):
    """Convert an ONNX model (a path, the file's bytes or an onnx.ModelProto) into an IRModule
    whose ``main`` takes the graph inputs, named after them, and returns the graph outputs.

    Float ops become nn.* / tensor ops in ONNX's NCHW layout; QOperator nodes (QLinearConv, the
    com.microsoft QLinear* ops, ...) become qnn ops with ONNX Runtime's semantics
    (``semantics="onnx"``); QuantizeLinear / DequantizeLinear become qnn.quantize /
    qnn.dequantize, and the QDQ groups around float ops are then rewritten into qnn ops by
    ``partita.frontends.qdq.qdq_to_qnn``. ``input_shapes`` maps input names to static shapes for
    inputs with dynamic dimensions. Every node carries a Span (node index, op type, first output,
    node name); ``mod.attrs["input_names"]`` / ``["output_names"]`` give the graph's names.
    ``qdq_to_qnn=False`` keeps QDQ groups as dequantize -> float op -> quantize.

    ``match`` picks the ONNX Runtime results to reproduce: "ort" (its default optimization
    level: float ops sum exactly, QDQ groups become qnn ops like its fused kernels, except the
    groups it leaves unfused — int8 activations that fan out, see ort_fusion.py — which keep
    MLAS arithmetic for ``ort_threads`` threads) or
    "ort_disable_all" (graph optimizations disabled: float Conv, Gemm, MatMul and
    GlobalAveragePool sum in MLAS's float32 order for ``ort_threads`` threads, default ONNX
    Runtime's own default, the physical cores; their QDQ groups stay dequantize -> float ->
    quantize, as ONNX Runtime runs them). See docs/onnx.md.

    ``ort_cpu`` names the CPU whose ONNX Runtime integer kernels to reproduce: "vnni" (exact
    uint8 x int8 sums: AVX-VNNI, AVX512-VNNI, AMX, Arm) or "avx2" (x86-64 without VNNI, whose
    VPMADDUBSW kernels saturate pairs of products to int16: their qnn.conv2d / qnn.dense get
    accumulate="vpmaddubsw"); default None, this machine's (ort_kernels.py).

    ``freeze_params=False`` returns ``(mod, params)`` as TVM's ``relay.frontend.from_onnx``
    does: the weights become trailing parameters of ``main`` and ``params`` maps their names to
    arrays, for ``partita.build(mod, target, params=params)`` (frontends/params.py).
    """
    if ort_cpu is not None and ort_cpu not in ORT_CPUS:
        raise ONNXError(f"ort_cpu must be one of {ORT_CPUS} or None, got {ort_cpu!r}")
    mod = _from_onnx(path_or_model, input_shapes, qdq_to_qnn, match, ort_threads)
    saturating = (ort_cpu or ort_int8_kernel()) == "avx2"
    if saturating:
        mod = saturate_pairs(mod)
    if ort_cpu is None and match == "ort" and qdq_to_qnn:
        integer = _from_onnx(
            path_or_model, input_shapes, qdq_to_qnn, match, ort_threads, integer=True
        )
        note = _integer_note(mod, integer, saturating)
        if note:  # the two differ: offer the integer one to targets with an accelerator
            integer.attrs["semantics_note"] = note
            mod.attrs["integer_semantics"] = integer
    if freeze_params:
        return mod
    from partita.frontends.params import lift_params

    return lift_params(mod)


def _integer_note(ort: IRModule, integer: IRModule, saturating: bool) -> dict:
    """What the integer import computes differently from ONNX Runtime on this CPU, per output:
    the convolutions / matmuls upstream of it that sum exactly where ORT saturates int16 pairs,
    and the QDQ groups ORT runs in float (MLAS) that are integer ops here. Empty when the two
    imports compute the same."""
    from partita.ir import Call, Tuple
    from partita.ir.visitor import post_order

    def counts(root):
        calls = [c for c in post_order(root) if isinstance(c, Call)]
        paired = sum(getattr(c.attrs, "accumulate", "") == "vpmaddubsw" for c in calls)
        mlas = sum(
            getattr(c.op, "name", "") in ("nn.conv2d", "nn.dense", "nn.matmul", "nn.batch_matmul")
            and getattr(c.attrs, "accumulate", None) == "mlas"
            for c in calls
        )
        return paired, mlas

    body = ort["main"].body
    roots = list(body.fields) if isinstance(body, Tuple) else [body]
    names = list(ort.attrs.get("output_names") or ())
    if len(names) != len(roots):
        names = [f"output_{i}" for i in range(len(roots))]
    outputs = []
    for name, root in zip(names, roots):
        paired, mlas = counts(root)
        outputs.append(
            {
                "name": name,
                "exact_sums": paired,
                "integer_groups": mlas,
                "equal": paired == 0 and mlas == 0,
            }
        )
    if all(o["equal"] for o in outputs):
        return {}
    cpu = "this CPU (x86-64 without VNNI)" if saturating else "this CPU"
    return {
        "runtime": f"ONNX Runtime on {cpu}",
        "semantics": "integer semantics (exact int32 sums, every QDQ group an integer op), as "
        "NPU toolchains compile it",
        "outputs": outputs,
        "how": "from_onnx(ort_cpu=...) reproduces ONNX Runtime bit for bit; "
        "partita.frontends.onnx.compare_semantics(mod, inputs) measures the difference",
    }


def compare_semantics(mod: IRModule, inputs) -> list[dict]:
    """Per output of ``mod``, how its integer-semantics variant (what a build for an NPU target
    computes) differs from ``mod`` itself (ONNX Runtime on this CPU): ``equal``, the largest
    difference (``max_abs``; ``max_lsb`` in steps of the output's quantization, for integer
    outputs and outputs of a DequantizeLinear) and the fraction of values that differ."""
    import numpy as np

    from partita.interpreter import interpret
    from partita.ir import Call, Constant, Tuple

    variant = mod.attrs.get("integer_semantics")
    want = interpret(mod, inputs)
    got = interpret(variant, inputs) if isinstance(variant, IRModule) else want
    body = mod["main"].body
    roots = list(body.fields) if isinstance(body, Tuple) else [body]
    out = []
    for a, b, root in zip(got, want, roots):
        a, b = np.asarray(a), np.asarray(b)
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        step = 1.0 if np.issubdtype(b.dtype, np.integer) else None
        if isinstance(root, Call) and getattr(root.op, "name", "") == "qnn.dequantize":
            scale = root.args[1]
            if isinstance(scale, Constant) and np.asarray(scale.data).size == 1:
                step = float(np.asarray(scale.data))
        worst = float(diff.max()) if diff.size else 0.0
        out.append(
            {
                "equal": bool(np.array_equal(a, b)),
                "max_abs": worst,
                "max_lsb": round(worst / step, 3) if step else None,
                "differing": float(np.mean(diff > 0)) if diff.size else 0.0,
            }
        )
    return out


def _from_onnx(
    path_or_model, input_shapes, qdq_to_qnn, match, ort_threads, integer: bool = False
) -> IRModule:
    if match not in MATCHES:
        raise ONNXError(f"match must be one of {MATCHES}, got {match!r}")
    if ort_threads is not None and (not isinstance(ort_threads, int) or ort_threads < 1):
        raise ONNXError(f"ort_threads must be a positive int, got {ort_threads!r}")
    model = read(load(path_or_model))
    threads, unfused = None, None
    if match == "ort_disable_all":
        threads = ort_threads or ort_default_threads()
    elif qdq_to_qnn and not integer:  # integer: every group fused, as NPU toolchains do
        unfused = ort_unfused_nodes(model.graph, model.initializers)
        threads = (ort_threads or ort_default_threads()) if unfused else None
    mod = _Graph(model, dict(input_shapes or {}), threads, unfused).convert()
    if not qdq_to_qnn:
        return mod
    return _rewrite_qdq(
        mod, exclude=MLAS_GROUPS if match == "ort_disable_all" else (), keep_nodes=unfused or ()
    )


def _rewrite_qdq(mod: IRModule, exclude, keep_nodes=()) -> IRModule:
    """qdq_to_qnn(mod, "onnx") without the rules named in ``exclude``, and leaving the groups
    of the float nodes (by index) in ``keep_nodes`` as they are."""
    from partita.frontends import qdq
    from partita.patterns import RewriteTable

    if not exclude and not keep_nodes:
        return qdq.qdq_to_qnn(mod, semantics="onnx")
    table = qdq.qdq_rules("onnx")
    rules = [
        (r.pattern, _skipping(r.fn, set(keep_nodes)) if keep_nodes else r.fn, r.name)
        for r in table.rules
        if r.name not in exclude
    ]
    out = RewriteTable(rules, require_type=True, name=table.name)(qdq.unshare_dequantize(mod))
    return IRModule(dict(out.functions), attrs=mod.attrs)


def _skipping(fn, keep_nodes: set[int]):
    """A rule fn that declines groups containing one of the nodes ``keep_nodes``."""

    sig = inspect.signature(fn)
    takes_all = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())

    def rule(**captures):
        for v in captures.values():
            span = getattr(v, "span", None)
            if isinstance(v, Call) and span is not None and span.index in keep_nodes:
                return None
        return fn(
            **(
                captures
                if takes_all
                else {k: v for k, v in captures.items() if k in sig.parameters}
            )
        )

    return rule


def ort_default_threads() -> int:
    """ONNX Runtime's default intra-op thread count: the physical cores /proc/cpuinfo lists
    (else os.cpu_count())."""
    cores, package = set(), None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "physical id":
                    package = value.strip()
                elif key.strip() == "core id":
                    cores.add((package, value.strip()))
    except OSError:
        pass
    return len(cores) or os.cpu_count() or 1


class _Graph:
    """Tensor name -> expression (or numpy value for constants) while nodes are converted."""

    def __init__(
        self,
        model: Model,
        input_shapes: dict,
        mlas_threads: int | None = None,
        mlas_nodes: set[int] | None = None,
    ):
        self.model = model
        self.mlas_threads = mlas_threads  # float ops in MLAS arithmetic, or None (exact)
        self.mlas_nodes = mlas_nodes  # only these node indices (None: all)
        self.values: dict[str, Expr | np.ndarray] = dict(model.initializers)
        self.consts: dict[str, Constant] = {}
        self.poisoned: set[str] = set()
        self.unsupported: list = []
        names = [vi.name for vi in model.inputs]
        unknown = set(input_shapes) - set(names)
        if unknown:
            raise ONNXError(
                f"input_shapes names {sorted(unknown)}, which are not inputs of the "
                f"model (its inputs: {names})"
            )
        self.params = [self._input(vi, input_shapes) for vi in model.inputs]

    def _input(self, vi, input_shapes) -> Var:
        if vi.name in self.values:
            raise ONNXFormatError(f"graph input {vi.name!r} is listed twice")
        shape, dtype = input_type(vi, input_shapes)
        v = Var(vi.name, TensorType(shape, dtype), span=Span(tensor=vi.name))
        self.values[vi.name] = v
        return v

    # ---- values ---------------------------------------------------------------------------------

    def lookup(self, name: str, ctx: NodeContext):
        try:
            return self.values[name]
        except KeyError:
            raise ONNXFormatError(
                f"node #{ctx.index} {ctx.op_type} {ctx.node.name!r} reads {name!r}, which is "
                f"neither a graph input, an initializer nor the output of an earlier node "
                f"(a missing initializer, or nodes out of topological order)"
            ) from None

    def expr(self, name: str, ctx: NodeContext) -> Expr:
        v = self.lookup(name, ctx)
        if not isinstance(v, np.ndarray):
            return v
        if name not in self.consts:
            if v.dtype.name not in DTYPES.values():
                ctx.fail(f"constant {name!r} has unsupported type {v.dtype.name}")
            self.consts[name] = Constant(
                v, span=Span(index=ctx.index, op_type=ctx.op_type, tensor=name)
            )
        return self.consts[name]

    # ---- conversion -----------------------------------------------------------------------------

    def convert(self) -> IRModule:
        for index, node in enumerate(self.model.graph.node):
            self._convert_node(index, node)
        if self.unsupported:
            raise UnsupportedOperatorError(self.unsupported)
        outputs = []
        for vi in self.model.graph.output:
            if vi.name not in self.values:
                raise ONNXFormatError(f"graph output {vi.name!r} is never computed")
            v = self.values[vi.name]
            outputs.append(
                Constant(v, span=Span(tensor=vi.name)) if isinstance(v, np.ndarray) else v
            )
        if not outputs:
            raise ONNXFormatError("the graph has no outputs")
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        fn = Function(self.params, body)
        try:
            infer_type(fn)
        except PartitaError as e:
            raise ONNXConversionError(f"the converted graph does not type-check: {e}") from None
        attrs = {
            "input_names": tuple(p.name_hint for p in self.params),
            "output_names": tuple(vi.name for vi in self.model.graph.output),
        }
        return IRModule({"main": fn}, attrs=attrs)

    def _convert_node(self, index: int, node: onnx.NodeProto) -> None:
        if any(i in self.poisoned for i in node.input):
            self.poisoned.update(node.output)  # downstream of an unsupported node
            return
        domain = (
            "com.microsoft"
            if node.domain == "com.microsoft"
            else ("ai.onnx" if node.domain in ("", "ai.onnx") else node.domain)
        )
        ctx = NodeContext(self, node, index)
        if domain not in self.model.opsets:
            return self._unsupported(ctx, f"domain {node.domain!r} is not imported by the model")
        if domain == "ai.onnx":
            arity = _arity(node.op_type, self.model.opsets["ai.onnx"])
            if arity is not None and not arity[0] <= len(node.input) <= arity[1]:
                low, high = arity
                takes = f"{low}" if low == high else f"{low} to {high}"
                ctx.fail(f"has {len(node.input)} inputs; ONNX's {node.op_type} takes {takes}")
        if domain == "ai.onnx" and node.op_type not in NO_FOLD and self._fold(ctx):
            return
        entry = CONVERTERS.get((domain, node.op_type))
        if entry is None:
            reason = (
                "no converter for this operator"
                if domain in ("ai.onnx", "com.microsoft")
                else f"unknown domain {node.domain!r}"
            )
            return self._unsupported(ctx, reason)
        try:
            results = entry(ctx)
        except Unsupported as e:
            return self._unsupported(ctx, str(e))
        except (
            TypeError,
            ValueError,
            IndexError,
            KeyError,
            AttributeError,
            OverflowError,
            ZeroDivisionError,
        ) as e:
            # attributes or operands of the wrong kind (a malformed or corrupted model)
            ctx.fail(f"malformed node ({type(e).__name__}: {e})")
        results = results if isinstance(results, list) else [results]
        outputs = [o for o in node.output]
        if len(results) < len([o for o in outputs if o]):
            ctx.fail(f"has {len(outputs)} outputs; partita computes {len(results)}")
        for name, value in zip(outputs, results):
            if name:
                self._bind(ctx, name, value)

    def _fold(self, ctx: NodeContext) -> bool:
        """Evaluate a node whose inputs are all constants with onnx.reference (shape arithmetic
        that exporters emit); False if it cannot be folded here."""
        node = ctx.node
        ins = [self.values.get(n) if n else None for n in node.input]
        if (
            not node.input
            or not all(v is None or isinstance(v, np.ndarray) for v in ins)
            or all(v is None for v in ins)
        ):
            return False
        if sum(v.size for v in ins if v is not None) > MAX_FOLD_ELEMENTS:
            return False
        try:
            from onnx.reference import ReferenceEvaluator

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                feeds = {n: v for n, v in zip(node.input, ins) if n}
                outs = ReferenceEvaluator(node).run(None, feeds)
        except Exception:  # noqa: BLE001 - fall back to converting the node
            return False
        for name, value in zip(node.output, outs):
            if name:
                arr = np.asarray(value)
                if arr.dtype.name not in DTYPES.values():
                    return False
                self.values[name] = arr
        return True

    def _bind(self, ctx: NodeContext, name: str, value) -> None:
        if name in self.values:
            ctx.fail(f"writes {name!r}, which already has a value")
        self.values[name] = value

    def _unsupported(self, ctx: NodeContext, reason: str) -> None:
        node = ctx.node
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        self.unsupported.append((ctx.index, op, node.name, reason))
        self.poisoned.update(node.output)


@functools.lru_cache(maxsize=512)
def _arity(op_type: str, opset: int) -> tuple[int, int] | None:
    """How many inputs ONNX's schema lets ``op_type`` take at ``opset`` (optional inputs
    included), or None when onnx has no schema for it (a malformed node's extra inputs were
    silently ignored by converters that read only the first ones)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except (onnx.defs.SchemaError, TypeError, ValueError):  # a name onnx cannot read (bytes)
        return None
    return schema.min_input, schema.max_input
