"""The ported Ethos-N style script partitions a quantized graph and keeps its bits."""

from __future__ import annotations

import numpy as np
import pytest
from byoc_script import conv_block, partition_for_ethosn
from partita.backends import unregister_backend

from partita import relay


@pytest.fixture
def ethosn():
    yield
    unregister_backend("ethos_n")


def test_ethosn_style_script_partitions_and_keeps_the_bits(ethosn):
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 3, 4, 4), dtype="int8")
    y = conv_block(conv_block(x, 3, 4, rng), 4, 2, rng)
    mod = relay.IRModule.from_expr(relay.Function([x], relay.tanh(relay.cast(y, dtype="float32"))))
    out = partition_for_ethosn(mod)
    lifted = [fn for fn in out.functions.values() if "Compiler" in fn.attrs]
    assert [fn.attrs["Compiler"] for fn in lifted] == ["ethos-n"]  # TVM's name, kept
    assert "tvmgen_default_ethos_n_main_0" in out.functions  # TVM's (sanitised) symbol
    assert str(out).count('Composite="ethos-n.qnn_conv2d"') == 2
    data = rng.integers(-128, 128, (1, 3, 4, 4), dtype="int8")
    np.testing.assert_array_equal(relay.interpret(out, [data]), relay.interpret(mod, [data]))


def test_target_names_are_sanitised_like_tvm_symbols():
    assert relay.target_name("ethos-n") == "ethos_n"
    assert relay.target_name("double.A") == "double_A"
