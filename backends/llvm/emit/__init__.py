"""Emitting: a ``Plan``'s kernels as LLVM IR. module.py's KernelEmitter generates each kernel with
the function registered for its kind (kinds.py: ``@emits(Kind.X)``) and the drivers that call
them; base.py is the IR toolkit every emitter shares (loops, loads, constants). The kernels live
by data type: int8/ (scalar and vector quantized kernels, the ISA tiers), float/ (float32
kernels), and here the integer and data-movement ones (data.py, integer.py, int_products.py,
reductions.py)."""
