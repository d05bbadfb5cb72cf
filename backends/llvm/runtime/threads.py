"""Two cores for one inference: a worker thread kept across driver calls, and halves of kernels
claimed.

The first driver call (``partita_run``) of a plan with a split kernel in a process starts one
POSIX thread, the worker; it stays for later calls. A driver call owns the module's job slot
for the call (another thread calling at the same time runs without the worker) and wakes the
worker if it sleeps. A split kernel publishes its second half (a function and its pointer
table) under a new job number, runs its first half, then claims the second with a
compare-and-swap: if the worker took it first, the kernel waits for the worker's done number;
otherwise (the worker is late: the other core is busy, it is still waking up, or no worker
exists because the kernel was called on its own, by another thread, or thread creation failed)
it runs the second half itself. So no kernel ever waits for a thread that has not started, and
the results are the same bits either way (each half writes its own outputs). A driver that
waits for the worker past its spin sleeps on a futex until the worker's end of the job wakes
it, and the worker waiting for a job during a call yields its core now and then, so two threads
the OS put on one core (next to a third runnable thread) hand it to each other instead of
spinning through time slices. Between calls the worker spins for IDLE_SPINS pauses
(back-to-back inferences find it awake), then sleeps on a futex until the next call wakes it.
``partita_pool_shutdown`` stops and joins it (LLVMRegion calls it when the region is
collected, and at exit); a forked child starts a worker of its own. Whether a call
uses the worker at all is TwoModes' choice (runtime/modes.py; ``partita_run`` or
``partita_run_alone``): one thread first, the worker tried on a few runs while other processes
leave a second CPU free (this process's own threads, another runtime's spinning pool included,
do not count), and kept while it is faster. Linux only (futex), as is the rest of the backend's
threading.
"""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I64, Family, c64

from .chunks import split_work

I32 = ir.IntType(32)

PTR = ir.PointerType()
ALONE = "partita_run_alone"  # the driver without a worker
# i64 globals; "pid": the process whose worker "tid" runs (0: none yet)
SLOTS = ("seq", "claimed", "done", "quit", "active", "owner", "job_id", "slow", "pid", "tid")
# i32 globals: the futex word the worker sleeps on, and its flag; the futex word the driver
# waits on for a job's end (the job number's low 32 bits), and its flag
WORDS = ("epoch", "sleeping", "finished", "waiting")
# pauses the worker waits for the next call before it sleeps: ~0.2 ms of its CPU after each
# call here (Intel Xeon, session 23). 1 << 11 (~0.05 ms) was shorter than the ~0.1 ms of Python
# between two back-to-back runs (the inputs' checks, the outputs' copies), so the worker slept
# before every call and a halted virtual CPU woke up through the first kernels: MobileNetV2's
# two threads 0.72 -> 0.65 of one thread on amx, 0.69 -> 0.65 on vnni (benchmarks/cpu.py)
IDLE_SPINS = 1 << 14
SHUTDOWN = "partita_pool_shutdown"
SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129  # x86-64 Linux
# pause instructions waited for the worker before the run counts as slow (its remaining kernels
# then run both halves here): at least WAIT, or a kernel's multiply-adds >> WAIT_SHIFT (a float
# product of 100 M multiply-adds runs for milliseconds, its halves unevenly)
WAIT, WAIT_SHIFT = 1 << 12, 14
JOB = ("job_table",)  # ptr globals
MARK_SLOW = False  # True: a driver that slept for the worker runs the rest of the call alone
YIELD_IDLE = True  # the worker waiting for a job during a call yields every CALL_SPINS pauses
CALL_SPINS = 1 << 8
NAP_NS = 1_000_000  # a sleeping driver looks at "done" again after this at the latest
# hand-off time stamps (llvm.readcyclecounter) per job in "partita_pool_trace", TRACE_SLOTS
# slots of TRACE_FIELDS i64 (the job number's low bits pick the slot): set before a build, as
# benchmarks/thread_profile.py --handoff does (an emission switch: the object caches do not
# know it)
TRACE = False
TRACE_SLOTS = 256
# job number; the driver publishes it; the worker claims it; the driver's first part returns;
# the worker's part returns; the kernel ends (the driver has the worker's part, or ran it
# itself: "late" 1)
TRACE_FIELDS = ("job", "publish", "claim", "own_done", "worker_done", "end", "late", "pad")
# the share of a kernel's chunks the driver's first claim takes (split_chunks; at least one):
# the worker, later to start, claims the back chunks meanwhile on its own core. 0 (one chunk,
# as before): 3/8 was not measurably better on the busy machine of session 22 (its two runs
# with the worker were slower, confounded by the worker's presence: docs/performance-history.md)
FIRST_SHARE = 0.0


class ThreadPool(Family):
    """A kernel family (``em.pool``): ``pool_start`` / ``pool_stop`` around the driver's calls,
    ``split_run`` for the kernels."""

    def pool_global(self, name: str):
        g = self.module.globals.get(f"partita_pool_{name}")
        if g is None:
            ty = PTR if name in JOB else I32 if name in WORDS else I64
            g = ir.GlobalVariable(self.module, ty, f"partita_pool_{name}")
            g.linkage = "internal"
            g.initializer = ir.Constant(ty, None)
        return g

    def trace(self, b, job, field: str, value=None) -> None:
        """With TRACE: partita_pool_trace[job's slot][field] = ``value`` (default: the time
        stamp counter now)."""
        if not TRACE:
            return
        g = self.module.globals.get("partita_pool_trace")
        if g is None:
            ty = ir.ArrayType(I64, TRACE_SLOTS * len(TRACE_FIELDS))
            g = ir.GlobalVariable(self.module, ty, "partita_pool_trace")
            g.initializer = ir.Constant(ty, None)
        if value is None:
            counter = self.module.globals.get("llvm.readcyclecounter") or ir.Function(
                self.module, ir.FunctionType(I64, []), "llvm.readcyclecounter")
            value = b.call(counter, [])
        slot = b.and_(job, c64(TRACE_SLOTS - 1))
        at = b.add(b.mul(slot, c64(len(TRACE_FIELDS))), c64(TRACE_FIELDS.index(field)))
        address = b.add(b.ptrtoint(g, I64), b.mul(at, c64(8)))
        b.store(value, b.inttoptr(address, ir.PointerType(I64)))

    def extern(self, name: str, ret, args) -> ir.Function:
        fn = self.module.globals.get(name)
        return fn if fn is not None else ir.Function(self.module, ir.FunctionType(ret, args), name)

    def pause(self, b) -> None:
        fn = self.module.globals.get("llvm.x86.sse2.pause") or ir.Function(
            self.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause"
        )
        b.call(fn, [])

    def self_id(self, b):
        return b.call(self.extern("pthread_self", I64, []), [])

    def pid(self, b):
        return b.sext(b.call(self.extern("getpid", I32, []), []), I64)

    def futex(self, b, op: int, value, word: str = "epoch", timeout=None) -> None:
        """``syscall(SYS_futex, &word, op, value, timeout)``: wait while word == value (at most
        ``timeout``, a timespec pointer, if given), or wake ``value`` waiters."""
        fn = self.module.globals.get("syscall") or ir.Function(
            self.module, ir.FunctionType(I64, [I64], var_arg=True), "syscall"
        )
        b.call(fn, [c64(SYS_FUTEX), self.pool_global(word), c64(op), value,
                    ir.Constant(PTR, None) if timeout is None else timeout])

    def wake(self, b, g) -> None:
        """A new epoch, and a futex wake if the worker sleeps (or is about to: see nap)."""
        b.atomic_rmw("add", g["epoch"], ir.Constant(I32, 1), "seq_cst")
        sleeping = b.load_atomic(g["sleeping"], "seq_cst", 4, typ=I32)
        with b.if_then(b.icmp_signed("!=", sleeping, ir.Constant(I32, 0))):
            self.futex(b, FUTEX_WAKE_PRIVATE, c64(1))

    def worker(self) -> ir.Function:
        """``ptr partita_pool_worker(ptr)``, declared here; ``pool_finish`` writes its body once
        every split kernel has registered its second half."""
        fn = self.module.globals.get("partita_pool_worker")
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(PTR, [PTR]), "partita_pool_worker")
            fn.linkage = "internal"
        return fn

    def pool_finish(self) -> None:
        """The worker: claim and run each new job (a switch over the registered second halves)
        until quit, napping on the futex when no call has come for IDLE_SPINS pauses; and
        ``partita_pool_shutdown``."""
        parts = getattr(self, "pool_parts", [])
        if not parts:
            return
        fn = self.worker()
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        g = {n: self.pool_global(n) for n in SLOTS + JOB + WORDS}
        last, idle = b.alloca(I64), b.alloca(I64)
        b.store(b.load_atomic(g["seq"], "acquire", 8, typ=I64), last)
        b.store(c64(0), idle)
        names = ("loop", "job", "idle", "spin", "nap", "end")
        loop, job, wait, spin, nap, end = (fn.append_basic_block(n) for n in names)
        b.branch(loop)
        b.position_at_end(loop)
        s = b.load_atomic(g["seq"], "acquire", 8, typ=I64)
        b.cbranch(b.icmp_signed("!=", s, b.load(last, typ=I64)), job, wait)
        b.position_at_end(job)
        b.store(s, last)
        b.store(c64(0), idle)
        won = b.extract_value(b.cmpxchg(g["claimed"], b.sub(s, c64(1)), s, "acq_rel", "acquire"),
                              1)
        run, finished = fn.append_basic_block("run"), fn.append_basic_block("finished")
        b.cbranch(won, run, loop)
        b.position_at_end(run)
        self.trace(b, s, "claim")
        table = b.load(g["job_table"], typ=PTR)
        switch = b.switch(b.load(g["job_id"], typ=I64), finished)
        for i, part in enumerate(parts, 1):
            case = fn.append_basic_block(f"part{i}")
            switch.add_case(c64(i), case)
            b.position_at_end(case)
            b.call(part, [table])
            b.branch(finished)
        b.position_at_end(finished)
        self.trace(b, s, "worker_done")
        b.store_atomic(s, g["done"], "release", 8)
        # a driver that stopped spinning for this job sleeps on "finished" (wait_done)
        b.store_atomic(b.trunc(s, I32), g["finished"], "seq_cst", 4)
        waiting = b.load_atomic(g["waiting"], "seq_cst", 4, typ=I32)
        with b.if_then(b.icmp_signed("!=", waiting, ir.Constant(I32, 0))):
            self.futex(b, FUTEX_WAKE_PRIVATE, c64(1), "finished")
        b.branch(loop)
        b.position_at_end(wait)
        quit_ = b.load_atomic(g["quit"], "acquire", 8, typ=I64)
        b.cbranch(b.icmp_signed("!=", quit_, c64(0)), end, spin)
        b.position_at_end(spin)
        self.pause(b)
        n = b.add(b.load(idle, typ=I64), c64(1))
        b.store(n, idle)
        give = fn.append_basic_block("give")
        b.cbranch(b.icmp_signed("<", n, c64(IDLE_SPINS)),
                  give if YIELD_IDLE else loop, nap)
        # give: every CALL_SPINS pauses of waiting for a job while a call runs, yield the core
        # (the driver may be queued on it: where the OS put both threads on one core next to
        # a third, a peer runtime's spinning pool, a spinning worker held the driver a slice)
        b.position_at_end(give)
        tick = b.icmp_signed("==", b.and_(n, c64(CALL_SPINS - 1)), c64(0))
        with b.if_then(b.and_(tick, b.icmp_signed(
                "!=", b.load_atomic(g["active"], "monotonic", 8, typ=I64), c64(0)))):
            b.call(self.extern("sched_yield", I32, []), [])
        b.branch(loop)
        # nap: announce the sleep, then sleep only if no call is running, no job is new and the
        # epoch is unchanged (a call's wake either sees the flag or changed the epoch first)
        b.position_at_end(nap)
        epoch = b.load_atomic(g["epoch"], "acquire", 4, typ=I32)
        b.store_atomic(ir.Constant(I32, 1), g["sleeping"], "seq_cst", 4)
        calm = b.and_(
            b.icmp_signed("==", b.load_atomic(g["active"], "seq_cst", 8, typ=I64), c64(0)),
            b.icmp_signed("==", b.load_atomic(g["seq"], "seq_cst", 8, typ=I64),
                          b.load(last, typ=I64)),
        )
        calm = b.and_(calm, b.icmp_signed(
            "==", b.load_atomic(g["quit"], "seq_cst", 8, typ=I64), c64(0)))
        with b.if_then(calm):
            self.futex(b, FUTEX_WAIT_PRIVATE, b.zext(epoch, I64))
        b.store_atomic(ir.Constant(I32, 0), g["sleeping"], "release", 4)
        b.store(c64(0), idle)
        b.branch(loop)
        b.position_at_end(end)
        b.ret(ir.Constant(PTR, None))
        self.pool_shutdown(g)

    def pool_shutdown(self, g) -> None:
        """``void partita_pool_shutdown(void)``: stop and join this process's worker, if any."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), []), SHUTDOWN)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ours = b.icmp_signed("==", b.load(g["pid"], typ=I64), self.pid(b))
        with b.if_then(ours):
            b.store_atomic(c64(1), g["quit"], "seq_cst", 8)
            self.wake(b, g)
            self.futex(b, FUTEX_WAKE_PRIVATE, c64(1))  # whatever the flag said
            join = self.extern("pthread_join", I32, [I64, PTR])
            b.call(join, [b.load(g["tid"], typ=I64), ir.Constant(PTR, None)])
            b.store(c64(0), g["pid"])
            b.store_atomic(c64(0), g["quit"], "release", 8)
        b.ret_void()

    def pool_start(self, b):
        """In the driver: own the job slot (or leave the kernels to run both halves); start this
        process's worker on its first call, wake it on later ones; returns what ``pool_stop``
        needs."""
        g = {n: self.pool_global(n) for n in SLOTS + WORDS}
        mine = b.alloca(I64)
        b.store(c64(0), mine)
        owned = b.extract_value(b.cmpxchg(g["active"], c64(0), c64(1), "seq_cst", "seq_cst"), 1)
        with b.if_then(owned):
            b.store(c64(1), mine)
            b.store_atomic(self.self_id(b), g["owner"], "release", 8)
            pid = self.pid(b)
            with b.if_else(b.icmp_signed("==", b.load(g["pid"], typ=I64), pid)) as (known, new):
                with known:
                    self.wake(b, g)
                with new:  # the first call in this process (or in a forked child)
                    for name in ("seq", "claimed", "done", "quit"):
                        b.store_atomic(c64(0), g[name], "release", 8)
                    create = self.extern("pthread_create", I32, [PTR, PTR, PTR, PTR])
                    rc = b.call(create, [g["tid"], ir.Constant(PTR, None), self.worker(),
                                         ir.Constant(PTR, None)])
                    with b.if_then(b.icmp_signed("==", rc, ir.Constant(I32, 0))):
                        b.store(pid, g["pid"])
        return mine

    def pool_stop(self, b, mine) -> None:
        g = {n: self.pool_global(n) for n in SLOTS}
        with b.if_then(b.icmp_signed("!=", b.load(mine, typ=I64), c64(0))):
            b.store_atomic(c64(0), g["owner"], "release", 8)
            # across runs, TwoModes (measured run times) decides whether the worker pays
            b.store(c64(0), g["slow"])
            b.store_atomic(c64(0), g["active"], "release", 8)

    def split_run(self, k, b, pointers, parts) -> None:
        """parts[0] here and parts[1] on the driver's worker if it claims it first (see the
        module docstring), both on a table of ``pointers``."""
        table = b.alloca(PTR, c64(len(pointers)))
        for i, v in enumerate(pointers):
            self.store_at(b, v, table, c64(i), PTR)
        g = {n: self.pool_global(n) for n in SLOTS + JOB + WORDS}
        owner = b.load_atomic(g["owner"], "acquire", 8, typ=I64)
        mine = b.and_(b.icmp_signed("==", owner, self.self_id(b)),
                      b.icmp_signed("==", b.load(g["slow"], typ=I64), c64(0)))
        with b.if_else(mine) as (pooled, alone):
            with pooled:
                if not hasattr(self, "pool_parts"):
                    self.pool_parts = []
                if parts[1] not in self.pool_parts:
                    self.pool_parts.append(parts[1])
                job = b.add(b.load(g["seq"], typ=I64), c64(1))
                b.store(c64(self.pool_parts.index(parts[1]) + 1), g["job_id"])
                b.store(table, g["job_table"])
                self.trace(b, job, "job", job)
                for field in ("claim", "worker_done", "late"):
                    self.trace(b, job, field, c64(0))
                self.trace(b, job, "publish")
                b.store_atomic(job, g["seq"], "release", 8)
                b.call(parts[0], [table])
                self.trace(b, job, "own_done")
                pair = b.cmpxchg(g["claimed"], b.sub(job, c64(1)), job, "acq_rel", "acquire")
                with b.if_else(b.extract_value(pair, 1)) as (late, taken):
                    with late:  # the worker has not claimed it: run it here
                        b.call(parts[1], [table])
                        self.trace(b, job, "late", c64(1))
                    with taken:
                        self.wait_done(b, g, job, max(WAIT, split_work(k) >> WAIT_SHIFT))
                self.trace(b, job, "end")
            with alone:
                b.call(parts[0], [table])
                b.call(parts[1], [table])

    def split_chunks(self, k, b, pointers, total: int, size: int, emit, tag: str = "",
                     around=None) -> None:
        """[0, ``total``) in chunks of ``size`` (the last maybe shorter) that this thread claims
        from the front and the driver's worker from the back, one at a time (this thread's
        first claim FIRST_SHARE of them at once, if set: the worker, later to start, claims its
        first ones on its own core meanwhile), until they meet (a worker the OS deschedules holds up
        one chunk, not half the kernel): ``emit(builder,
        pointers, lo, hi)`` writes indices [lo, hi) in a function of its own, ``{name}_range``,
        whose pointers are noalias as the kernel's (read from the split's table they would not
        be). Each index is computed by one chunk with the one-thread code, so the bits are one
        thread's. From the two ends, each thread keeps to its side of every kernel on a quiet
        machine, as fixed halves did, so the rows a thread writes are mostly the rows it reads
        in the next kernel (chunks claimed in turn from one end go to either core). Measured
        on an Intel Xeon (AMX MobileNetV2, worker forced): 0.65-0.68 of one thread against
        0.76-0.79 from one end in separate processes on quiet minutes, alike interleaved in
        one process (session 19, docs/performance-history.md). ``tag`` names a kernel's second split
        (its functions and counter ``{name}{tag}_...``). ``around`` = (enter, leave):
        a part that finds chunks left runs ``enter(builder, pointers, back)`` (``back``: the
        worker's end) before its first claim and may return the pointers its chunks get (a
        scratch of its own), and ``leave(builder)`` after its last: the AMX kernels' tile
        configuration once per part rather than per chunk, DYNQ_DENSE's packing of x on both
        threads at once rather than on the driver's before the split."""
        ptr = ir.PointerType()
        n = len(pointers)
        rng = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [ptr] * n + [I64, I64]),
                          f"{k.name}{tag}_range")
        rng.linkage = "internal"
        for arg in rng.args[:n]:
            arg.add_attribute("noalias")
        rb = ir.IRBuilder(rng.append_basic_block("entry"))
        emit(rb, list(rng.args[:n]), *rng.args[n:])
        rb.ret_void()
        count = -(-total // size)
        # claims from the front count in the low 32 bits, from the back in the high 32: one
        # atomic add claims a chunk while the two counts' sum (before it) is below ``count``
        counter = ir.GlobalVariable(self.module, I64, f"{k.name}{tag}_next_chunk")
        counter.linkage = "internal"
        counter.initializer = c64(0)
        b.store_atomic(c64(0), counter, "release", 8)
        parts = []
        for end, step in (("chunks", 1), ("chunks_back", 1 << 32)):
            part = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [ptr]),
                               f"{k.name}{tag}_{end}")
            part.linkage = "internal"
            pb = ir.IRBuilder(part.append_basic_block("entry"))
            ps = [pb.load(pb.gep(part.args[0], [c64(i)], source_etype=ptr), typ=ptr)
                  for i in range(n)]
            loop, work, done = (part.append_basic_block(m) for m in ("claim", "chunk", "out"))
            # the front's first claim takes ``first`` chunks at once (those the back has not
            # claimed): fewer claims alternating between the cores
            first = max(1, int(count * FIRST_SHARE)) if step == 1 else 1
            inc = pb.alloca(I64)
            if around is not None:  # nothing left (a late driver's second part): no enter
                seen = pb.load_atomic(counter, "acquire", 8, typ=I64)
                left = pb.icmp_signed("<", pb.add(pb.and_(seen, c64((1 << 32) - 1)),
                                                  pb.lshr(seen, c64(32))), c64(count))
                start, empty = (part.append_basic_block(m) for m in ("enter", "empty"))
                pb.cbranch(left, start, empty)
                pb.position_at_end(empty)
                pb.ret_void()
                pb.position_at_end(start)
                ps = around[0](pb, ps, step != 1) or ps
            pb.store(c64(first), inc)
            pb.branch(loop)
            pb.position_at_end(loop)
            take = pb.load(inc, typ=I64)
            old = pb.atomic_rmw("add", counter, take if step == 1 else c64(step), "acq_rel")
            pb.store(c64(1), inc)
            front, back = pb.and_(old, c64((1 << 32) - 1)), pb.lshr(old, c64(32))
            pb.cbranch(pb.icmp_signed("<", pb.add(front, back), c64(count)), work, done)
            pb.position_at_end(work)
            if step == 1:
                c, c_end = front, pb.add(front, take)
                free = pb.sub(c64(count), back)  # chunks [count - back, count): the back's
                c_end = pb.select(pb.icmp_signed("<", c_end, free), c_end, free)
            else:
                c = pb.sub(c64(count - 1), back)
                c_end = pb.add(c, c64(1))
            lo, end_ = pb.mul(c, c64(size)), pb.mul(c_end, c64(size))
            pb.call(rng, [*ps, lo,
                          pb.select(pb.icmp_signed("<", end_, c64(total)), end_, c64(total))])
            pb.branch(loop)
            pb.position_at_end(done)
            if around is not None:
                around[1](pb)
            pb.ret_void()
            parts.append(part)
        self.split_run(k, b, pointers, parts)

    def wait_done(self, b, g, job, limit: int = WAIT) -> None:
        """Wait until the worker has finished ``job``: spin up to ``limit`` pauses (the end of
        its last chunk), then sleep on the "finished" futex word until the worker's store of the
        job number wakes it (a 1 ms timeout as a backstop). A descheduled worker (another
        runnable thread holds its core: a peer runtime's spinning pool in this process, or
        another process) so waits with this core given up, which the scheduler can hand to the
        worker at once; spinning on (or sched_yield, which leaves the worker queued on the
        other core) held the kernel a whole time slice. With MARK_SLOW a sleep marks the run
        slow: its remaining kernels run both halves here."""
        fn = b.function
        count = b.alloca(I64)
        b.store(c64(0), count)
        ts = b.alloca(ir.ArrayType(I64, 2))
        b.store(ir.Constant(ir.ArrayType(I64, 2), [0, NAP_NS]), ts)
        spin, nap, out = (fn.append_basic_block(n) for n in ("wait", "nap", "waited"))
        b.branch(spin)
        b.position_at_end(spin)
        self.pause(b)
        n = b.add(b.load(count, typ=I64), c64(1))
        b.store(n, count)
        value = b.load_atomic(g["done"], "acquire", 8, typ=I64)
        again = fn.append_basic_block("wait_more")
        b.cbranch(b.icmp_signed("==", value, job), out, again)
        b.position_at_end(again)
        b.cbranch(b.icmp_signed(">=", n, c64(limit)), nap, spin)
        b.position_at_end(nap)
        if MARK_SLOW:
            b.store(c64(1), g["slow"])
        b.store_atomic(ir.Constant(I32, 1), g["waiting"], "seq_cst", 4)
        seen = b.load_atomic(g["finished"], "seq_cst", 4, typ=I32)
        with b.if_then(b.icmp_signed("!=", seen, b.trunc(job, I32))):
            self.futex(b, FUTEX_WAIT_PRIVATE, b.zext(seen, I64), "finished", ts)
        b.store_atomic(ir.Constant(I32, 0), g["waiting"], "release", 4)
        value = b.load_atomic(g["done"], "acquire", 8, typ=I64)
        b.cbranch(b.icmp_signed("==", value, job), out, nap)
        b.position_at_end(out)
