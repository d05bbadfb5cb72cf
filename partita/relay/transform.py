"""``tvm.relay.transform`` spellings: the generic passes and the BYOC passes, TVM's arguments."""

from __future__ import annotations

from partita.backends.registry import DEFAULT_HOST
from partita.errors import PartitaError
from partita.ir import Call, Function, GlobalVar, IRModule, Var
from partita.ir.graph import dataflow_order
from partita.ir.visitor import ExprMutator as _CoreMutator
from partita.ir.visitor import post_order, substitute
from partita.partition import AnnotateTarget as _AnnotateTarget
from partita.partition import MergeComposite as _MergeComposite
from partita.partition import PartitionGraph as _PartitionGraph
from partita.partition.annotations import DEFAULT, annotate_regions, annotation_kind
from partita.partition.merge_regions import merge_regions
from partita.partition.regions import Region, flatten, map_inner_functions, map_open_functions
from partita.passes import (
    AlterOpLayout,
    ConvertLayout,
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    Inline,
    PassContext,
    Sequential,
    SimplifyExpr,
    SimplifyInference,
)
from partita.passes import FuseOps as _FuseOps
from partita.passes import InferType as _InferType
from partita.passes.infer_type import infer_type
from partita.passes.infra import Pass

from .op_attr import sanitise_table, target_name, tvm_name
from .registry import get_global_func


def _type_called_params(fn: Function, mod: IRModule) -> None:
    """Give the unannotated parameters of a called function literal (a composite written
    without types) the types of its arguments, as Relay's inference unifies them; the
    parameters keep no annotation (Relay prints them bare too)."""
    progress = True
    while progress:
        progress = False
        for node in post_order(fn):
            if type(node) is not Call or type(node.op) is not Function:
                continue
            params = node.op.params
            if all(p.type_or_none is not None for p in params):
                continue
            try:
                types = [infer_type(a, mod) for a in node.args]
            except PartitaError:
                continue  # an argument waits for an outer parameter: the next round
            for p, t in zip(params, types):
                if p.type_or_none is None:
                    p.with_type(t)
                    progress = True


def _annotate_params(_name: str, fn: Function) -> Function:
    """The function literals in ``fn`` with their typed, unannotated parameters annotated (TVM's
    InferType writes the types it inferred into missing annotations)."""
    mapping: dict = {}
    for node in post_order(fn.body):
        if type(node) is Function and any(
            p.type_annotation is None and p.type_or_none is not None for p in node.params
        ):
            for p in node.params:
                if p.type_annotation is None and p.type_or_none is not None:
                    mapping[p] = Var(p.name_hint, p.type_or_none, p.span)
    return fn.with_body(substitute(fn.body, mapping)) if mapping else fn


def InferType():  # noqa: N802 (TVM's name)
    """TVM's ``InferType()``: partita's, and a called function literal's parameters without a
    type annotation take their arguments' types and keep them as annotations, as TVM's does
    (partita's own InferType asks for annotations)."""

    def run(mod: IRModule, ctx) -> IRModule:
        for fn in mod.functions.values():
            _type_called_params(fn, mod)
        return _InferType().transform(map_open_functions(mod, _annotate_params), ctx)

    return _PythonPass(run, "InferType", 0)


def FuseOps(fuse_opt_level: int = -1):  # noqa: N802 (TVM's name)
    """TVM's ``FuseOps(fuse_opt_level)``: -1 takes the PassContext's opt level."""
    return _FuseOps(fuse_opt_level=fuse_opt_level)


def MergeComposite(pattern_table):  # noqa: N802 (TVM's name)
    """TVM's ``MergeComposite(table)``: composites named as the table names them
    (``"ethos-n.qnn_conv2d"``). partita's backends are identifiers, so the pass runs with the
    sanitised names (``"ethos_n.qnn_conv2d"``) and gives the composites TVM's back."""
    inner = _MergeComposite(sanitise_table(pattern_table))

    def run(mod: IRModule, ctx) -> IRModule:
        return _rename_composites(inner.transform(mod, ctx), _tvm_composite)

    return _PythonPass(run, inner.name, inner.opt_level)


def _tvm_composite(name: str) -> str:
    head, dot, tail = name.partition(".")
    return tvm_name(head) + dot + tail if dot else name


def _partita_composite(name: str) -> str:
    head, dot, tail = name.partition(".")
    return target_name(head) + dot + tail if dot else name


def _rename_composites(mod: IRModule, rename) -> IRModule:
    """``mod`` with every composite's name passed through ``rename``."""

    class _Rename(_CoreMutator):
        def rewrite_function(self, fn, params, body):
            out = super().rewrite_function(fn, params, body)
            name = fn.attrs.get("Composite")
            if name is None or rename(name) == name:
                return out
            attrs = {**out.attrs, "Composite": rename(name)}
            return Function(out.params, out.body, out.ret_type, attrs, out.span)

    def fix(_name, fn):
        body = _Rename().visit(fn.body)
        return fn if body is fn.body else fn.with_body(body)

    return map_open_functions(mod, fix)


class _InAnnotations(Pass):
    """A partition pass whose result is written with compiler_begin/compiler_end, as Relay
    prints it (partition/annotations.py); partita's own passes read that form back."""

    def __init__(self, inner: Pass | None, include_non_call_ops: bool, merge: bool):
        self.inner, self.include, self.merge = inner, include_non_call_ops, merge
        self.name = inner.name if inner is not None else "MergeCompilerRegions"

    def transform(self, mod: IRModule, ctx) -> IRModule:
        if self.inner is not None:  # partita's AnnotateTarget knows composites by backend name
            mod = self.inner.transform(_rename_composites(mod, _partita_composite), ctx)
            mod = _rename_composites(mod, _tvm_composite)

        def write(body):
            flat, region_of = flatten(map_inner_functions(body, write))
            if self.merge:
                order = dataflow_order(flat)
                for node in order:  # TVM annotates what no region holds as "default"
                    if type(node) is Call and id(node) not in region_of:
                        region_of[id(node)] = Region(DEFAULT_HOST, True)
                region_of = merge_regions(order, region_of, merge_host=True)
            return annotate_regions(flat, region_of, self.include, tvm_name)

        return map_open_functions(mod, lambda _name, fn: fn.with_body(write(fn.body)))


def AnnotateTarget(targets, include_non_call_ops: bool = True):  # noqa: N802 (TVM's name)
    """TVM's ``AnnotateTarget(targets)``: a name or a list of names of registered targets. The
    result marks every op with compiler_begin/compiler_end (``"default"``: the host); without
    ``include_non_call_ops`` tuples and tuple items are left unmarked."""
    if isinstance(targets, str):
        targets = [targets]
    inner = _AnnotateTarget([target_name(t) if isinstance(t, str) else t for t in targets])
    return _InAnnotations(inner, include_non_call_ops, merge=False)


def MergeCompilerRegions():  # noqa: N802 (TVM's name)
    """TVM's ``MergeCompilerRegions()``: neighbouring regions of one target merge unless that
    would make a cycle; host (``"default"``) regions merge too, as in TVM. Reads and writes
    compiler_begin/compiler_end (partita's own pass keeps each host op's reason instead)."""
    return _InAnnotations(None, True, merge=True)


def PartitionGraph(mod_name: str = "default", bind_constants: bool = True):  # noqa: N802
    """TVM's ``PartitionGraph``: partitions are named ``tvmgen_<mod_name>_<target>_main_<n>``;
    ``bind_constants=False`` passes constants into partitions as parameters."""
    return _WithOptimizeHooks(_PartitionGraph(mod_name=mod_name, bind_constants=bind_constants))


def _without_default_annotations(fn: Function) -> Function:
    """``fn`` without the ``"default"`` compiler_begin/compiler_end (TVM's
    RemoveDefaultAnnotations, which PartitionGraph runs first): what they held stays in main,
    and only the targets' begins count when regions are numbered."""

    class _Remove(_CoreMutator):
        def rewrite_call(self, call, op, args):
            if annotation_kind(call) and call.attrs.compiler == DEFAULT:
                return args[0]
            return super().rewrite_call(call, op, args)

    body = _Remove().visit(fn.body)
    return fn if body is fn.body else fn.with_body(body)


class _WithOptimizeHooks(Pass):
    """PartitionGraph, then TVM's ``relay.ext.<target>.optimize`` hook (registered with
    ``relay.register_func``) on each partition of that target: the hook gets a module whose
    ``main`` is the partition (without its partition attributes) and returns one."""

    def __init__(self, inner: Pass):
        self.inner, self.name = inner, inner.name

    def transform(self, mod: IRModule, ctx) -> IRModule:
        mod = map_open_functions(mod, lambda _name, fn: _without_default_annotations(fn))
        out = self.inner.transform(mod, ctx)
        for name, fn in list(out.items()):
            hook = get_global_func(f"relay.ext.{fn.attrs.get('Compiler')}.optimize", True)
            if "Compiler" not in fn.attrs or hook is None:
                continue
            plain = Function(fn.params, fn.body, fn.ret_type, None, fn.span)
            done = hook(InferType()(IRModule({"main": plain})))["main"]
            out = out.with_function(
                name, Function(done.params, done.body, done.ret_type, fn.attrs, fn.span)
            )
        return InferType()(out)


__all__ = [
    "AlterOpLayout",
    "AnnotateTarget",
    "ConvertLayout",
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "FoldConstant",
    "FuseOps",
    "InferType",
    "Inline",
    "MergeComposite",
    "MergeCompilerRegions",
    "PartitionGraph",
    "PassContext",
    "RemoveUnusedFunctions",
    "InferTypeLocal",
    "Sequential",
    "function_pass",
    "module_pass",
    "SimplifyExpr",
    "SimplifyInference",
    "CanonicalizeOps",
]


class _PythonPass(Pass):
    """A pass written in Python the way TVM's decorators take it: ``run(mod, ctx) -> mod``."""

    def __init__(self, run, name: str, opt_level: int):
        self._run, self.name, self.opt_level = run, name, opt_level

    def transform(self, mod: IRModule, ctx) -> IRModule:
        out = self._run(mod, ctx)
        if not isinstance(out, IRModule):
            raise PartitaError(f"pass {self.name} returned {type(out).__name__}, not an IRModule")
        return out


def _per_function(fn, mod: IRModule, ctx) -> IRModule:
    """``fn(func, mod, ctx)`` on each function of ``mod`` except partitions (``Compiler``) and
    those marked ``SkipOptimization``, as TVM's FunctionPass skips them; then InferType."""
    out = mod
    for name, func in list(mod.items()):
        if "Compiler" in func.attrs or func.attrs.get("SkipOptimization"):
            continue
        out = out.with_function(name, fn(func, mod, ctx))
    return InferType()(out)


def _pass_decorator(kind: str, pass_func, opt_level, name):
    def make(target):
        pass_name = name or target.__name__
        if isinstance(target, type):  # a class: each instance is a pass
            method = "transform_function" if kind == "function" else "transform_module"

            def init(self, *args, **kwargs):
                inst = target(*args, **kwargs)
                run = getattr(inst, method)
                if kind == "function":
                    _PythonPass.__init__(
                        self, lambda m, c: _per_function(run, m, c), pass_name, opt_level or 0
                    )
                else:
                    _PythonPass.__init__(self, run, pass_name, opt_level or 0)

            doc = target.__doc__
            return type(target.__name__, (_PythonPass,), {"__init__": init, "__doc__": doc})
        if kind == "function":
            return _PythonPass(lambda m, c: _per_function(target, m, c), pass_name, opt_level or 0)
        return _PythonPass(target, pass_name, opt_level or 0)

    return make if pass_func is None else make(pass_func)


def function_pass(pass_func=None, opt_level=None, name=None, required=None):
    """TVM's ``@function_pass(opt_level=0)`` on ``fn(func, mod, ctx) -> func`` or on a class
    with ``transform_function(func, mod, ctx)`` (its instances are passes): the function runs on
    every function of the module but partitions; InferType follows, as in TVM."""
    return _pass_decorator("function", pass_func, opt_level, name)


def module_pass(pass_func=None, opt_level=None, name=None, required=None):
    """TVM's ``@module_pass(opt_level=0)`` on ``fn(mod, ctx) -> mod`` or on a class with
    ``transform_module(mod, ctx)``."""
    return _pass_decorator("module", pass_func, opt_level, name)


def RemoveUnusedFunctions(entry_functions=None):  # noqa: N802 (TVM's name)
    """TVM's ``RemoveUnusedFunctions(["main"])``: drop the global functions no entry reaches."""

    def run(mod: IRModule, ctx) -> IRModule:
        keep, todo = set(), list(entry_functions or ["main"])
        while todo:
            name = todo.pop()
            if name in keep or name not in mod:
                continue
            keep.add(name)
            todo.extend(n.name_hint for n in post_order(mod[name]) if isinstance(n, GlobalVar))
        return IRModule({n: f for n, f in mod.items() if n in keep}, mod.attrs)

    return _PythonPass(run, "RemoveUnusedFunctions", 1)


def CanonicalizeOps():  # noqa: N802 (TVM's name)
    """TVM's ``CanonicalizeOps()``: ``nn.bias_add(x, b, axis)`` becomes ``add(x, b')`` with
    ``b'`` given trailing unit axes (``expand_dims``) so it broadcasts along ``axis``, as TVM's
    does (no expand_dims when ``axis`` is the last). Exact: the same sums."""
    from partita.ir.op import get_op

    bias_add, add, expand = get_op("nn.bias_add"), get_op("add"), get_op("expand_dims")

    class _Canon(_CoreMutator):
        def rewrite_call(self, call, op, args):
            if op is not bias_add:
                return super().rewrite_call(call, op, args)
            ndim = len(call.args[0].checked_type.shape)
            axis = call.attrs.axis + ndim if call.attrs.axis < 0 else call.attrs.axis
            bias = args[1]
            if ndim - axis - 1 > 0:
                bias = expand(bias, axis=1, num_newaxis=ndim - axis - 1)
            return add(args[0], bias, span=call.span)

    def one(_name: str, fn: Function) -> Function:
        return _Canon().visit(fn)

    def run(mod: IRModule, ctx) -> IRModule:
        return InferType()(map_open_functions(mod, one))

    return _PythonPass(run, "CanonicalizeOps", 3)


def InferTypeLocal(expr):  # noqa: N802 (TVM's name)
    """TVM's ``InferTypeLocal(expr)``: the type of ``expr`` (its free variables annotated)."""
    main = InferType()(IRModule.from_expr(expr))["main"]
    return main.checked_type if isinstance(expr, Function) else main.body.checked_type
