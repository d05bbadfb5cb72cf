"""tools/relay_compat.py's exclusions: the 17 tests needing TVM's runtime/codegen and the 2
needing ADTs, each with a reason, so the count through the shim is reproducible."""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).parents[2] / "tools" / "relay_compat.py"


def _tool():
    spec = importlib.util.spec_from_file_location("relay_compat_tool", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exclusions_are_17_runtime_and_2_adt_each_with_a_reason():
    tool = _tool()
    reasons = [r for tests in tool.EXCLUDED.values() for r in tests.values()]
    assert sum(r.startswith("runtime") for r in reasons) == 17
    assert sum(r.startswith("ADT") for r in reasons) == 2
    assert all(len(r.split(":", 1)[1].strip()) > 5 for r in reasons)
    assert set(tool.EXCLUDED) <= set(tool.FILES) and len(tool.FILES) == 5


BYOC_TOOL = Path(__file__).parents[2] / "tools" / "relay_compat_byoc.py"
RESNET_MINI = Path(__file__).parents[2] / "tests/models/tflite/nets/resnet_mini_64.tflite"


def test_requantize_clip_cast_gives_pytorch_form_and_keeps_values():
    """relay_compat_byoc.py --dnnl-form: each convolution's requantize -> clip -> cast, clip and
    cast identities on int8; only the float32 input scale may move a value by 1 LSB."""
    import numpy as np

    from partita import relay
    from partita.ir import Call
    from partita.ir.visitor import post_order

    spec = importlib.util.spec_from_file_location("relay_compat_byoc_tool", BYOC_TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    mod, _ = relay.frontend.from_tflite(str(RESNET_MINI))
    out = tool.requantize_clip_cast(mod)
    calls = [x for x in post_order(out["main"]) if type(x) is Call and hasattr(x.op, "name")]
    casts = [c for c in calls if c.op.name == "cast"]
    convs = [c for c in calls if c.op.name in ("qnn.conv2d", "qnn.dense")]
    assert len(casts) == len(convs) == 12
    for c in casts:
        clip = c.args[0]
        assert clip.op.name == "clip" and clip.args[0].op.name == "qnn.requantize"
        assert clip.args[0].args[1].data.dtype == np.float32
    data = np.random.default_rng(0).integers(-128, 128, (1, 64, 64, 3), dtype=np.int8)
    a = relay.interpret(out, [data])[0].astype(int)
    b = relay.interpret(mod, [data])[0].astype(int)
    assert np.max(np.abs(a - b)) <= 1
