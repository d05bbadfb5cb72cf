"""Lowering: a host function's IR to a ``Plan`` of kernels.

``lower(fn, isa, threads)`` walks the function in dependency order (context.LowerContext) and
lowers each call with the functions registered for its op (registry.py: ``@lowers``, tried in
priority order). One module per family of ops registers its lowerings; importing this package
imports them all, so the table is complete:

    mac.py             qnn.conv2d / qnn.dense + bias + requantize + clip    CONV, DWCONV, FC, V*
    int8.py            8-bit tables, quantize, max pooling, means           LUT, LUT2, QUANT, MEAN
    views.py           reshape / squeeze / expand_dims / transpose / slices COPY, TRANSPOSE, EWISE
    wide_mac.py        int16 and wide-accumulator conv / dense              WMAC
    qbinary.py         per-channel and int16 qnn.add / subtract / mul       QBIN
    qleaky.py          int16 qnn.leaky_relu                                 EWISE
    qprelu.py          qnn.prelu (TFLite's PRELU)                           EWISE
    qmean_axes.py      qnn.mean over any axes                               QMEANX
    qtransformer.py    qnn.batch_matmul, qnn.softmax                        QBMM, QSOFTMAX*
    qsoftmax16.py      qnn.softmax of int16 (TFLite's 16x8)                 QSOFTMAX16
    qpool.py           qnn.avg_pool2d                                       AVGPOOL, MEAN
    qmean.py           qnn.mean's parameters; TFLite's builtin mean         MEAN, QMEANX
    output_stage.py    the MAC kernels' output stage (multiplier, shift)
    dynamic_int8.py    qnn.dense read as its int32 accumulator              DYNQ_DENSE
    integer.py         nn.dense of integers; requantize as an EWISE step    EXACT_INT_DENSE
    int_products.py    integer convolutions and batch matmuls               GCONV, IBMM
    pad_value.py       nn.pad with a run-time pad value                     GATHER
    gather.py          pad, concatenate, nearest resize                     GATHER (+ LUT, QRESCALE)
    float_ops.py       elementwise trees, reductions, dense, bmm, norms     EWISE, FREDUCE, ...
    float_products.py  exact float products' planning: tiles, panels, epilogues (FDENSE, FBMM)
    ewise_tree.py      the EWISE expression tree (float_ops' elementwise)
    float_conv.py, float_conv_transpose.py, float_dense.py, float_spatial.py, runtime_weights.py,
    einsum.py          float convolutions, products, pools, resizes, einsum
    half.py            float16 computed in float32 between casts (a cross-cutting step)

Helpers: tables.py (LUT tables from the op's reference), vector_plan.py (the vector kernels'
weights and geometry). The lowering order is the graph API's ``dataflow_order``.
"""

from __future__ import annotations

from . import (  # noqa: F401  (importing a lowering module registers its lowerings)
    dynamic_int8,
    einsum,
    float_conv,
    float_conv_transpose,
    float_dense,
    float_ops,
    float_spatial,
    gather,
    int8,
    int_products,
    integer,
    mac,
    output_stage,
    pad_value,
    qbinary,
    qleaky,
    qmean,
    qmean_axes,
    qpool,
    qprelu,
    qsoftmax16,
    qtransformer,
    runtime_weights,
    views,
    wide_mac,
)
from .context import EIGHT_BIT, LowerContext, lower, where
from .registry import lowering_for, lowers

__all__ = ["EIGHT_BIT", "LowerContext", "lower", "lowering_for", "lowers", "where"]
