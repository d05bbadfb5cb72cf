"""Other runtimes' arithmetic, emulated bit for bit with numpy, one module per runtime copied.

The op definitions in partita/ops select these by an op's ``semantics`` attribute; nothing here
defines an op.

* ``tflite_fixedpoint`` — TFLite's integer requantization (QuantizeMultiplier,
  MultiplyByQuantizedMultiplier, rounding shifts), from kernels/internal/common.h.
* ``gemmlowp`` — gemmlowp's fixed-point transcendental functions (exp, logistic, tanh,
  reciprocal) that TFLite's integer activation kernels build on.
* ``activation_kernels`` — the integer activation kernels behind qnn.sigmoid/tanh/hardswish/
  leaky_relu/softmax: TFLite's reference and optimized ones and ONNX Runtime's (each function
  names the kernel it copies).
* ``onnxruntime_mlas`` — ONNX Runtime's MLAS float32 SGEMM/convolution/pooling summation order.
* ``torch_cpu`` — PyTorch's float32 CPU conv/linear summation order (MKL, oneDNN).
"""
