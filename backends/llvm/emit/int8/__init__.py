"""The quantized kernels: scalar loops (scalar.py), the vector convolutions per ISA tier (vconv.py,
vdepthwise.py, their output stage and vector types), int16 / wide MACs, quantized binary ops and
transformer ops."""
