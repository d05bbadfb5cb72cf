"""TVM's function-lifting tests through partita.relay: PartitionGraph lifts hand-annotated
regions into globals numbered as Relay numbers its regions, the function passes that follow
(SimplifyInference, FoldConstant, AlterOpLayout) leave the partitions alone, and Inline turns
each call of a partition into a call of the function itself."""

from __future__ import annotations

import numpy as np
from relay_helpers import AllowedListAnnotator, module, set_func_attr

from partita import relay
from partita.relay import transform


def _v(name, shape):
    return relay.var(name, relay.TensorType(shape, "float32"))


def _bn_params(suffix=""):
    return [_v(n + suffix, (16,)) for n in ("bn_gamma", "bn_beta", "bn_mean", "bn_var")]


def _conv(data, weight):
    return relay.nn.conv2d(
        data=data, weight=weight, kernel_size=(3, 3), channels=16, padding=(1, 1)
    )


def _conv_bn(size):
    data, weight = _v("data", (1, 3, size, size)), _v("weight", (16, 3, 3, 3))
    bn = _bn_params()
    out = relay.nn.batch_norm(_conv(data, weight), *bn).astuple()
    return relay.IRModule.from_expr(relay.Function([data, weight, *bn], out))


def _bn_only(size):
    data, bn = _v("data", (1, 16, size, size)), _bn_params()
    return relay.IRModule.from_expr(
        relay.Function([data, *bn], relay.nn.batch_norm(data, *bn).astuple())
    )


def _annotated(mod):
    mod = transform.InferType()(mod)
    annotated = AllowedListAnnotator(["nn.batch_norm", "nn.conv2d"], "test_compiler")
    return module({"main": annotated.visit(mod["main"])})


def _lift(mod, inline=False):
    passes = [
        transform.InferType(),
        transform.PartitionGraph(),
        transform.SimplifyInference(),
        transform.FoldConstant(),
        transform.AlterOpLayout(),
    ]
    with transform.PassContext(opt_level=3):
        return transform.Sequential(passes + ([transform.Inline()] if inline else []))(mod)


def _feed(mod, seed):
    rng = np.random.default_rng(seed)
    feed = {
        p.name_hint: rng.uniform(0.5, 2.0, p.type_annotation.shape).astype("float32")
        for p in mod["main"].params
    }
    return feed


def _same_bits(a, b, seed=0):
    feed = _feed(a, seed)
    for got, want in zip(relay.interpret(a, feed), relay.interpret(b, feed)):
        np.testing.assert_array_equal(got, want)


def test_function_lifting():
    """conv2d and batch_norm, each its own region: the conv's region opened with the first two
    compiler_begins (number 0), the batch_norm's with the third (number 2), so TVM names them
    main_0 and main_2; the batch_norm partition returns its whole tuple."""
    lifted = _lift(_annotated(_conv_bn(224)))

    data0 = _v("data0", (1, 16, 224, 224))
    bn = _bn_params("1")
    fn_bn = relay.Function([data0, *bn], relay.nn.batch_norm(data0, *bn).astuple())
    fn_bn = set_func_attr(fn_bn, "test_compiler", "tvmgen_default_test_compiler_main_2")
    data1, weight1 = _v("data1", (1, 3, 224, 224)), _v("weight1", (16, 3, 3, 3))
    fn_conv = relay.Function([data1, weight1], _conv(data1, weight1))
    fn_conv = set_func_attr(fn_conv, "test_compiler", "tvmgen_default_test_compiler_main_0")
    data, weight = _v("data", (1, 3, 224, 224)), _v("weight", (16, 3, 3, 3))
    bn0 = _bn_params()
    conv = relay.GlobalVar("tvmgen_default_test_compiler_main_0")(data, weight)
    out = relay.GlobalVar("tvmgen_default_test_compiler_main_2")(conv, *bn0)
    main = relay.Function([data, weight, *bn0], out)
    expected = module(
        {
            "main": main,
            "tvmgen_default_test_compiler_main_2": fn_bn,
            "tvmgen_default_test_compiler_main_0": fn_conv,
        }
    )
    relay.assert_structural_equal(lifted, expected)

    small = _conv_bn(8)
    _same_bits(_lift(_annotated(small)), small)


def test_function_lifting_inline():
    """After Inline, main calls the batch_norm partition as a function (a partition is never
    opened) and the global is gone."""
    lifted = _lift(_annotated(_bn_only(224)), inline=True)

    data0, bn = _v("data0", (1, 16, 224, 224)), _bn_params("1")
    fn = relay.Function([data0, *bn], relay.nn.batch_norm(data0, *bn).astuple())
    fn = set_func_attr(fn, "test_compiler", "tvmgen_default_test_compiler_main_0")
    data, bn0 = _v("data", (1, 16, 224, 224)), _bn_params()
    expected = module({"main": relay.Function([data, *bn0], fn(data, *bn0))})
    relay.assert_structural_equal(lifted, expected)
    assert list(lifted.functions) == ["main"]

    small = _bn_only(8)
    _same_bits(_lift(_annotated(small), inline=True), small)


def test_extern_compiler_sanitized_ops():
    """A hand-annotated target that is no identifier: the partition's Compiler keeps the name,
    its symbol is sanitised; FuseOps(2) then fuses log, exp and concatenate on the host into
    one primitive function and leaves the partition alone."""
    x, y = _v("x", (8, 8)), _v("y", (8, 8))
    add = relay.add(x, y)
    concat = relay.concatenate([relay.log(add), relay.exp(add)], axis=0)
    mod = module(
        {
            "main": AllowedListAnnotator(
                ["add", "subtract", "multiply"], "unsanitary-name++"
            ).visit(relay.Function([x, y], concat))
        }
    )
    fused = transform.FuseOps(2)(transform.PartitionGraph()(mod))

    name = "tvmgen_default_unsanitary_name___main_0"
    x0, y0 = _v("x0", (8, 8)), _v("y0", (8, 8))
    part = set_func_attr(relay.Function([x0, y0], relay.add(x0, y0)), "unsanitary-name++", name)
    x, y, p0 = _v("x", (8, 8)), _v("y", (8, 8)), _v("p0", (8, 8))
    body = relay.concatenate([relay.log(p0), relay.exp(p0)], axis=0)
    fused_fn = relay.Function([p0], body).with_attr("Primitive", 1)
    main = relay.Function([x, y], relay.Call(fused_fn, [relay.Call(relay.GlobalVar(name), [x, y])]))
    relay.assert_structural_equal(fused, module({"main": main, name: part}))
    _same_bits(fused, mod)
