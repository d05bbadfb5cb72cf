"""The simulator's compiled engine: the decoded program's operations as native kernels.

The numpy simulator (simulator.py) spends its time in numpy passes over int64 output stages.
This engine gives each operation of the decoded command stream the LLVM backend's kernel for the
same arithmetic, built from the stream's own fields (weights, bias, multipliers and shifts, zero
points, clamp, tables), never from the IR:

    CONV / DWCONV / FC   the fused MAC kernel (VNNI, AVX2 or plain) with TFLite's output stage
    a fused activation   a 256-entry LUT kernel after it
    LUT                  the LUT kernel
    UNIT add/sub/mul     a 256 x 256 table of the unit's arithmetic (both inputs 8-bit maps)
    UNIT mean, max pool, reshape: the MEAN, MAXPOOL and COPY kernels

Operations it cannot take (other requantization schemes, per-channel output zero points, an
explicit pad value other than the input zero point, other unit ops) run in numpy, in order, with
the others. Results are the numpy simulator's bit for bit (tests/backends/npu/test_npu_native.py
checks both on every test network). The code is cached on disk as the llvm backend's is, so
only the first run of a new program shape pays LLVM's compile.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from partita.backends.llvm.public import (
    Kernel,
    Loaded,
    Plan,
    call_args,
    compile_parts,
    constants,
    for_this_host,
    generate_parts,
    host_isa,
    isa_features,
    mean_params,
    plan_digest,
    runs_isa,
    signature,
    strides_for,
    vector_kernel,
    wants_unrolling,
)
from partita.backends.registry import BackendError

from partita.ops.emulation.tflite_fixedpoint import quantize_multiplier_array

from .compiler import unit_attrs
from .program import NPUOp, Program
from .simulator import KERNELS, op_inputs

RANGE = {"int8": (-128, 127), "uint8": (0, 255)}
TABLE_OPS = ("qnn.add", "qnn.subtract", "qnn.mul", "qnn.squared_difference")
ENGINES = ("auto", "native", "numpy")
# "auto" compiles programs with at least this many MACs (MobileNet-sized work; small programs
# run faster in numpy than LLVM compiles them)
AUTO_MACS = 1 << 24


class _Translation:
    """A Plan whose buffers start with the program's tensors (same ids); ``per_op`` lists each
    operation's kernel indices (empty: numpy)."""

    def __init__(self, program: Program, isa: str):
        self.program, self.isa = program, isa
        self.buffers = [(tuple(t.shape), t.dtype) for t in program.tensors]
        self.kernels: list[Kernel] = []
        self.per_op: list[list[int]] = []
        for op in program.ops:
            first = len(self.kernels)
            if not self.op(op):
                del self.kernels[first:]
            self.per_op.append(list(range(first, len(self.kernels))))

    def dtype(self, t: int) -> str:
        return self.buffers[t][1]

    def buffer(self, shape, dtype: str) -> int:
        self.buffers.append((tuple(int(d) for d in shape), dtype))
        return len(self.buffers) - 1

    def kernel(self, kind, inputs, output, params, arrays) -> bool:
        name = f"{kind.lower()}_{len(self.kernels)}"
        self.kernels.append(Kernel(kind, name, list(inputs), output, params, arrays))
        return True

    def op(self, op: NPUOp) -> bool:
        if op.params.get("views"):
            return False  # an input read at an offset: numpy
        if any(self.dtype(t) == "int16" for t in (*op.inputs, op.output)):
            return False  # 16x8 ops run in numpy (the native kernels are 8-bit)
        if op.kind in ("CONV", "DWCONV", "FC"):
            return self.mac(op)
        if op.kind == "LUT":
            return self.lut(op.inputs[0], op.output, op.arrays["table"])
        return self.unit(op)

    def lut(self, src: int, out: int, table: np.ndarray) -> bool:
        if self.dtype(src) not in RANGE or self.dtype(out) not in RANGE:
            return False
        return self.kernel("LUT", [src], out, {}, {"table": np.asarray(table)})

    # -- the MAC array -----------------------------------------------------------------------
    def mac(self, op: NPUOp) -> bool:
        stage = self.stage(op)
        if stage is None:
            return False
        params, arrays = stage
        p, a, src, w = op.params, op.arrays, op.inputs[0], op.arrays["weights"]
        in_shape, out_shape = self.buffers[src][0], self.buffers[op.output][0]
        if op.kind == "FC":
            arrays["weights"] = w
            in_shape = (int(np.prod(in_shape[:-1])), in_shape[-1])
            out_shape = (int(np.prod(out_shape[:-1])), out_shape[-1])
        else:
            if not self.geometry(op, params):
                return False
            arrays["weights"] = w if op.kind == "CONV" else w[..., None]  # OHWI
        kind = op.kind
        vector = vector_kernel(kind, params, arrays, in_shape, out_shape, self.isa)
        scratch = None
        if vector is not None:
            kind, params, arrays, size = vector
            scratch = self.buffer((size,), "uint8") if size else None
        elif p["rounding"] == "onnx":
            return False  # the scalar kernels have no float32 output stage
        else:
            del arrays["fscale"]
        table = a.get("table")
        out = op.output if table is None else self.buffer(out_shape, p["out_dtype"])
        inputs = [src] if scratch is None else [src, scratch]
        self.kernel(kind, inputs, out, params, arrays)
        return table is None or self.lut(out, op.output, table)

    def stage(self, op: NPUOp) -> tuple[dict, dict] | None:
        """The LLVM MAC kernel's parameters and per-channel arrays for ``op``'s output stage, or
        None when its kernels do not compute it (a scalar rq/out zero point, 8-bit data)."""
        p, a = op.params, op.arrays
        in_dtype, w = self.dtype(op.inputs[0]), a["weights"]
        if p["rounding"] not in ("tflite", "tflite_double", "onnx") or in_dtype not in RANGE:
            return None
        if w.dtype.name not in RANGE or p["out_dtype"] not in RANGE:
            return None
        rq_zp, out_zp = np.unique(a["rq_zp"]), np.unique(a["out_zp"])
        if rq_zp.size != 1 or out_zp.size != 1:
            return None
        n_out = w.shape[0]
        params = {
            "in_zp": int(p["in_zp"]),
            "rq_zp": int(rq_zp[0]),
            "out_zp": int(out_zp[0]),
            "lo": int(p["act_min"]),
            "hi": int(p["act_max"]),
            "rounding": p["rounding"],
            "in_dtype": in_dtype,
            "w_dtype": w.dtype.name,
            "out_dtype": p["out_dtype"],
            "pairs": False,
        }
        arrays = {
            **self.scales(p["rounding"], a, n_out),
            "bias": a["bias"].astype(np.int32).reshape(-1)
            if "bias" in a
            else np.zeros(n_out, np.int32),
            "w_zp": np.broadcast_to(a["w_zp"].reshape(-1), (n_out,)).astype(np.int32),
        }
        return params, arrays

    @staticmethod
    def scales(rounding: str, a: dict, n: int) -> dict:
        """multiplier, shift, the real scale (float64) and the float32 scale, per channel, from
        whichever of them the stream holds for ``rounding``."""
        if rounding == "tflite":
            q = np.broadcast_to(a["multiplier"].reshape(-1), (n,)).astype(np.int32)
            s = np.broadcast_to(a["shift"].reshape(-1), (n,)).astype(np.int32)
            real = q.astype(np.float64) * np.exp2(s.astype(np.float64) - 31)
        else:
            real = np.broadcast_to(a["scale"].astype(np.float64).reshape(-1), (n,)).copy()
            q, s = quantize_multiplier_array(real)
        fscale = a["scale"] if rounding == "onnx" else real
        return {
            "multiplier": np.asarray(q, np.int32),
            "shift": np.asarray(s, np.int32),
            "scale": real,
            "fscale": np.broadcast_to(fscale.reshape(-1), (n,)).astype(np.float32),
        }

    @staticmethod
    def geometry(op: NPUOp, params: dict) -> bool:
        """Strides, dilation and padding (the explicit pad folded in when it pads with the
        input's zero point, as the conv's own padding does)."""
        p = op.params
        pad = [int(x) for x in p["padding"]]
        if any(p["explicit_pad"]):
            if int(p["pad_value"]) != int(p["in_zp"]):
                return False
            pad = [x + int(e) for x, e in zip(pad, p["explicit_pad"])]
        params.update(strides=list(p["strides"]), dilation=list(p["dilation"]), padding=pad)
        return True

    # -- the elementwise / pooling unit ----------------------------------------------------------
    def unit(self, op: NPUOp) -> bool:
        p = op.params
        name, refs = p["op"], p["operands"]
        if any(isinstance(r, list) for r in refs):
            return False
        data = [op.inputs[int(r[1:])] for r in refs if r.startswith("t")]
        consts = [np.asarray(op.arrays[r]) for r in refs if not r.startswith("t")]
        out_dtype = p["out_dtype"]
        if out_dtype not in RANGE or any(self.dtype(t) not in RANGE for t in data):
            return False
        full = (p["act_min"], p["act_max"]) == RANGE[out_dtype]
        shape = self.buffers[op.output][0]
        pair = len(data) == 2 and all(r.startswith("t") for r in refs[:2])  # (x, x) too
        if name in TABLE_OPS and pair and all(c.size == 1 for c in consts):
            return self.table2(op, data, shape)
        qnn_op, attrs = unit_attrs(p)
        one_value = qnn_op.kind in ("elemwise", "broadcast") and all(c.size == 1 for c in consts)
        if len(data) == 1 and one_value and self.buffers[data[0]][0] == shape:
            return self.table1(op, data[0])
        if len(data) != 1:
            return False
        # the unit's clamp after a kernel that saturates only to the dtype: a clamp table
        out = op.output if full else self.buffer(shape, out_dtype)
        done = self.unit_kernel(name, attrs, consts, data[0], out, out_dtype)
        if not done or full:
            return done
        lo, hi = RANGE[out_dtype]
        table = np.clip(np.arange(lo, hi + 1), p["act_min"], p["act_max"]).astype(out_dtype)
        return self.lut(out, op.output, table)

    def unit_kernel(self, name, attrs, consts, src: int, out: int, out_dtype: str) -> bool:
        """MEAN, MAXPOOL or COPY for a unit op of one 8-bit map, if it is one of those."""
        if name == "qnn.mean" and len(consts) == 4:
            params = mean_params(
                self.buffers[src][0], attrs.axis, attrs.semantics, attrs.exclude,
                [c.reshape(-1)[0] for c in consts], out_dtype,
            )  # fmt: skip
            return params is not None and self.kernel("MEAN", [src], out, params, {})
        if name == "nn.max_pool2d" and attrs.layout == "NHWC" and not consts:
            params = {
                "pool": list(attrs.pool_size),
                "strides": list(attrs.strides),
                "padding": list(attrs.padding),
                "dilation": list(attrs.dilation),
            }
            return self.kernel("MAXPOOL", [src], out, params, {})
        if name in ("reshape", "squeeze", "expand_dims") and self.dtype(src) == out_dtype:
            return self.kernel("COPY", [src], out, {}, {})
        return False

    def table1(self, op: NPUOp, src: int) -> bool:
        """A unit op of one 8-bit map and scalar constants (mul by a constant, ...) as a table."""
        p = op.params
        qnn_op, attrs = unit_attrs(p)
        lo, hi = RANGE[self.dtype(src)]
        values = np.arange(lo, hi + 1).astype(self.dtype(src))
        refs = p["operands"]
        operands = [values if r.startswith("t") else np.asarray(op.arrays[r]) for r in refs]
        out = np.asarray(qnn_op.impl(*operands, attrs))
        if out.shape != values.shape:
            return False
        table = np.clip(out, p["act_min"], p["act_max"]).astype(p["out_dtype"])
        return self.lut(src, op.output, table)

    def table2(self, op: NPUOp, data: list[int], shape) -> bool:
        """The unit's arithmetic on every pair of 8-bit values, then its activation clamp."""
        p = op.params
        qnn_op, attrs = unit_attrs(p)
        dtypes = [self.dtype(t) for t in data]
        (alo, ahi), (blo, bhi) = RANGE[dtypes[0]], RANGE[dtypes[1]]
        x, y = np.meshgrid(np.arange(alo, ahi + 1), np.arange(blo, bhi + 1), indexing="ij")
        operands = [x.astype(dtypes[0]).ravel(), y.astype(dtypes[1]).ravel()]
        operands += [np.asarray(op.arrays[r]) for r in p["operands"][2:]]
        values = np.asarray(qnn_op.impl(*operands, attrs))
        table = np.clip(values, p["act_min"], p["act_max"]).astype(p["out_dtype"])
        strides = [strides_for(self.buffers[t][0], shape) for t in data]
        params = {"out_shape": [int(d) for d in shape], "strides": strides}
        return self.kernel("LUT2", data, op.output, params, {"table": table.reshape(256, 256)})


class NativeProgram:
    """A program compiled for the host; ``run`` takes and returns what run_program does."""

    def __init__(self, program: Program, isa: str | None = None):
        self.program = program
        self.isa = isa or host_isa()
        t = _Translation(program, self.isa)
        self.plan = Plan(t.buffers, t.kernels, list(program.inputs), list(program.outputs))
        self.per_op = t.per_op
        features = isa_features(self.isa) if self.isa == "avx2" else None
        parts, digest = generate_parts(self.plan), plan_digest(self.plan)
        if not runs_isa(self.isa):  # a forced family this CPU lacks: exact stand-ins
            parts, digest = for_this_host(parts, digest)
            features = None
        obj, self.cached = compile_parts(  # two modules, compiled in parallel
            parts, None, features, digest, unroll=wants_unrolling(self.plan)
        )
        self._loaded = Loaded(obj)
        names, first = [], {}
        for k in self.plan.kernels:
            names.append(first.setdefault(signature(self.plan, k), k.name))
        self._calls = []
        for name, args in zip(names, call_args(self.plan)):
            fn = self._loaded.function(name, [ctypes.c_void_p] * len(args))
            self._calls.append((fn, args))
        self._consts = [np.ascontiguousarray(c) for k in self.plan.kernels for c in _constants(k)]
        self._local = threading.local()

    @property
    def native_ops(self) -> int:
        """How many of the program's operations run as native kernels."""
        return sum(1 for ks in self.per_op if ks)

    def _state(self):
        state = getattr(self._local, "state", None)
        if state is None:
            arrays = [np.zeros(shape, dtype) for shape, dtype in self.plan.buffers]
            pointers = [a.ctypes.data for a in arrays] + [c.ctypes.data for c in self._consts]
            calls = [(fn, [pointers[i] for i in args]) for fn, args in self._calls]
            state = self._local.state = (arrays, calls)
        return state

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        arrays, calls = self._state()
        for t, x in zip(self.program.inputs, inputs):
            arrays[t][...] = x
        for op, kernels in zip(self.program.ops, self.per_op):
            if kernels:
                for i in kernels:
                    fn, pointers = calls[i]
                    fn(*pointers)
            else:
                arrays[op.output][...] = KERNELS[op.kind](op, op_inputs(op, arrays))
        return [arrays[t].copy() for t in self.program.outputs]


def _constants(k: Kernel):
    return [c for _, c in constants(k)]


def program_macs(program: Program) -> int:
    """The MAC array's work: output elements times the kernel's depth."""
    total = 0
    for op in program.ops:
        if op.kind in ("CONV", "DWCONV", "FC"):
            depth = int(np.prod(op.arrays["weights"].shape[1:]))  # DWCONV: (C, KH, KW)
            total += int(np.prod(program.tensors[op.output].shape)) * depth
    return total


def choose_engine(program: Program, engine: str) -> str:
    """``auto`` -> native for programs of at least AUTO_MACS MACs on a vector ISA, else numpy."""
    if engine not in ENGINES:
        choices = ", ".join(ENGINES)
        raise BackendError(f"npu: unknown simulator engine {engine!r} (one of {choices})")
    if engine != "auto":
        return engine
    if host_isa() == "plain" or program_macs(program) < AUTO_MACS:
        return "numpy"
    return "native"
