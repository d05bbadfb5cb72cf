"""Which of a ``-threads=2`` region's two drivers runs (backends/llvm/runtime/modes.py's
TwoModes): one thread first, the worker tried only while another CPU looks idle (runtime/idle.py's
IdleCPU, faked here; its readings are test_llvm_idle_cpu.py's) and kept while it is faster."""

from __future__ import annotations

import time

import numpy as np
import pytest
from partita.backends.llvm.runtime.idle import IdleCPU, Siblings
from partita.backends.llvm.runtime.modes import PROBE, TwoModes


def _drive(modes, runs, pool, alone):
    """``runs`` runs of a region whose runs take ``pool`` / ``alone`` seconds (numbers or
    functions of the run's index): the modes chosen."""
    chosen = []
    for i in range(runs):
        mode = modes.choose()
        chosen.append(mode)
        t = pool if mode == "pool" else alone
        modes.record(mode, t(i) if callable(t) else t)
    return chosen


def test_one_thread_first_then_the_worker_when_it_is_faster_on_an_idle_cpu():
    modes = TwoModes(idle=lambda: True)
    chosen = _drive(modes, 4 * PROBE, pool=1.0, alone=2.0)
    assert chosen[: TwoModes.BASELINE] == ["alone"] * TwoModes.BASELINE
    # the worker's first run (starting the thread) and ACCEPT judged ones, then it stays
    probe = chosen[TwoModes.BASELINE : TwoModes.BASELINE + 1 + TwoModes.ACCEPT]
    assert probe == ["pool"] * (1 + TwoModes.ACCEPT) and modes.best == "pool"
    # with the worker from then on, one run alone in PROBE to re-time one thread
    tail = chosen[TwoModes.BASELINE + 1 + TwoModes.ACCEPT :]
    assert 1 <= tail.count("alone") <= len(tail) // PROBE + 1


def _pool_runs(modes, count, pool, alone):
    """Runs until ``count`` of them ran with the worker (re-timing runs alone in between), and
    the run alone that decides a verdict against the worker, if one is pending."""
    chosen = []
    while chosen.count("pool") < count:
        chosen += _drive(modes, 1, pool=pool, alone=alone)
    while modes.verify:
        chosen += _drive(modes, 1, pool=pool, alone=alone)
    return chosen


def test_slower_runs_in_a_row_with_the_kept_worker_go_back_to_one_thread():
    modes = TwoModes(idle=lambda: True)
    _drive(modes, 2 * PROBE, pool=1.0, alone=2.0)
    assert modes.best == "pool"
    # one slower run (a peer's pool spinning after its call, a preemption) keeps the worker,
    # and a faster one after it starts the count again
    _pool_runs(modes, 1, pool=3.0, alone=2.0)
    assert modes.best == "pool"
    _pool_runs(modes, 1, pool=1.0, alone=2.0)
    _pool_runs(modes, TwoModes.MISSES - 1, pool=3.0, alone=2.0)
    assert modes.best == "pool"
    # the machine gets busy: MISSES slower runs in a row end it
    _pool_runs(modes, 1, pool=3.0, alone=2.0)
    assert modes.best == "alone"
    # then probes back off (PROBE, 2 PROBE, 4 PROBE ... runs apart), each two runs long: the
    # run that wakes the worker (not judged) and the one judged
    chosen = _drive(modes, 16 * PROBE, pool=3.0, alone=2.0)
    pools = [i for i, m in enumerate(chosen) if m == "pool" and (i == 0 or chosen[i - 1] != "pool")]
    assert 1 <= len(pools) <= 4
    assert all(chosen[i + 1] == "pool" for i in pools if i + 1 < len(chosen))
    gaps = np.diff(pools) - 2  # the interval counts from the run alone that confirms the loss
    assert all(g2 >= 2 * g1 for g1, g2 in zip(gaps, gaps[1:]))


def test_a_kept_worker_re_times_one_thread_further_apart_while_it_pays():
    """A region the worker pays for (a quiet machine; the first run of every block of 20 a
    little slower: the worker woken from its sleep) runs with it in nearly every run: one
    thread re-timed PROBE, 2 PROBE ... MAX_KEEP runs apart, not every PROBE runs (7 in 8).
    One slower run does not move the worker's median: the intervals stay; a re-timing that
    finds one thread nearly as fast as the worker brings them back to PROBE runs."""
    modes = TwoModes(idle=lambda: True, siblings=_FakeSiblings())
    chosen = _drive(modes, 280, pool=lambda i: 1.8 if i % 20 == 0 else 1.45, alone=2.0)
    assert modes.best == "pool"
    assert chosen.count("pool") >= 0.95 * len(chosen)
    alone = [i for i, m in enumerate(chosen) if m == "alone"][TwoModes.BASELINE:]
    gaps = list(np.diff(alone))
    assert gaps[0] == 2 * PROBE and max(gaps) == TwoModes.MAX_KEEP
    assert all(g2 == min(2 * g1, TwoModes.MAX_KEEP) for g1, g2 in zip(gaps, gaps[1:]))
    _pool_runs(modes, 1, pool=3.0, alone=2.0)  # kept: MISSES is 2
    _drive(modes, TwoModes.MAX_KEEP, pool=1.45, alone=2.0)
    assert modes.best == "pool" and modes.interval == TwoModes.MAX_KEEP
    # one thread (nearly) as fast as the worker at a re-timing (its median still older runs'):
    # the next comes PROBE runs on
    chosen = []
    while modes.interval != PROBE and len(chosen) <= 2 * TwoModes.MAX_KEEP:
        chosen += _drive(modes, 1, pool=1.45, alone=1.55)
    assert chosen.count("alone") == 1 and chosen[-1] == "alone" and modes.best == "pool"


def test_a_dropped_worker_is_probed_again_probe_runs_later():
    """The machine turned busy for a few runs: the kept worker is dropped at MISSES slower
    runs, probed again PROBE runs later (a probe lost only backs off from there), and kept
    when it is faster again."""
    modes = TwoModes(idle=lambda: True, siblings=_FakeSiblings())
    _drive(modes, 4 * TwoModes.MAX_KEEP, pool=1.45, alone=2.0)
    assert modes.best == "pool" and modes.interval == TwoModes.MAX_KEEP
    _pool_runs(modes, TwoModes.MISSES, pool=3.0, alone=2.0)
    assert modes.best == "alone"
    chosen = _drive(modes, PROBE + 2, pool=1.45, alone=2.0)
    assert chosen[: PROBE - 1] == ["alone"] * (PROBE - 1) and chosen[PROBE - 1 :] == ["pool"] * 3
    assert modes.best == "pool"


def test_a_busy_machine_pays_for_few_slow_runs_and_keeps_one_threads_median():
    """The issue's case: runs with the worker twice as slow. Over the first 12 and 60 runs,
    at most three (the thread-starting run, the one judged, the first run of a probe 8 runs
    later) and at most 6 of 60 (probes of two runs, the worker's wake-up and the judged one,
    16 runs apart) run with the worker; the median is one thread's."""
    for idle in (True, False):
        modes = TwoModes(idle=lambda idle=idle: idle)
        chosen = _drive(modes, 60, pool=2.0, alone=1.0)
        slow = [i for i, m in enumerate(chosen) if m == "pool"]
        # the thread-starting run is not judged: one more run with the worker follows it
        assert len([i for i in slow if i < 12]) <= (3 if idle else 0)
        assert len(slow) <= (6 if idle else 0)
        times = [2.0 if m == "pool" else 1.0 for m in chosen]
        assert np.median(times[:12]) == 1.0 and np.median(times) == 1.0


def test_the_worker_is_probed_only_while_another_cpu_looks_idle():
    answers = iter([False, False, True] + [True] * 100)
    modes = TwoModes(idle=lambda: next(answers))
    chosen = _drive(modes, 1 + TwoModes.BASELINE + 2 * PROBE + 4, pool=1.0, alone=2.0)
    first = chosen.index("pool")
    # busy at the probes' turns after BASELINE and PROBE runs later, idle at the third: a busy
    # reading puts the probe off by PROBE runs, without backing off (it cost no slow run)
    assert first == TwoModes.BASELINE + 2 * PROBE
    assert modes.best == "pool"
    # within MARGIN the worker buys nothing: the region stays alone (four probes of two runs)
    even = TwoModes(idle=lambda: True)
    chosen = _drive(even, 8 * PROBE, pool=1.0, alone=1.01)
    assert even.best == "alone" and chosen.count("pool") <= 8


def _machine(own_share: float):
    """A 2-CPU machine whose CPUs are busy all the time, ``own_share`` of it this process's:
    (clock, advance, IdleCPU) with /proc/stat and the process's CPU time functions of the
    clock."""
    clock = [0.0]

    def advance(seconds):
        clock[0] += seconds
        return seconds

    idle = IdleCPU(stat=lambda: (0, int(clock[0] * 200)), clock=lambda: clock[0],
                   own=lambda: clock[0] * 2 * own_share, cpus=2, hz=100)
    return advance, idle


def test_a_pool_spinning_in_this_process_does_not_keep_the_worker_out():
    """The benchmark's case (ONNX Runtime called before each run in the same process, its
    threads spinning on both CPUs after each call): every CPU looks busy in /proc/stat, but all
    of it is this process's, so the worker is probed, measured faster and kept. The same busy
    CPUs held by another process (this process using one CPU: the caller's thread) keep the
    region on one thread, with no run at all with the worker."""
    advance, idle = _machine(own_share=1.0)
    modes = TwoModes(idle=idle)
    chosen = _drive(modes, 4 * PROBE, pool=lambda i: advance(0.06), alone=lambda i: advance(0.1))
    assert modes.best == "pool" and chosen.index("pool") == TwoModes.BASELINE
    assert chosen.count("pool") >= 3 * PROBE
    advance, idle = _machine(own_share=0.5)
    modes = TwoModes(idle=idle)
    chosen = _drive(modes, 4 * PROBE, pool=lambda i: advance(0.06), alone=lambda i: advance(0.1))
    assert modes.best == "alone" and "pool" not in chosen


class _FakeSiblings:
    """Siblings whose answer the test sets: ``load`` is the other threads' run time over the
    timed run, as a multiple of its wall time."""

    def __init__(self):
        self.load, self.wall = 0.0, None

    def start(self):
        pass

    def crowded(self, wall):
        return self.load * wall > Siblings.SLACK * wall + Siblings.FLOOR


def test_a_probe_crowded_by_a_third_thread_of_the_process_judges_nothing():
    """A probe right after another runtime's call (its pool spinning in this process, so
    three threads shared the two cores) ends without backing off: the next comes PROBE runs
    later, not 2 PROBE, and when the third thread is gone the worker is measured and kept.
    Without the crowding reading the same slow run would have doubled the interval."""
    siblings = _FakeSiblings()
    modes = TwoModes(idle=lambda: True, siblings=siblings)
    siblings.load = 2.0  # the worker plus a spinning pool: twice the wall time
    chosen = _drive(modes, TwoModes.BASELINE + 2, pool=3.0, alone=2.0)
    assert chosen[-2:] == ["pool", "pool"]  # the thread's start, then the crowded probe run
    assert modes.crowded == 1 and modes.best == "alone" and modes.interval == PROBE
    siblings.load = 0.9  # the worker alone (at most the wall time)
    chosen = _drive(modes, 2 * PROBE, pool=1.0, alone=2.0)
    assert modes.best == "pool" and chosen.index("pool") <= PROBE
    # a slow probe without a third thread backs off as before
    slow = TwoModes(idle=lambda: True, siblings=_FakeSiblings())
    _drive(slow, TwoModes.BASELINE + 3, pool=3.0, alone=2.0)  # and the run alone after it
    assert slow.crowded == 0 and slow.best == "alone" and slow.interval == 2 * PROBE


def test_a_stale_window_starts_again_instead_of_answering_for_the_build():
    """The first look long after the region was built (its window held the build's parallel
    compile in other processes) starts a new window and answers None, and the answer a look
    later covers recent time only; TwoModes probes on a first None (run times judge it) and
    asks again on the next run at a later one."""
    clock, own = [0.0], [0.0]
    # the build's compile: 180 of 200 jiffies busy in other processes; then an idle second
    samples = iter([(0, 0), (20, 200), (120, 300)])
    idle = IdleCPU(stat=lambda: next(samples), clock=lambda: clock[0], own=lambda: own[0],
                   cpus=2, hz=100)
    clock[0] = 1.0 + IdleCPU.STALE  # a stale window: a new one from here, no answer yet
    assert idle() is None
    clock[0] += IdleCPU.SPAN / 2  # too soon after it for jiffies: still no answer
    assert idle() is None
    clock[0] += 0.5  # 100 of 100 jiffies idle since the new window began
    assert idle() is True and idle.free_cpus() == pytest.approx(2.0)
    # bursts of calls shorter than SPAN, pauses longer than STALE (a benchmark's rounds): the
    # window started at one burst is read at the next, not started again
    samples = iter([(0, 0), (20, 200), (220, 400)])
    bursty = IdleCPU(stat=lambda: next(samples), clock=lambda: clock[0], own=lambda: own[0],
                     cpus=2, hz=100)
    clock[0] += 2 * IdleCPU.STALE
    assert bursty() is None  # a new window
    clock[0] += IdleCPU.SPAN / 4
    assert bursty() is None  # too soon
    clock[0] += 2 * IdleCPU.STALE  # the next burst: the renewed window answers
    assert bursty() is True and bursty.free_cpus() == pytest.approx(2.0)
    # TwoModes: a region's first probe goes ahead without an answer once WINDOW runs alone are
    # timed (the run times judge it: a region called in bursts shorter than SPAN would wait a
    # burst for one); after it, an unknown answer puts the probe off by one run, not PROBE
    waits = TwoModes.WINDOW - TwoModes.BASELINE + 1  # turns answered None before the probe
    answers = iter([None] * waits + [None, True] + [True] * 100)
    modes = TwoModes(idle=lambda: next(answers), siblings=_FakeSiblings())
    chosen = _drive(modes, TwoModes.WINDOW + 3, pool=1.0, alone=2.0)
    assert chosen == ["alone"] * TwoModes.WINDOW + ["pool"] * 3 and modes.best == "pool"
    _pool_runs(modes, TwoModes.MISSES, pool=3.0, alone=2.0)  # dropped: probed PROBE runs on
    chosen = _drive(modes, PROBE + 2, pool=1.0, alone=2.0)
    assert chosen == ["alone"] * PROBE + ["pool"] * 2  # None at the turn, True the run after
    # on a busy machine the first probe costs its two runs (the thread's start, one judged),
    # then every probe waits for IdleCPU's answer
    answers = iter([None] * waits + [False] * 100)
    busy = TwoModes(idle=lambda: next(answers), siblings=_FakeSiblings())
    chosen = _drive(busy, 60, pool=3.0, alone=2.0)
    assert chosen.count("pool") == 2 and busy.best == "alone"
    # a region's first runs are cold (3x here): judged against them, a worker slower than one
    # warm thread would look faster and be kept; against WINDOW runs' median it is not
    cold = TwoModes(idle=lambda: None, siblings=_FakeSiblings())
    chosen = _drive(cold, 60, pool=2.5, alone=lambda i: 6.0 if i < 2 else 2.0)
    assert chosen.count("pool") == 2 and cold.best == "alone"


def test_a_probe_judges_the_worker_after_the_run_that_wakes_it():
    """A probe's first run wakes a worker that slept since its last run (in a VM a halted
    vCPU's wake-up, cold caches): slow, and not judged; the run after it is. A kept worker
    dropped by a busy moment comes back at the next probe although its waking run is slow."""
    modes = TwoModes(idle=lambda: True, siblings=_FakeSiblings())
    _drive(modes, 4 * PROBE, pool=1.45, alone=2.0)
    assert modes.best == "pool"
    _pool_runs(modes, TwoModes.MISSES, pool=3.0, alone=2.0)
    assert modes.best == "alone"
    woken = iter([3.5])  # the probe's first run: slower than one thread
    chosen = _drive(modes, 2 * PROBE, pool=lambda i: next(woken, 1.45), alone=2.0)
    assert modes.best == "pool" and chosen.count("pool") >= PROBE


def test_a_kept_workers_slow_run_beside_a_third_thread_is_not_a_miss():
    """A kept worker's runs slowed by another runtime's pool still spinning in this process
    (more CPU than the worker's own in the run, read from the process's and the caller's
    clocks) are not misses: the worker stays; the same slow runs without a third thread end
    it at MISSES."""
    import threading

    modes = TwoModes(idle=lambda: True, siblings=_FakeSiblings())
    _drive(modes, 4 * PROBE, pool=1e-3, alone=2e-3)
    assert modes.best == "pool"
    stop = threading.Event()

    def spin():  # two busy threads: more CPU than any wall time the run can take
        while not stop.is_set():
            pass

    spinners = [threading.Thread(target=spin) for _ in range(2)]
    for t in spinners:
        t.start()
    try:
        for _ in range(2 * TwoModes.MISSES):
            mode = modes.choose()
            if mode == "pool":
                t0 = time.perf_counter()
                time.sleep(0.05)  # the spinners take CPU time meanwhile
                assert time.perf_counter() - t0 > 0
            modes.record(mode, 3e-3 if mode == "pool" else 2e-3)
    finally:
        stop.set()
        for t in spinners:
            t.join()
    assert modes.best == "pool" and modes.crowded >= TwoModes.MISSES
    _pool_runs(modes, TwoModes.MISSES, pool=3e-3, alone=2e-3)
    assert modes.best == "alone"


def test_a_verdict_against_the_worker_waits_for_one_run_alone():
    """Slow runs with the worker right after another runtime's block (its caches emptied: one
    thread is as slow then) are not the worker's fault: the run alone after MISSES slow runs
    (or after a lost probe run) is as slow, so the kept worker stays and a lost probe comes
    again PROBE runs later without backing off. When the run alone is fast, the verdict
    stands as before."""
    modes = TwoModes(idle=lambda: True, siblings=_FakeSiblings())
    _drive(modes, 4 * PROBE, pool=1.45, alone=2.0)
    assert modes.best == "pool"
    _pool_runs(modes, TwoModes.MISSES, pool=3.0, alone=3.1)  # a slow moment for both
    assert modes.best == "pool" and modes.excused == 1
    _pool_runs(modes, TwoModes.MISSES, pool=3.0, alone=2.0)  # the worker's own slowness
    assert modes.best == "alone" and modes.next_probe == modes.runs + PROBE
    # a probe: the waking run, then a slow judged run, then the run alone as slow
    probe = TwoModes(idle=lambda: True, siblings=_FakeSiblings())
    _drive(probe, 4 * PROBE, pool=3.0, alone=2.0)  # lost probes: backed off
    chosen = []
    while len(chosen) < 40 * PROBE and "pool" not in chosen[-1:]:  # the next probe's waking run
        chosen += _drive(probe, 1, pool=3.0, alone=2.0)
    backed = probe.interval
    chosen += _drive(probe, 1, pool=3.0, alone=2.0)  # the judged run: slower than alone
    excused = probe.excused
    chosen += _drive(probe, 1, pool=3.0, alone=3.1)  # the run alone: as slow
    assert chosen[-1] == "alone" and probe.excused == excused + 1 and probe.interval == backed
    assert probe.next_probe == probe.runs + PROBE
