"""The float32 kernels: elementwise trees and reductions (kernels.py), matrix products (gemm.py),
convolutions in other runtimes' orders (conv.py), rows (softmax, layer norm), pools and resizes,
scalar loops (transposed convolution, einsum, batch norm)."""
