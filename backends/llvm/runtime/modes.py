"""Which of a ``-threads=2`` region's two drivers a run calls: the worker's
(``partita_run``, runtime/threads.py) or the one-thread one (``partita_run_alone``), by the
run times measured and whether other processes leave a second CPU (runtime/idle.py)."""

from __future__ import annotations

import time
from collections import deque
from statistics import median

from partita.backends.llvm.runtime.idle import IdleCPU, Siblings

PROBE = 8  # every PROBE-th run of a region tries the mode that measured slower


class TwoModes:
    """Which driver a region calls: with the worker ("pool") or without ("alone").

    One thread is the safe mode: a region starts there (its first BASELINE runs time it) and
    goes back to it when MISSES runs in a row with the kept worker (one run during a probe)
    are slower than the median of the last WINDOW runs alone. The worker is only tried (a
    probe) when ``idle()`` says other processes leave a second CPU free (IdleCPU), every
    ``interval`` runs: PROBE at first, doubled up to MAX_PROBE after each probe the worker lost
    (a probe's turn on a busy machine is only put off by PROBE runs: the reading costs no slow
    run). A probe is ACCEPT runs with the worker, each
    faster than MARGIN of the median alone (the worker's first run ever, which starts the
    thread, is not judged); then the region stays with the worker, re-timing one run alone
    every ``interval`` runs, until MISSES runs with the worker in a row are slower than the
    median alone. So on a busy machine at most one run in PROBE (fewer later) pays for a slow
    worker, MISSES where the machine turns busy while the worker is kept, and no run of the
    first BASELINE does (the first probe, when IdleCPU has no answer yet after WINDOW runs
    alone, costs two more runs: the thread's start and one judged). A probe's run that
    shared the cores with a third thread of this process (``siblings``: another runtime's
    pool spinning after its call) judges nothing: the probe ends without backing off and
    comes again PROBE runs later (``crowded`` counts them), so the worker's chance does not
    depend on which runtime ran just before the probe.

    A kept worker re-times one thread every ``interval`` runs, PROBE at first, doubled (up to
    MAX_KEEP) at each re-timing that finds the worker's median under KEEP of one thread's (its
    median, or this re-timing if faster; a single slower run with the worker does not move
    it), else PROBE again: a region the worker pays for runs with it in about 95% of its
    runs, not 7 in 8. A kept worker that is dropped (the machine turned
    busy) is probed again PROBE runs later, then backs off as any lost probe; only a probe the
    worker loses doubles the interval from where it was.

    A probe's first run is not judged either when the worker slept since its last run: waking
    it (in a VM, a halted virtual CPU) and its cold caches made a re-probe's first run slower
    than one thread, so a worker dropped for a busy moment lost its next probe and the
    interval grew to 32-256 runs (a 140-run benchmark then ran alone in 121 of 140). And a
    kept worker's slow run is not a miss when other threads of the process ran more CPU time
    than the worker can (the process's CPU clock less the caller's, two clock readings per
    run): another runtime's pool spinning after its call, which slowed the first two runs of
    each block of 20 in benchmarks/cpu.py and dropped the worker there (``crowded`` counts
    them too)."""

    WINDOW = 5
    BASELINE = 2
    ACCEPT = 2
    MARGIN = 0.97
    MAX_PROBE = 256
    KEEP, MAX_KEEP = 0.9, 64
    # slower runs in a row that end a kept worker (a probe ends at its first): a single slow
    # run (a peer's pool spinning after its call, a preemption) cost the worker PROBE or more
    # runs; a machine turned busy costs two more slow runs. Not 2: the first two runs after
    # another runtime's block of calls are both slow with caches the peer emptied (cpu.py's
    # blocks of 20: the worker dropped at each block's start, kept in 73 of 140 runs)
    MISSES = 3

    def __init__(self, idle=None, siblings=None):
        self.idle = idle if idle is not None else IdleCPU()
        self.siblings = siblings if siblings is not None else Siblings()
        self.crowded = 0  # probe runs that judged nothing: a third thread of the process ran
        self.times: dict[str, deque] = {m: deque(maxlen=self.WINDOW) for m in ("pool", "alone")}
        self.counts = {"pool": 0, "alone": 0}  # runs recorded in each mode (for benchmarks)
        self.runs = 0
        self.best = "alone"
        self.streak = 0  # runs with the worker in a row faster than alone (during a probe)
        self.misses = 0  # runs with the kept worker in a row slower than alone
        self.probing = False
        self.started = False  # the worker has run once (its thread exists)
        self.warm = False  # the worker ran the previous run (a probe's first run wakes it)
        self.cpu0: tuple[float, float] | None = None  # a kept worker's run: process, own CPU
        # a verdict against the worker waits for one run alone right after it ("keep": a kept
        # worker's MISSES slow runs, "probe": a lost probe's run): if that run is as slow, the
        # moment was slow (caches another runtime emptied), not the worker
        self.verify: str | None = None
        self.pending: list[float] = []
        self.excused = 0  # verdicts the run alone after them overturned
        self.interval, self.next_probe = PROBE, self.BASELINE + 1

    def alone_median(self) -> float | None:
        return median(self.times["alone"]) if self.times["alone"] else None

    def choose(self) -> str:
        self.runs += 1
        if self.verify:
            return "alone"
        if self.probing:
            if self.started:
                self.siblings.start()
            return "pool"
        if self.runs < self.next_probe or len(self.times["alone"]) < self.BASELINE:
            if self.best == "pool":  # the others' CPU time over the run: two clock readings
                self.cpu0 = (time.process_time(), time.thread_time())
            return self.best
        self.next_probe = self.runs + self.interval
        if self.best == "pool":
            return "alone"  # re-time one thread now and then
        idle = self.idle()
        # busy: look again PROBE runs on (a reading costs no slow run); not known yet: the next
        # run, except for a region's first probe, which the run times judge (IdleCPU needs SPAN
        # of recent time: a region called in bursts of 20 runs of 2 ms waited a burst for it)
        # once WINDOW runs alone are timed (a region's first runs are cold: page faults in its
        # constants and arena; their median alone made a slower worker look faster)
        warm = len(self.times["alone"]) >= self.WINDOW
        if idle is False or (idle is None and (self.started or not warm)):
            self.next_probe = self.runs + (PROBE if idle is False else 1)
            return "alone"
        self.probing, self.streak = True, 0
        if self.started:
            self.siblings.start()
        return "pool"

    def _settle(self, alone: float) -> None:
        """The run alone after a verdict against the worker: as slow as the worker's (within
        MARGIN) means the moment was slow; the kept worker stays, a lost probe comes again
        PROBE runs later without backing off. Faster: the verdict stands."""
        kind, self.verify = self.verify, None
        if median(self.pending) < self.MARGIN * alone:
            self.excused += 1
            if kind == "keep":
                self.misses = 0
            else:
                self.next_probe = self.runs + PROBE
            return
        if kind == "keep":  # probed again PROBE runs on
            self.best, self.misses, self.interval = "alone", 0, PROBE
        self.back_off()

    def back_off(self) -> None:
        self.next_probe = self.runs + self.interval
        self.interval = min(2 * self.interval, self.MAX_PROBE)

    def record(self, mode: str, seconds: float) -> None:
        self.times[mode].append(seconds)
        self.counts[mode] += 1
        woken, self.warm = not self.warm, mode == "pool"
        if mode != "pool":
            if self.verify:
                self._settle(seconds)
                return
            if self.best == "pool":  # a kept worker's re-timing: further apart while it pays
                # against this re-timing too: a median of older (cold) runs may be stale
                pool, alone = median(self.times["pool"]), min(self.alone_median(), seconds)
                clear = pool < self.KEEP * alone
                self.interval = min(2 * self.interval, self.MAX_KEEP) if clear else PROBE
                self.next_probe = self.runs + self.interval
            return
        first, self.started = not self.started, True
        if first or (self.probing and woken):
            return  # the run that started the thread, or a probe's that woke it: not judged
        alone = self.alone_median()
        faster = alone is not None and seconds < self.MARGIN * alone
        cpu0, self.cpu0 = self.cpu0, None
        if not faster and not self.probing and self.best == "pool" and cpu0 is not None:
            others = (time.process_time() - cpu0[0]) - (time.thread_time() - cpu0[1])
            if others > Siblings.SLACK * seconds + Siblings.FLOOR:
                self.times["pool"].pop()  # a third thread shared the cores: not a miss
                self.crowded += 1
                return
        if self.probing and not faster and self.siblings.crowded(seconds):
            self.times["pool"].pop()  # a third thread shared the cores: no verdict, no back-off
            self.crowded += 1
            self.probing, self.streak = False, 0
            self.next_probe = self.runs + PROBE
            return
        if not faster and not self.probing and self.best == "pool":
            self.misses += 1  # a kept worker: back to one thread at the MISSES-th slow run
            if self.misses < self.MISSES:  # in a row (one may be another runtime's spin)
                return
        if faster:
            self.misses = 0
        elif self.best == "pool":  # a kept worker turned slower: one run alone decides
            self.verify, self.pending = "keep", list(self.times["pool"])[-self.MISSES :]
            return
        else:  # a probe the worker lost: one run alone decides
            self.verify, self.pending, self.probing = "probe", [seconds], False
            return
        if self.probing:
            self.streak += 1
            if self.streak >= self.ACCEPT:
                self.best, self.probing = "pool", False
                self.interval = PROBE
                self.next_probe = self.runs + self.interval
