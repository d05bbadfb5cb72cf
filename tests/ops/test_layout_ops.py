"""layout_transform: values against an independent index computation, inferred types, and precise
failures for layouts it does not support."""

from __future__ import annotations

import numpy as np
import pytest
from op_helpers import assert_same, attr_error, run, type_error, type_of

from partita import TensorType


@pytest.mark.parametrize(
    "src,dst",
    [("NCHW", "NHWC"), ("NHWC", "NCHW"), ("OIHW", "HWIO"), ("OIHW", "OHWI"), ("NC", "CN")],
)
def test_layout_transform_moves_each_element_to_its_named_axis(src, dst):
    rng = np.random.default_rng(0)
    shape = (2, 3, 4, 5)[: len(src)]
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    out = run("layout_transform", x, src_layout=src, dst_layout=dst)
    # element at index i (named by src) is at the index whose axis letters name the same values
    for idx in np.ndindex(*shape):
        named = dict(zip(src, idx))
        assert out[tuple(named[a] for a in dst)] == x[idx]
    assert out.dtype == x.dtype and out.shape == tuple(shape[src.index(a)] for a in dst)


def test_layout_transform_identity_keeps_the_values():
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    assert_same(run("layout_transform", x, src_layout="NCHW", dst_layout="NCHW"), x)


def test_layout_transform_type():
    t = type_of("layout_transform", ((1, 8, 4, 6), "int8"), src_layout="NCHW", dst_layout="NHWC")
    assert t == TensorType((1, 4, 6, 8), "int8")


def test_layout_transform_refuses_a_rank_the_layout_does_not_name():
    with type_error("rank 3", "NCHW"):
        type_of("layout_transform", ((8, 4, 6), "int8"), src_layout="NCHW", dst_layout="NHWC")


@pytest.mark.parametrize(
    "src,dst,why",
    [
        ("NCHW", "NCHW16c", "split axes"),
        ("NCHW", "NHWD", "do not name the same axes"),
        ("NCHH", "NCHH", "distinct"),
    ],
)
def test_layout_transform_refuses_unsupported_layouts(src, dst, why):
    with attr_error(why):
        type_of("layout_transform", ((1, 2, 3, 4), "int8"), src_layout=src, dst_layout=dst)
