"""Emitting: a ``Plan``'s kernels as LLVM IR. module.py's KernelEmitter generates each kernel with
the function registered for its kind (kinds.py: ``@emits(Kind.X)``) and the drivers that call
them; base.py is the IR toolkit every emitter shares (loops, loads, constants), the emit
context (Emitter) and Family, the base of each kernel family: KernelEmitter composes one instance
of each and a family names what it uses of another with ``via``. The kernels live
by data type: int8/ (scalar and vector quantized kernels, the ISA tiers), float/ (float32
kernels), and here the integer and data-movement ones (data.py, integer.py, int_products.py,
reductions.py)."""
