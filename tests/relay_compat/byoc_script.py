"""An Ethos-N style BYOC script as a Relay tutorial writes it. Only the imports differ from
TVM's version (docs/migrating-from-tvm.md shows both side by side)."""

from __future__ import annotations

from partita import relay
from partita.relay import register_pattern_table, transform
from partita.relay.dataflow_pattern import is_constant, is_op, wildcard


def qnn_conv_pattern():
    pattern = is_op("nn.pad")(wildcard(), wildcard()) | wildcard()
    pattern = is_op("qnn.conv2d")(
        pattern, is_constant(), is_constant(), is_constant(), is_constant(), is_constant()
    )
    pattern = is_op("nn.bias_add")(pattern, is_constant())
    pattern = is_op("qnn.requantize")(
        pattern, is_constant(), is_constant(), is_constant(), is_constant()
    )
    return pattern


def check_conv2d(extract):
    """``extract`` is the matched root, the requantize: the NPU takes 8-bit results only."""
    return extract.checked_type.dtype in ("int8", "uint8")


@register_pattern_table("ethos-n")
def pattern_table():
    return [("ethos-n.qnn_conv2d", qnn_conv_pattern(), check_conv2d)]


def partition_for_ethosn(mod):
    seq = transform.Sequential(
        [
            transform.InferType(),
            transform.MergeComposite(pattern_table()),
            transform.AnnotateTarget("ethos-n"),
            transform.MergeCompilerRegions(),
            transform.PartitionGraph(),
        ]
    )
    return seq(mod)


def conv_block(x, channels_in: int, channels_out: int, rng):
    w = relay.const(rng.integers(-8, 8, (channels_out, channels_in, 1, 1), dtype="int8"))
    b = relay.const(rng.integers(-50, 50, (channels_out,), dtype="int32"))
    conv = relay.qnn.op.conv2d(
        x, w, relay.const(0), relay.const(0), relay.const(0.05), relay.const(0.02)
    )
    bias = relay.nn.bias_add(conv, b, axis=1)
    return relay.qnn.op.requantize(
        bias,
        relay.const(0.001),
        relay.const(0),
        relay.const(0.05),
        relay.const(0),
        out_dtype="int8",
    )
