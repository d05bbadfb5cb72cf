"""What counts as a busy CPU for a ``-threads=2`` region (backends/llvm/runtime/idle.py):
IdleCPU's reading of /proc/stat (other processes, niced ones in niced autogroups, this
process's own threads left out) and Siblings' reading of this process's other threads, from
real and faked /proc readings. Which driver runs on those readings is
test_llvm_thread_choice.py's."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from partita.backends.llvm.runtime.idle import IdleCPU, Siblings, parse_stat


def test_free_cpus_from_proc_stat_minus_this_process_and_the_load_average():
    assert parse_stat("cpu  10 0 5 100 3 0 1 0 0 0") == (103, 119)
    # niced processes' time (the second field) is free to a caller that is not niced
    assert parse_stat("cpu  10 7 5 100 3 0 1 0 0 0", nice_free=True) == (110, 126)
    assert parse_stat("cpu  10 7 5 100 3 0 1 0 0 0") == (103, 126)
    with pytest.raises(ValueError, match="cpu line"):
        parse_stat("intr 1 2 3")
    clock, own = [0.0], [0.0]
    # two CPUs, 100 jiffies a second: (idle, total) jiffies at each look
    samples = iter([(0, 0), (60, 100), (80, 200), (80, 300), (80, 400)])
    idle = IdleCPU(stat=lambda: next(samples), clock=lambda: clock[0], own=lambda: own[0],
                   cpus=2, hz=100)
    # 40 busy jiffies of 100, 25 of them this process's: others held 0.3 CPU, 1.7 are free
    clock[0], own[0] = 0.5, 0.25
    assert idle.free_cpus() == pytest.approx(1.7) and idle()
    clock[0] = 0.52  # too soon for new jiffies: the same answer, /proc/stat not read
    assert idle()
    # 80 busy of 100, 30 this process's: another process held a CPU; 1.0 free, not enough
    clock[0], own[0] = 1.0, 0.55
    assert idle.free_cpus() == pytest.approx(1.0) and not idle()
    # every CPU busy, all of it this process's threads (a runtime's pool spinning next to
    # the caller): both CPUs are free of other processes
    clock[0], own[0] = 1.5, 1.55
    assert idle.free_cpus() == pytest.approx(2.0) and idle()
    # this process's time counted more finely than the jiffies: never more than all CPUs free
    clock[0], own[0] = 2.0, 2.8
    assert idle.free_cpus() == pytest.approx(2.0)
    no_stat = IdleCPU(stat=lambda: None, loadavg=lambda: (1.7, 0, 0), cpus=2)
    assert not no_stat()
    quiet = IdleCPU(stat=lambda: None, loadavg=lambda: (0.3, 0, 0), cpus=2)
    assert quiet()
    assert not IdleCPU(stat=lambda: None, loadavg=lambda: (0.0, 0, 0), cpus=1)()


def test_niced_processes_give_way_without_autogroups_or_in_niced_ones(tmp_path):
    from partita.backends.llvm.runtime.idle import _niced_give_way

    off, on = tmp_path / "off", tmp_path / "on"
    off.write_text("0\n")
    on.write_text("1\n")
    not_niced = os.getpriority(os.PRIO_PROCESS, 0) <= 0
    assert _niced_give_way(str(off)) == not_niced
    # with autogroups a nice level counts within its own session only: niced_groups decides
    assert _niced_give_way(str(on)) is (None if not_niced else False)
    assert _niced_give_way(str(tmp_path / "absent")) == not_niced  # no autogroups here


def test_niced_ticks_count_free_as_niced_free_says_at_each_reading():
    """The default reading carries the niced processes' ticks apart (free, total, niced): a
    CPU held by a niced job is free or busy as ``niced_free`` says at that reading, with no
    new baseline when the answer changes."""
    clock = [0.0]

    def stat():  # one CPU idle, the other running a niced job: 100 jiffies a second each
        return int(clock[0] * 100), int(clock[0] * 200), int(clock[0] * 100)

    idle = IdleCPU(stat=stat, clock=lambda: clock[0], own=lambda: 0.0, cpus=2, hz=100)
    for niced_free, want in ((True, 2.0), (False, 1.0), (True, 2.0)):
        idle.nice_mode = niced_free
        clock[0] += 1.0
        assert idle.free_cpus() == pytest.approx(want)


def _fake_proc(root, procs):
    """A /proc with processes {pid: (state, cpu ticks, nice, autogroup nice)}."""
    for pid, (state, ticks, nice, group) in procs.items():
        d = root / str(pid)
        d.mkdir(parents=True, exist_ok=True)
        rest = [state, *["0"] * 10, str(ticks), "0", "0", "0", "20", str(nice), "1"]
        (d / "stat").write_text(f"{pid} (py thon) " + " ".join(rest) + "\n")
        (d / "autogroup").write_text(f"/autogroup-{pid} nice {group}\n")


def test_niced_time_is_free_when_every_running_niced_process_is_in_a_niced_autogroup(tmp_path):
    """niced_groups: a nice-19 job in an autogroup at nice 19 gives way (its time is free);
    one in an autogroup at nice 0 takes its full share, whether it runs now (state R) or ran
    since the last look (its CPU ticks grew); sleeping niced processes and busy ones at nice 0
    do not count (the second is busy in /proc/stat anyway)."""
    from partita.backends.llvm.runtime.idle import niced_groups

    seen = {}
    _fake_proc(tmp_path, {10: ("R", 500, 19, 19), 11: ("S", 3, 19, 0), 12: ("R", 900, 0, 0)})
    assert niced_groups(str(tmp_path), seen)
    _fake_proc(tmp_path, {11: ("S", 9, 19, 0)})  # it ran between the two looks
    assert not niced_groups(str(tmp_path), seen)
    assert niced_groups(str(tmp_path), seen)  # it did not since
    _fake_proc(tmp_path, {13: ("R", 1, 5, 0)})  # a niced job started from another shell
    assert not niced_groups(str(tmp_path), seen)


def _native_spin(stop):
    """Burns a CPU outside the GIL (hashlib releases it for large buffers) until ``stop``."""
    import hashlib

    data = bytes(1 << 20)
    while not stop.is_set():
        hashlib.sha256(data).digest()


def _own_ticks() -> int:
    """This process's user + system CPU ticks as the kernel counts them (/proc/self/stat)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="needs Linux's /proc")
def test_the_reading_leaves_out_a_thread_spinning_in_this_process_as_the_kernel_counts_it():
    """A thread of this process burning a CPU: the kernel's own count of this process's ticks
    (/proc/self/stat) appears in IdleCPU's reading as free CPU, next to what /proc/stat alone
    says is idle (without the exclusion the two readings are equal)."""
    import threading

    from partita.backends.llvm.runtime.idle import _proc_stat

    seen = []

    def stat():
        seen.append(_proc_stat())
        return seen[-1]

    stop = threading.Event()
    spinner = threading.Thread(target=_native_spin, args=(stop,), daemon=True)
    spinner.start()
    try:
        time.sleep(0.05)
        idle = IdleCPU(stat=stat)
        ticks = _own_ticks()
        time.sleep(0.5)
        free = idle.free_cpus()
        ticks = _own_ticks() - ticks
    finally:
        stop.set()
        spinner.join()
    (idle0, total0), (idle1, total1) = seen
    raw = idle.cpus * (idle1 - idle0) / (total1 - total0)  # CPUs /proc/stat calls idle
    mine = idle.cpus * ticks / (total1 - total0)  # this process's CPUs, by the kernel's count
    assert ticks >= 5, "the spinning thread never ran: nothing to check"
    assert free >= raw + 0.7 * mine - 0.15


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="needs Linux's /proc")
@pytest.mark.skipif(not 2 <= (os.cpu_count() or 1) <= 8, reason="one busy process per CPU")
def test_another_process_spinning_keeps_the_worker_out():
    """Other processes busy on every CPU but the caller's: the reading says no CPU is free,
    whatever the machine's other load (a runnable process keeps a CPU busy at every instant)."""
    import subprocess
    import sys

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range((os.cpu_count() or 2) - 1)]
    try:
        time.sleep(0.1)
        idle = IdleCPU()
        time.sleep(0.5)
        assert idle.free_cpus() < 1.0 + IdleCPU.NEED and not idle()
    finally:
        for p in busy:
            p.kill()
            p.wait()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_siblings_reads_another_threads_run_time_and_not_the_callers():
    """Siblings on this process: a thread burning a CPU for ~0.3 s is read as about that
    much run time, the caller's own work is not counted at all."""
    import threading

    siblings = Siblings()
    if siblings.others() is None or not Path(
            f"/proc/self/task/{threading.get_native_id()}/schedstat").is_file():
        pytest.skip("no schedstat")
    siblings.start()
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:  # the caller busy: not a sibling's time
        pass
    assert siblings.used() < 0.05
    stop = threading.Event()
    spinner = threading.Thread(target=_native_spin, args=(stop,))
    spinner.start()  # a pool thread that lives on (a thread gone by the reading counts nothing)
    try:
        siblings.start()
        start = time.perf_counter()
        time.sleep(0.3)
        used = siblings.used()
        wall = time.perf_counter() - start
    finally:
        stop.set()
        spinner.join()
    assert 0.05 < used <= wall + 0.01  # it ran (on a loaded machine: less than all of it)
    siblings.start()
    assert siblings.crowded(1e-3) is False  # nothing ran since: not crowded
