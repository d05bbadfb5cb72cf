"""The backend interface and registry: declaration, options, lookup and entry-point discovery."""

from __future__ import annotations

import pytest
from backend_helpers import fake_distribution
from common_graphs import registered
from partita.backends import (
    Backend,
    BackendError,
    PatternEntry,
    RegionStats,
    Verdict,
    find_backend,
    get_backend,
    get_pattern_table,
    list_backends,
    normalize_table,
    register_backend,
    register_pattern_table,
    unregister_backend,
)
from partita.backends.compiled import CompiledRegion
from partita.patterns import is_op, wildcard

import partita as P

RELU = is_op("nn.relu")(wildcard())


def test_register_and_look_up():
    acc = Backend("acc_reg", ops=["nn.relu"])
    with registered(acc):
        assert get_backend("acc_reg") is acc
        assert "acc_reg" in list_backends()
        with pytest.raises(BackendError, match="already registered"):
            register_backend(Backend("acc_reg"))
    assert find_backend("acc_reg") is None


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(BackendError, match=r"unknown backend 'nope'; known backends: .*llvm"):
        get_backend("nope")


def test_default_host_accepts_any_option():
    host = get_backend("llvm")
    assert host.host and host.pattern_table() == [] and host.op_checks() == {}
    assert host.resolve_options({"mcpu": "native"})["mcpu"] == "native"


def test_backend_names_must_be_identifiers():
    with pytest.raises(BackendError, match="identifier"):
        Backend("my-npu")


def test_options_have_defaults_and_unknown_ones_fail():
    acc = Backend("acc_opt", options={"config": "npu-256", "fast": False})
    assert acc.resolve_options({"config": "npu-512"}) == {"config": "npu-512", "fast": False}
    with pytest.raises(BackendError, match=r"no option -size \(its options: -config, -fast\)"):
        acc.resolve_options({"size": "1"})


def test_pattern_table_names_get_the_backend_prefix():
    def table(options):
        return [("relu", RELU), ("acc_t.add", is_op("add")(wildcard(), wildcard()), None)]

    acc = Backend("acc_t", patterns=table)
    names = [e.name for e in acc.pattern_table()]
    assert names == ["acc_t.relu", "acc_t.add"]
    assert all(isinstance(e, PatternEntry) for e in acc.pattern_table())
    with registered(acc):
        assert [e.name for e in get_pattern_table("acc_t")] == names


def test_table_provider_may_take_the_options_or_nothing():
    seen = []
    acc = Backend("acc_o", patterns=lambda opts: seen.append(opts) or [], options={"k": "1"})
    acc.pattern_table({"k": "2"})
    assert seen == [{"k": "2"}]
    assert Backend("acc_n", patterns=lambda: [("r", RELU)]).pattern_table()[0].name == "acc_n.r"


@pytest.mark.parametrize(
    "table, message",
    [
        ([("r",)], "entry 0 must be"),
        ([("", RELU)], "non-empty string"),
        ([("r", "not a pattern")], "is not a pattern"),
        ([("r", RELU, 3)], "is not callable"),
        ("relu", "is a list"),
    ],
)
def test_bad_pattern_tables(table, message):
    with pytest.raises(BackendError, match=message):
        normalize_table(table)


def test_op_checks_from_a_list_a_dict_or_a_provider():
    assert Backend("a1", ops=["add"]).op_checks() == {"add": True}
    check = lambda call: True  # noqa: E731
    assert Backend("a2", ops={"add": check}).op_checks() == {"add": check}
    assert Backend("a3", ops=lambda opts: {"add": True}).op_checks() == {"add": True}
    with pytest.raises(BackendError, match="must map op names"):
        Backend("a4", ops=3).op_checks()


def test_register_pattern_table_decorator_creates_or_fills_a_backend():
    try:

        @register_pattern_table("acc_dec")
        def table():
            return [("relu", RELU)]

        assert [e.name for e in get_pattern_table("acc_dec")] == ["acc_dec.relu"]
    finally:
        unregister_backend("acc_dec")


def test_compile_hook_gets_resolved_options():
    seen = []

    class Region(CompiledRegion):
        input_types = output_types = []

    def compile_hook(fn, opts):
        seen.append((fn, opts))
        return Region()

    acc = Backend("acc_c", compile=compile_hook, options={"o": "1"})
    region = acc.compile("fn")
    assert seen == [("fn", {"o": "1"})] and region.backend == "acc_c"
    with pytest.raises(BackendError, match="has no compile hook"):
        Backend("acc_nc").compile("fn")
    with pytest.raises(BackendError, match="returned tuple, not a CompiledRegion"):
        Backend("acc_bad", compile=lambda fn, opts: ("kernel", opts)).compile("fn")
    with pytest.raises(BackendError, match="cannot load compiled regions"):
        acc.load(b"")


def test_cost_hook_and_extra_passes():
    acc = Backend(
        "acc_k", cost=lambda s: Verdict(s.macs > 10, "too little work"), passes=[P.FoldConstant()]
    )
    assert not acc.check_region(RegionStats("acc_k", 1, 5, 0, 0)).ok
    assert acc.check_region(RegionStats("acc_k", 1, 50, 0, 0)).ok
    assert [p.name for p in acc.passes()] == ["FoldConstant"]
    assert Backend("acc_k2").check_region(RegionStats("acc_k2", 1, 0, 0, 0)).ok


def test_register_a_subclass_as_a_decorator():
    try:

        @register_backend
        class Mine(Backend):
            def __init__(self):
                super().__init__("acc_sub", ops=["nn.relu"])

        assert isinstance(get_backend("acc_sub"), Mine)
    finally:
        unregister_backend("acc_sub")
    with pytest.raises(BackendError, match="is not a Backend"):
        register_backend(lambda: 3)


PLUGIN = """
from partita.backends import Backend
from partita.patterns import is_op, wildcard
backend = Backend("{name}", patterns=[("relu", is_op("nn.relu")(wildcard()))])
"""


def test_entry_point_discovery(tmp_path, monkeypatch):
    fake_distribution(
        tmp_path,
        "acc-plugin",
        {"acc_ep": "acc_ep_mod:backend"},
        {"acc_ep_mod": PLUGIN.format(name="acc_ep")},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert "acc_ep" in list_backends()
        acc = get_backend("acc_ep")
        assert [e.name for e in acc.pattern_table()] == ["acc_ep.relu"]
    finally:
        unregister_backend("acc_ep")


def test_entry_point_errors_name_the_package(tmp_path, monkeypatch):
    fake_distribution(
        tmp_path,
        "bad-plugin",
        {"acc_broken": "acc_missing_mod:backend", "acc_wrong": "acc_wrong_mod:b"},
        {"acc_wrong_mod": PLUGIN.format(name="other").replace("backend =", "b =")},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        BackendError,
        match=r"'acc_broken' failed to load from entry point "
        r"acc_broken = acc_missing_mod:backend \(bad-plugin\)",
    ):
        get_backend("acc_broken")
    with pytest.raises(BackendError, match="declares a backend named 'other'"):
        get_backend("acc_wrong")


def test_two_packages_declaring_one_backend(tmp_path, monkeypatch):
    for dist in ("one", "two"):
        fake_distribution(tmp_path, dist, {"acc_dup": f"acc_dup_{dist}:backend"}, {})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BackendError, match="several installed packages declare backend"):
        get_backend("acc_dup")


def test_builtin_backend_folder_registers_itself_on_first_use(tmp_path, monkeypatch):
    import partita.backends as backends

    package = tmp_path / "acc_folder"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from partita.backends import Backend, register_backend\n"
        "register_backend(Backend('acc_folder', ops=['nn.relu']))\n"
    )
    monkeypatch.setattr(backends, "__path__", [*backends.__path__, str(tmp_path)])
    try:
        assert "acc_folder" in list_backends()
        assert get_backend("acc_folder").op_checks() == {"nn.relu": True}
    finally:
        unregister_backend("acc_folder")


def test_a_real_host_backend_replaces_the_default_descriptor(monkeypatch):
    from partita.backends import registry

    original = get_backend("llvm")  # the real one, registered by importing backends/llvm
    monkeypatch.setattr(registry, "_builtin_module", lambda name: None)  # as if no folder
    unregister_backend("llvm")
    try:
        assert getattr(get_backend("llvm"), "placeholder", False)
        real = Backend("llvm", host=True, compile=lambda fn, opts: "kernel")
        try:
            register_backend(real)  # no override needed: the default is only a placeholder
            assert get_backend("llvm") is real
        finally:
            unregister_backend("llvm")
        assert get_backend("llvm") is not real
    finally:
        register_backend(original, override=True)  # later tests compile with the real one


def test_a_backend_folder_that_registers_nothing(tmp_path, monkeypatch):
    import partita.backends as backends

    (tmp_path / "acc_silent").mkdir()
    (tmp_path / "acc_silent" / "__init__.py").write_text("")
    monkeypatch.setattr(backends, "__path__", [*backends.__path__, str(tmp_path)])
    with pytest.raises(BackendError, match="registered no backend named 'acc_silent'"):
        get_backend("acc_silent")


def test_modules_of_the_backends_package_are_not_backends():
    assert find_backend("registry") is None and find_backend("cost") is None


def test_option_values_outside_their_choices_are_refused():
    from partita.backends import Option

    acc = Backend("acc_opt", options={"depthwise": Option("yes", ("yes", "no"))})
    assert acc.resolve_options({"depthwise": "no"}) == {"depthwise": "no"}
    assert acc.resolve_options() == {"depthwise": "yes"}
    with pytest.raises(BackendError, match="-depthwise=maybe is not one of yes, no"):
        acc.resolve_options({"depthwise": "maybe"})
    assert acc.describe_options() == {"depthwise": "yes (one of yes|no)"}
