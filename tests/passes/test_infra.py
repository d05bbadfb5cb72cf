"""Pass infrastructure: Pass, Sequential, PassContext (opt levels, disabled/required passes,
config), function passes and the timing / IR-dump instruments."""

from __future__ import annotations

import numpy as np
import pytest

from partita.errors import PartitaError
from partita.ir import Function, IRModule, const, var
from partita.ops import get_op
from partita.passes import (
    DumpIR,
    InferType,
    Pass,
    PassContext,
    PassInstrument,
    PassTimingInstrument,
    Sequential,
    function_pass,
    module_pass,
)

relu, add = get_op("nn.relu"), get_op("add")


def small_module() -> IRModule:
    x = var("x", (2, 3), "float32")
    return IRModule.from_expr(relu(x))


# Toy passes that record what they saw: the log is the test's oracle.
LOG: list = []


@module_pass("Tag", opt_level=1)
def Tag(mod, ctx, label="none"):
    """Records its label and returns the module with an attribute added."""
    LOG.append(("Tag", label, ctx.opt_level))
    return IRModule(mod.functions, {**mod.attrs, "tags": (*mod.attrs.get("tags", ()), label)})


@module_pass("Heavy", opt_level=3)
def Heavy(mod, ctx):
    """Runs only at opt level 3 (or when required)."""
    LOG.append(("Heavy",))
    return IRModule(mod.functions, {**mod.attrs, "heavy": True})


@module_pass("Broken", opt_level=0)
def Broken(mod, ctx):
    """Returns something that is not a module."""
    return 42


@function_pass("WrapRelu", opt_level=0)
def WrapRelu(func, mod, ctx):
    """relu(body) around every function's body."""
    return Function(func.params, relu(func.body), None, func.attrs, func.span)


@pytest.fixture(autouse=True)
def clear_log():
    LOG.clear()


def test_factory_makes_a_named_pass_with_its_docstring():
    p = Tag(label="a")
    assert isinstance(p, Pass) and p.name == "Tag" and p.opt_level == 1
    assert "Records its label" in p.__doc__
    assert Tag.pass_name == "Tag" and repr(p) == "<Pass Tag>"


def test_default_context_runs_opt_level_2_and_below():
    mod = small_module()
    out = Sequential([Tag(label="a"), Heavy(), Tag(label="b")])(mod)
    assert LOG == [("Tag", "a", 2), ("Tag", "b", 2)]
    assert out.attrs["tags"] == ("a", "b") and "heavy" not in out.attrs
    assert "tags" not in mod.attrs  # the input module is untouched


@pytest.mark.parametrize("level, ran", [(0, []), (1, ["Tag"]), (3, ["Tag", "Heavy"])])
def test_opt_level_selects_passes(level, ran):
    with PassContext(opt_level=level):
        Sequential([Tag(), Heavy()])(small_module())
    assert [entry[0] for entry in LOG] == ran


def test_disabled_pass_is_skipped_even_at_high_opt_level():
    with PassContext(opt_level=3, disabled_pass=["Heavy"]):
        out = Sequential([Heavy(), Tag()])(small_module())
    assert LOG == [("Tag", "none", 3)] and "heavy" not in out.attrs


def test_required_pass_runs_below_its_opt_level():
    with PassContext(opt_level=0, required_pass=["Heavy"]):
        out = Sequential([Tag(), Heavy()])(small_module())
    assert LOG == [("Heavy",)] and out.attrs["heavy"] is True


def test_config_reaches_the_pass_and_explicit_options_win():
    with PassContext(config={"Tag": {"label": "from-config"}}):
        Tag()(small_module())
        Tag(label="explicit")(small_module())
    assert [entry[1] for entry in LOG] == ["from-config", "explicit"]


def test_unknown_options_and_config_keys_name_the_allowed_ones():
    with pytest.raises(PartitaError, match=r"pass Tag: unknown option 'lable' \(allowed: label\)"):
        Tag(lable="x")
    with (
        PassContext(config={"Tag": {"nonsense": 1}}),
        pytest.raises(PartitaError, match="pass Tag: unknown config key 'nonsense'"),
    ):
        Tag()(small_module())
    with pytest.raises(PartitaError, match="WrapRelu: unknown option 'x' \\(allowed: none\\)"):
        WrapRelu(x=1)


def test_contexts_nest_and_restore():
    assert PassContext.current().opt_level == 2
    with PassContext(opt_level=0) as outer:
        with PassContext(opt_level=3):
            assert PassContext.current().opt_level == 3
        assert PassContext.current() is outer
    assert PassContext.current().opt_level == 2


def test_function_pass_applies_to_every_function():
    x, y = var("x", (2,)), var("y", (2,))
    mod = IRModule({"main": Function([x], x), "other": Function([y], add(y, y))}, {"k": 1})
    out = WrapRelu()(mod)
    assert list(out) == ["main", "other"] and out.attrs == {"k": 1}
    for name in out:
        assert out[name].body.op is relu and out[name].body.args[0] is mod[name].body
    assert np.array_equal(
        __import__("partita").interpret(out, [np.array([-1.0, 2.0], np.float32)])[0], [0, 2]
    )


def test_bad_uses_raise_partita_errors():
    with pytest.raises(PartitaError, match="returned int, not IRModule"):
        Broken()(small_module())
    with pytest.raises(PartitaError, match="takes an IRModule"):
        Tag()(relu(var("x", (1,))))
    with pytest.raises(PartitaError, match="did you forget the"):
        Sequential([Tag])


def test_timing_instrument_nests_sequentials():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        Sequential([InferType(), Sequential([Tag()], name="inner")], name="outer")(small_module())
    assert [(d, n) for d, n, _ in timing.timings] == [
        (0, "outer"),
        (1, "InferType"),
        (1, "inner"),
        (2, "Tag"),
    ]
    assert all(t >= 0 for _, _, t in timing.timings)
    lines = timing.render().splitlines()
    assert lines[0].startswith("outer: ") and lines[3].startswith("    Tag: ")
    assert all(line.endswith(" ms") for line in lines)


def test_dump_ir_after_a_named_pass(tmp_path):
    dump = DumpIR(after=["WrapRelu"], directory=str(tmp_path))
    with PassContext(instruments=[dump]):
        Sequential([Tag(), WrapRelu(), Tag()])(small_module())
    assert [name for name, _ in dump.dumps] == ["WrapRelu"]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["001_WrapRelu.txt"]
    assert (tmp_path / files[0]).read_text() == dump.dumps[0][1]


def test_dump_ir_after_every_pass():
    dump = DumpIR()
    with PassContext(instruments=[dump]):
        Sequential([Tag(), Heavy()], name="pipe")(small_module())
    # Heavy is below the opt level: not run, so not dumped.
    assert [name for name, _ in dump.dumps] == ["Tag", "pipe"]


def test_instrument_can_veto_a_pass():
    class NoTag(PassInstrument):
        def should_run(self, p, mod):
            return p.name != "Tag"

    with PassContext(opt_level=3, instruments=[NoTag()]):
        Sequential([Tag(), Heavy()])(small_module())
    assert LOG == [("Heavy",)]


def test_infer_type_is_a_pass():
    x = var("x", (2, 3), "int8")
    mod = IRModule.from_expr(add(relu(x), const(np.int8(1))))
    out = InferType()(mod)
    assert str(out.main.body.checked_type) == "Tensor[(2, 3), int8]"
