"""Arithmetic orders other runtimes use, reproduced by the kernels (sum_order.py: MLAS's and
PyTorch's float32 sum orders)."""
