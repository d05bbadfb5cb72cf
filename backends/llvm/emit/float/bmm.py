"""Batched float products (batch_matmul: BERT's attention), one gemm or one dot-product loop
per batch, the batches split over two threads by whole batches (runtime/threads.py
split_chunks), so each output has one thread's bits."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, Family, c64, for_range, via

from .gemm import V16F, VEC


class FloatBatchedProducts(Family):
    # what it uses of the other kernel families (through the emit context)
    gemm = via("gemm")
    gemm_cells = via("gemm")
    vload_f = via("gemm")
    vfma = via("gemm")
    split_chunks = via("pool")

    def k_fbmm_vec(self, k):
        """Batched, B read as [K][N] (transpose_b false): one gemm per batch."""
        fn, b, (x, w, y) = self.function(k, 2)
        self.batches(k, b, [x, w, y], self.fbmm_vec_batches)
        b.ret_void()
        return fn

    def batches(self, k, b, pointers, emit) -> None:
        """``emit(k, builder, pointers, lo, hi)`` computes batches [lo, hi): all of them here,
        or (``threads`` 2, lower/float_ops.py: large enough) one batch per chunk claimed by this
        thread and the driver's worker (runtime/threads.py split_chunks); each batch computed
        whole by one thread with the one-thread code, so the bits are one thread's."""
        total = k.params["B"]
        if k.params.get("threads", 1) < 2 or total < 2:
            emit(k, b, *pointers, c64(0), c64(total))
            return
        self.split_chunks(k, b, pointers, total, 1,
                          lambda eb, ps, lo, hi: emit(k, eb, *ps, lo, hi))

    def fbmm_vec_batches(self, k, b, x, w, y, lo, hi) -> None:
        p = k.params
        m_, k_, n_ = p["M"], p["K"], p["N"]
        cells = self.gemm_cells(b, p)
        with for_range(b, b.sub(hi, lo), "bt") as bt0:
            bt = b.add(lo, bt0)
            xb = b.mul(bt if p["bx"] > 1 else c64(0), c64(m_ * k_))
            wb = b.mul(bt if p["by"] > 1 else c64(0), c64(n_ * k_))
            yb = b.mul(bt, c64(n_ if p.get("out_heads") else m_ * n_))
            y_row = n_ * p["B"] if p.get("out_heads") else n_  # heads.py: [M][B][N]

            def a_at(m, kk):
                inner = b.add(b.mul(kk, c64(m_)), m) if p["ta"] else b.add(b.mul(m, c64(k_)), kk)
                return b.add(xb, inner)

            self.gemm(
                b, cells, m_, n_, k_, a_at,
                lambda kk, n0, v, cols: b.add(
                    wb, b.add(b.mul(kk, c64(n_)), b.add(n0, c64(v * VEC)))
                ),
                lambda m, n: b.add(yb, b.add(b.mul(m, c64(y_row)), n)),
                x, w, y,
            )  # fmt: skip

    def k_fbmm_dot(self, k):
        """Batched with B read as [N][K] (transpose_b, K a multiple of 16): each output a dot
        product of 16-float chunks along k, reduced once."""
        fn, b, (x, w, y) = self.function(k, 2)
        self.batches(k, b, [x, w, y], self.fbmm_dot_batches)
        b.ret_void()
        return fn

    def fbmm_dot_batches(self, k, b, x, w, y, lo, hi) -> None:
        p = k.params
        m_, k_, n_ = p["M"], p["K"], p["N"]
        cell = b.alloca(V16F)
        name = "llvm.vector.reduce.fadd.v16f32"
        reduce = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(F32, [F32, V16F]), name=name
        )
        with for_range(b, b.sub(hi, lo), "bt") as bt0, for_range(b, m_, "m") as m:
            bt = b.add(lo, bt0)
            xb = b.add(b.mul(bt if p["bx"] > 1 else c64(0), c64(m_ * k_)), b.mul(m, c64(k_)))
            wb = b.mul(bt if p["by"] > 1 else c64(0), c64(n_ * k_))
            yb = b.mul(b.add(b.mul(bt, c64(m_)), m), c64(n_))
            with for_range(b, n_, "n") as n:
                b.store(ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC), cell)
                row = b.add(wb, b.mul(n, c64(k_)))
                with for_range(b, k_ // VEC, "kc") as kc:
                    off = b.mul(kc, c64(VEC))
                    xv = self.vload_f(b, x, b.add(xb, off))
                    wv = self.vload_f(b, w, b.add(row, off))
                    b.store(self.vfma(b, xv, wv, b.load(cell, typ=V16F)), cell)
                total = b.call(reduce, [ir.Constant(F32, 0.0), b.load(cell, typ=V16F)])
                self.store_at(b, total, y, b.add(yb, n), F32)


__all__ = ["FloatBatchedProducts"]
