"""``-threads=2`` for the int8 kernels (backends/llvm/runtime/threads.py): a worker thread kept
across driver calls takes the second halves it claims first, sleeps when idle, stops with its
region, and a forked child gets its own; the driver without a worker; each kernel called on
its own (which driver runs is test_llvm_thread_choice.py's). Every way gives the same bits as
one thread and as the interpreter."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np
import pytest
from partita.backends.llvm.runtime.jit import host_isa
from partita.frontends import from_tflite

import partita as P

NETS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "nets"


@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
def test_int8_network_with_two_threads_equals_one_thread_and_the_interpreter():
    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    one = P.build(mod, "llvm").steps[0].region
    two = P.build(mod, "llvm -threads=2").steps[0].region
    assert two._alone is not None and one._alone is None  # only split plans get two drivers
    rng = np.random.default_rng(0)
    turns = iter(["alone", "pool"] * 4)
    two.modes.choose = lambda: next(turns)  # both drivers, whatever the machine's load
    for _ in range(8):
        x = rng.integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
        want = P.interpret(mod, [x])[0]
        assert np.array_equal(one.run([x])[0], want)
        assert np.array_equal(two.run([x])[0], want)
    assert all(len(t) >= 3 for t in two.modes.times.values())  # both drivers ran
    x = rng.integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
    outputs, profile = two.profile([x])  # the timed driver, with the worker
    assert np.array_equal(outputs[0], P.interpret(mod, [x])[0]) and len(profile) > 0
    assert {p.metrics["run"] for p in profile} == {"two threads"}
    two._timed = None  # as a region saved before the timed driver: kernel by kernel, alone
    outputs, profile = two.profile([x])
    assert np.array_equal(outputs[0], P.interpret(mod, [x])[0]) and len(profile) > 0


def _tasks() -> dict:
    """This process's OS threads: tid -> (state, user + system CPU ticks)."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = (fields[0], int(fields[11]) + int(fields[12]))
    return out


def _pooled_region(mod, target="llvm -threads=2"):
    region = P.build(mod, target).steps[0].region
    region.modes.choose = lambda: "pool"  # always the driver with the worker
    return region


@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_the_worker_is_kept_across_runs_sleeps_when_idle_and_stops_with_its_region():
    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    region = _pooled_region(mod)
    x = np.random.default_rng(3).integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
    want = P.interpret(mod, [x])[0]  # first: whatever threads the interpreter's libraries start
    before = _tasks()
    assert np.array_equal(region.run([x])[0], want)
    (worker,) = set(_tasks()) - set(before)  # one thread started by the first run
    for _ in range(5):
        assert np.array_equal(region.run([x])[0], want)
    assert set(_tasks()) - set(before) == {worker}  # and kept, not one per run
    time.sleep(0.2)  # far longer than its idle spin: it sleeps on the futex, using no CPU
    state, ticks = _tasks()[worker]
    time.sleep(0.3)
    assert state == "S" and _tasks()[worker] == ("S", ticks)
    assert np.array_equal(region.run([x])[0], want)  # woken by the next run
    del region
    gc.collect()
    assert worker not in _tasks()  # joined when the region was collected


@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_with_a_worker_of_its_own():
    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    region = _pooled_region(mod)
    x = np.random.default_rng(4).integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
    want = P.interpret(mod, [x])[0]
    assert np.array_equal(region.run([x])[0], want)  # the parent's worker exists
    pid = os.fork()
    if pid == 0:  # the child: the parent's worker is not here
        ok = all(np.array_equal(region.run([x])[0], want) for _ in range(5))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert np.array_equal(region.run([x])[0], want)


@pytest.mark.parametrize("isa", ["amx", "vnni", "avxvnni", "avx2"])
@pytest.mark.parametrize(
    "kind, pixels, cin, cout",
    [("dense", 1, 1280, 1000), ("dense", 1, 1024, 600), ("conv", 49, 160, 960),
     ("conv", 49, 192, 72), ("conv", 33, 256, 80)],
)
def test_channel_halves_over_two_threads(isa, kind, pixels, cin, cout):
    """A fully connected layer (one pixel), and a short row of pixels (MobileNet's 7 x 7 layers:
    a few AMX blocks, fewer than CHANNEL_SPLIT_TILES pixel tiles of the other tiers), split
    their output channel groups, the narrower tail group included, over the two threads; the
    same bits as the interpreter on every run."""
    from kernel_checks import build_graph, llvm_target
    from partita.backends.llvm.lower.context import lower
    from partita.backends.llvm.lower.vector_plan import CHANNEL_SPLIT_TILES, by_channels

    geo = ({"rows": pixels} if kind == "dense" else
           {"hw": (1, pixels), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
            "padding": (0, 0, 0, 0)})
    mod, _ = build_graph(kind, "int8", cin, cout, geo, 7, True, None, pre_clip=True)
    plan = lower(P.InferType()(mod)["main"], isa, threads=2)
    (mac,) = [k for k in plan.kernels if k.kind == "VCONV"]
    assert mac.params.get("threads") == 2
    tiles = pixels // mac.params["R"]
    assert by_channels("VCONV", mac.params) == (isa == "amx" or tiles < CHANNEL_SPLIT_TILES)
    if isa in ("vnni", "avxvnni") and pixels == 33:
        assert by_channels("VCONV", mac.params)  # 5 tiles of 6 pixels
    region = _pooled_region(mod, llvm_target(isa, " -threads=2"))
    shape = (pixels, cin) if kind == "dense" else (1, 1, pixels, cin)
    rng = np.random.default_rng(2)
    for _ in range(6):
        x = rng.integers(-128, 128, shape, dtype=np.int8)
        assert np.array_equal(region.run([x])[0], P.interpret(mod, [x])[0])


@pytest.mark.parametrize("isa", ["vnni", "avxvnni", "avx2", "plain"])
@pytest.mark.parametrize("size, dtype", [(4096, "int8"), (8197, "uint8"), (28 * 28 * 32, "int8")])
def test_two_input_tables_split_their_vectors_over_two_threads(isa, size, dtype):
    """LUT2 (a residual qnn.add) of 4096 elements and more gathers half of its vectors on the
    worker; the scalar tail (sizes off the vector width) stays with the calling thread."""
    from kernel_checks import llvm_target
    from partita.backends.llvm.lower.context import lower

    xs = [P.var(f"x{i}", (1, size), dtype) for i in range(2)]
    zp = 3 if dtype == "int8" else 131
    q = [P.const(np.float32(s)) for s in (0.05, 0.07, 0.09)]
    y = P.get_op("qnn.add")(xs[0], xs[1], q[0], P.const(np.int32(zp)), q[1],
                            P.const(np.int32(zp)), q[2], P.const(np.int32(zp)))
    mod = P.IRModule.from_expr(P.Function(xs, y))
    (lut,) = lower(P.InferType()(mod)["main"], isa, threads=2).kernels
    assert lut.kind == "LUT2" and lut.params["threads"] == 2
    region = _pooled_region(mod, llvm_target(isa, " -threads=2"))
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    for _ in range(6):
        data = [rng.integers(info.min, info.max, (1, size), dtype=dtype, endpoint=True)
                for _ in range(2)]
        assert np.array_equal(region.run(data)[0], P.interpret(mod, data)[0])


def _onnx_float_model(kind: str):
    """A float ONNX Conv (3x3, 32 -> 64 channels on 28 x 28), Gemm of 32 rows or of one row
    (MLAS's M=1 kernel: tiles of one row split their channels), imported in MLAS's order."""
    from onnx import TensorProto, helper, numpy_helper
    from partita.frontends import from_onnx

    rng = np.random.default_rng(7)
    if kind == "conv":
        w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32)
        node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
        shapes = ([1, 32, 28, 28], [1, 64, 28, 28])
    else:
        rows, k, n = (32, 1024, 640) if kind == "gemm" else (1, 2048, 2048)  # >= SPLIT_MACS
        w = rng.standard_normal((n, k)).astype(np.float32)
        node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
        shapes = ([rows, k], [rows, n])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shapes[0])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shapes[1])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return from_onnx(model, match="ort_disable_all"), shapes[0]


@pytest.mark.parametrize("isa", ["vnni", "avx2", "plain"])
@pytest.mark.parametrize("kind", ["conv", "gemm", "gemm_one_row"])
def test_float_products_in_mlas_order_split_over_two_threads(isa, kind):
    """FCONV (float products summed in ONNX Runtime's order) splits each tile's rows, or a
    one-row tile's channels, over the two threads, in the register tile of the ISA (AVX-512's
    32 registers or 16): the same bits as one thread and the interpreter on every run."""
    from kernel_checks import llvm_target
    from partita.backends.llvm.layout import LLVMConvertLayout
    from partita.backends.llvm.lower import lower

    mod, shape = _onnx_float_model(kind)
    nhwc = LLVMConvertLayout()(P.InferType()(mod))  # as the llvm host's pass gives it
    (conv,) = [k for k in lower(P.InferType()(nhwc)["main"], isa, threads=2).kernels
               if k.kind == "FCONV"]
    assert conv.params["threads"] == 2
    assert conv.params["regs"] == (32 if isa == "vnni" else 16)
    region = _pooled_region(mod, llvm_target(isa, " -threads=2"))
    one = P.build(mod, llvm_target(isa)).steps[0].region
    rng = np.random.default_rng(9)
    for _ in range(4):
        x = rng.standard_normal(shape).astype(np.float32)
        want = P.interpret(mod, [x])[0]
        assert region.run([x])[0].tobytes() == want.tobytes()
        assert one.run([x])[0].tobytes() == want.tobytes()


def test_chunk_sizes_split_evenly_between_two_threads():
    """chunk_size picks, among sizes up to about SPLIT_CHUNKS chunks' (a multiple of the row
    pairs), the one two equally fast threads claiming from both ends finish first: 56 rows in
    pairs go in 14 chunks of 4 (28 rows each), not 7 of 8 (32 for one thread)."""
    from partita.backends.llvm.runtime.chunks import SPLIT_CHUNKS, chunk_size, makespan

    assert makespan(56, 8) == 32 and makespan(56, 4) == 28 and makespan(7, 1) == 4
    assert makespan(10, 4) == 6  # 4 + 2 against 4: the shorter last chunk goes to the back
    assert chunk_size(56, multiple=2) == 4 and chunk_size(112) == 14
    assert chunk_size(7) == 1 and chunk_size(14, multiple=2) == 2  # 7 pairs: no even split
    for total in range(1, 400):
        for multiple in (1, 2):
            size = chunk_size(total, multiple=multiple)
            first = -(-max(1, -(-total // SPLIT_CHUNKS)) // multiple) * multiple
            assert size % multiple == 0 and 1 <= -(-total // size) <= 2 * SPLIT_CHUNKS
            assert size <= first and makespan(total, size) <= makespan(total, first)


def test_timed_chunk_sizes_are_finer_for_longer_kernels():
    """With the kernel's multiply-adds and tier, chunk_size prices claims and the half chunk
    one thread waits for at the end in time: MobileNetV2's 7 x 7 products (24 channel groups,
    20 M multiply-adds) go in chunks of one group on avx2 (~300 us), of two on amx (~33 us),
    where the count-based sizes gave three; a short kernel keeps few chunks."""
    from partita.backends.llvm.runtime.chunks import MAX_CHUNKS, chunk_size, timed_chunk_size

    assert chunk_size(24, work=20_070_400, isa="avx2") == 1
    assert chunk_size(24, work=20_070_400, isa="amx") == 2
    assert chunk_size(24) == 3
    assert chunk_size(24, work=100_000, isa="amx") >= 6  # ~0.2 us of work: claims dominate
    assert chunk_size(24, work=20_070_400, isa="unknown") == 3  # no rate: counted
    for total in (1, 7, 24, 98, 112, 6272):
        for multiple in (1, 2):
            for seconds in (1e-6, 30e-6, 3e-4, 3e-2):
                size = timed_chunk_size(total, multiple, seconds)
                assert size % multiple == 0 and -(-total // size) <= MAX_CHUNKS
                longer = timed_chunk_size(total, multiple, 10 * seconds)
                assert longer <= size  # a longer kernel never gets coarser chunks


@pytest.mark.parametrize("isa", ["avx2", "vnni"])
@pytest.mark.parametrize(
    "kind, hw, k, cin, cout",
    [("depthwise", (15, 40), (3, 3), 64, 64),  # 13 rows: chunks of 2 (row pairs), the last of 1
     ("depthwise", (9, 60), (3, 3), 192, 192),  # 7 rows: chunks of 1 or 2
     ("conv", (14, 14), (3, 3), 32, 48),  # 12 output rows
     ("conv", (1, 49), (1, 1), 160, 96)],  # a pointwise row: pixel tiles, the tail with the last
)
def test_int8_kernels_split_in_chunks_keep_the_bits(isa, kind, hw, k, cin, cout, monkeypatch):
    """VDW's output rows and VCONV's rows or pixel tiles in chunks (runtime/chunks.py
    chunk_size, about SPLIT_CHUNKS of them) that the driver's thread and the worker claim;
    with the worker on every run the same bits as the interpreter."""
    from kernel_checks import build_graph, llvm_target
    from partita.backends.llvm.lower.context import lower
    from partita.backends.llvm.runtime import threads
    claims = []
    real = threads.ThreadPool.split_chunks
    monkeypatch.setattr(threads.ThreadPool, "split_chunks", lambda self, kk, b, ps, total, size,
                        emit, **kw: claims.append((kk.kind, total, size)) or
                        real(self, kk, b, ps, total, size, emit, **kw))
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    geo = {"hw": hw, "k": k, "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0)}
    mod, _ = build_graph(kind, "int8", cin, cout, geo, 5, True, None, pre_clip=True)
    plan = lower(P.InferType()(mod)["main"], isa, threads=2)
    want_kind = "VDW" if kind == "depthwise" else "VCONV"
    (mac,) = [kk for kk in plan.kernels if kk.kind == want_kind]
    assert mac.params.get("threads") == 2
    region = _pooled_region(mod, llvm_target(isa, " -threads=2"))
    split = [c for c in claims if c[0] == want_kind]
    assert split and all(-(-total // size) >= 3 for _, total, size in split)
    if kind == "depthwise" and mac.params.get("rowpairs"):
        assert all(size % 2 == 0 for _, _, size in split)
    rng = np.random.default_rng(4)
    for _ in range(6):
        x = rng.integers(-128, 128, (1, *hw, cin), dtype=np.int8)
        assert np.array_equal(region.run([x])[0], P.interpret(mod, [x])[0])


@pytest.mark.parametrize("isa", ["amx", "vnni", "avxvnni", "avx2"])
@pytest.mark.parametrize(
    "kind, hw, k, cin, cout",
    [("depthwise", (15, 40), (3, 3), 64, 64),  # 13 rows in 7 chunks of 2, the last of 1
     ("conv", (1, 200), (1, 1), 64, 96)],  # a pointwise row: pixel tiles or AMX blocks, a tail
)
def test_chunks_from_either_end_cover_the_kernel(isa, kind, hw, k, cin, cout, monkeypatch):
    """split_chunks: this thread claims chunks from the front (FIRST_SHARE of them at its first
    claim, then one at a time), the worker from the back, until they meet. The driver without
    the worker runs the front claimer, then the back one (which finds nothing left); with the
    two swapped, the back claimer takes every chunk, so its index (count - 1 - claims from the
    back) and the short chunk's end are each checked; and with the worker both ends meet
    somewhere (swapped, the worker's first claim, all the back has not claimed, is cut where
    the back claimer got to). Every way the interpreter's bits."""
    from kernel_checks import build_graph, llvm_target
    from partita.backends.llvm.lower.context import lower
    from partita.backends.llvm.runtime import threads

    real = threads.ThreadPool.split_run
    monkeypatch.setattr(threads.ThreadPool, "split_run", lambda self, kk, b, ps, parts:
                        real(self, kk, b, ps, parts[::-1]))
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    geo = {"hw": hw, "k": k, "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0)}
    mod, _ = build_graph(kind, "int8", cin, cout, geo, 5, True, None, pre_clip=True)
    (mac,) = [kk for kk in lower(P.InferType()(mod)["main"], isa, threads=2).kernels
              if kk.kind in ("VCONV", "VDW")]
    assert mac.params.get("threads") == 2  # split
    # the front claimer's first claim takes every chunk the back has not claimed: with the
    # worker as the front (the parts swapped), a claim cut where the back claimer got to
    monkeypatch.setattr(threads, "FIRST_SHARE", 1.0)
    back_first = P.build(mod, llvm_target(isa, " -threads=2")).steps[0].region
    monkeypatch.undo()
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    front_first = P.build(mod, llvm_target(isa, " -threads=2")).steps[0].region
    rng = np.random.default_rng(6)
    for mode in ("alone", "pool", "alone", "pool"):
        x = rng.integers(-128, 128, (1, *hw, cin), dtype=np.int8)
        want = P.interpret(mod, [x])[0]
        for region in (back_first, front_first):
            region.modes.choose = lambda mode=mode: mode
            assert np.array_equal(region.run([x])[0], want), (mode, region is back_first)



@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_a_worker_sharing_the_drivers_cpu_gives_it_back_while_it_waits_for_a_job():
    """The driver and the worker on one CPU (the worker inherits the driver's affinity, as
    where the OS puts both on one core next to a third thread: a peer runtime's pool spinning
    in this process), the worker forced: the worker waiting for the next job during a call
    yields the CPU (sched_yield every CALL_SPINS pauses) and a driver waiting for a worker that
    does not run sleeps on the "finished" futex until the worker's end of the job wakes it.
    Every run's bits stay one thread's and every run ends (a lost wake-up would leave the
    driver on its 1 ms backstop; a deadlock would hang). The speed of this placement (1.7-1.9x
    one thread's time before the change, about 1.0-1.1x after) is measured, not asserted:
    docs/performance-history.md, session 20 (thr9)."""
    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    x = np.random.default_rng(5).integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
    want = P.interpret(mod, [x])[0]
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        region = _pooled_region(mod)  # built here: its worker starts on this CPU
        alone = P.build(mod, "llvm -threads=2").steps[0].region
        alone.modes.choose = lambda: "alone"
        for _ in range(4):
            for r in (region, alone):
                for _ in range(10):
                    assert np.array_equal(r.run([x])[0], want)
    finally:
        os.sched_setaffinity(0, cpus)


@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
def test_the_handoff_trace_records_one_job_per_split_kernel_and_who_ran_it(tmp_path,
                                                                           monkeypatch):
    """threads.TRACE (benchmarks/thread_profile.py --handoff): with the worker's driver every
    split kernel publishes one job, in order, and either the worker claimed it (its claim and
    end stamped, in order on its core) or the driver ran both parts ("late"), never both; the
    one-thread driver publishes none; without TRACE the build has no trace."""
    from partita.backends.llvm.runtime import threads

    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "off"))
    plain = P.build(mod, "llvm -threads=2").steps[0].region
    assert plain._loaded.engine.get_global_value_address("partita_pool_trace") == 0
    monkeypatch.setattr(threads, "TRACE", True)
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "on"))
    region = P.build(mod, "llvm -threads=2").steps[0].region
    split = sum(bool(region._loaded.engine.get_function_address(f"{fn}_whole"))
                for fn, _ in region.calls)
    address = region._loaded.engine.get_global_value_address("partita_pool_trace")
    assert split >= 3 and address
    import ctypes

    fields = {n: i for i, n in enumerate(threads.TRACE_FIELDS)}
    trace = np.frombuffer((ctypes.c_int64 * (threads.TRACE_SLOTS * len(fields)))
                          .from_address(address), np.int64).reshape(threads.TRACE_SLOTS, -1)
    turns = iter(["pool", "alone"] * 4)
    region.modes.choose = lambda: next(turns)
    rng = np.random.default_rng(5)
    last = 0
    for run in range(8):
        x = rng.integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
        assert np.array_equal(region.run([x])[0], P.interpret(mod, [x])[0])
        jobs = trace[trace[:, fields["job"]] > last]
        if run % 2:  # alone: no job
            assert len(jobs) == 0
            continue
        jobs = jobs[np.argsort(jobs[:, fields["job"]])]
        assert len(jobs) == split and list(jobs[:, fields["job"]]) == list(
            range(last + 1, last + 1 + split))
        last = int(jobs[-1, fields["job"]])
        for j in jobs:
            publish, own, end = (j[fields[n]] for n in ("publish", "own_done", "end"))
            claim, done, late = (j[fields[n]] for n in ("claim", "worker_done", "late"))
            assert 0 < publish <= own <= end and late in (0, 1)
            assert (claim == 0) == (late == 1)  # the worker's part ran on exactly one thread
            if claim:
                assert claim <= done


def test_thread_profile_reports_every_split_kernels_handoffs(capsys, monkeypatch):
    """benchmarks/thread_profile.py --handoff end to end on AMX code (-emulate=yes where the CPU
    lacks AMX), whose kernels pass split_chunks an ``around`` hook: one hand-off row per split
    kernel (the report had lost its rows when the kernel times changed keys, and the --handoff
    wrapper refused ``around``)."""
    import importlib.util

    from kernel_checks import llvm_target
    from partita.backends.llvm.runtime import threads

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "thread_profile.py"
    spec = importlib.util.spec_from_file_location("thread_profile_under_test", path)
    tp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tp)
    monkeypatch.setattr(threads.ThreadPool, "split_chunks", threads.ThreadPool.split_chunks)
    monkeypatch.setattr(threads, "TRACE", threads.TRACE)
    for name in ("PARTITA_REGION_CACHE", "PARTITA_COMPILE_JOBS", "PARTITA_CACHE_DIR"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        monkeypatch.delenv(name)
    options = llvm_target("amx").removeprefix("llvm ")
    assert tp.main(["--model", str(NETS / "mobilenet_v2_035_96.tflite"), "--runs", "1",
                    "--block", "1", "--handoff", f"--options={options}"]) == 0
    out = capsys.readouterr().out
    table = out.split("hand-offs (threads.TRACE", 1)[1].split("sums:", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.strip()]
    assert len(rows) >= 3 and any(line.split()[-1].startswith("vconv_") for line in rows)
    assert "x" in rows[0].split()[-2]  # the chunk plan split_chunks recorded (count x units)


@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
def test_thread_watch_sums_each_two_thread_runs_handoffs(capsys, monkeypatch):
    """benchmarks/thread_watch.py end to end: a timeline line, then every sum of a two-thread
    run (its split kernels' jobs, both threads' parts, the hand-offs) for the fast blocks, and
    the one-thread build of the same rounds."""
    import importlib.util

    from partita.backends.llvm.runtime import threads

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "thread_watch.py"
    spec = importlib.util.spec_from_file_location("thread_watch_under_test", path)
    tw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tw)
    monkeypatch.setattr(threads, "TRACE", threads.TRACE)
    for name in ("PARTITA_REGION_CACHE", "PARTITA_CACHE_DIR"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        monkeypatch.delenv(name)
    assert tw.main(["--model", str(NETS / "mobilenet_v2_035_96.tflite"), "--seconds", "1",
                    "--every", "0.5", "--block", "2"]) == 0
    out = capsys.readouterr().out
    assert "ratio" in out.split("blocks;", 1)[0]
    table = {line.split("  ")[1].strip(): line.split()[-2:] for line in
             out.split("slow blocks", 1)[1].splitlines() if line.startswith("  ")}
    assert set(tw.SUMS) | {"one thread, same rounds"} <= set(table)
    fast = {k: float(v[0]) for k, v in table.items()}
    assert fast["jobs"] >= 3 and fast["driver parts"] > 0
    # the worker took parts, or (a busy machine) was late and the driver ran them
    assert fast["worker parts"] > 0 or fast["late"] > 0
    assert fast["driver parts"] < fast["wall"] and fast["one thread, same rounds"] > 0
