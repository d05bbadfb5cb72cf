"""The quantized kernels: scalar loops (scalar.py), the vector convolutions per ISA tier (vconv.py,
vdepthwise.py, their output stage and vector types; amx.py's tiles), the dynamic-int8 product
(dynq_dense.py, vnni_dense.py, amx.py), int16 / wide MACs, quantized binary ops and transformer
ops."""
