"""Whether other processes leave this one a second CPU: /proc/stat's busy time since the last
look, minus this process's own CPU time (all its threads), with niced processes' time counted as
free where they give way to this one (no autogroups, or every running niced process in an
autogroup niced above 0). The two-mode driver (modes.py TwoModes) asks it before trying the
worker thread."""

from __future__ import annotations

import os
import threading
import time


def _proc_stat(nice_free: bool = False) -> tuple[int, int] | None:
    """(free, total) jiffies of all CPUs from /proc/stat's first line (see parse_stat), or None
    off Linux."""
    try:
        with open("/proc/stat") as f:
            return parse_stat(f.readline(), nice_free)
    except (OSError, ValueError):
        return None


def _proc_stat_nice() -> tuple[int, int, int] | None:
    """(free, total, niced) jiffies of all CPUs (parse_stat; ``niced``: the niced processes'
    user time, free or not as IdleCPU.niced_free says at each reading), or None off Linux."""
    try:
        with open("/proc/stat") as f:
            line = f.readline()
        free, total = parse_stat(line)
        return free, total, parse_stat(line, True)[0] - free
    except (OSError, ValueError):
        return None


def parse_stat(line: str, nice_free: bool = False) -> tuple[int, int]:
    """/proc/stat's ``cpu`` line: (idle + iowait, total) jiffies; with ``nice_free`` the niced
    processes' time (``nice``: user time at a nice level above 0) counts as free too, as it is
    for a caller at the default priority where nice levels compare across the machine (the
    scheduler then gives a nice-19 process 1.5% of a CPU against it)."""
    fields = line.split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"not /proc/stat's cpu line: {line!r}")
    ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return ticks[3] + ticks[4] + (ticks[1] if nice_free else 0), sum(ticks)


def _niced_give_way(autogroup: str = "/proc/sys/kernel/sched_autogroup_enabled",
                    proc: str = "/proc") -> bool | None:
    """Niced processes give their CPU to this one: it is not niced, and either the scheduler
    weighs processes, not sessions, or (with autogroups, /proc/sys/kernel/sched_autogroup_enabled
    = 1, where a process's nice level counts only against its own session's) every niced
    process that runs sits in an autogroup niced above 0 (``niced_groups``; a nice-19 job
    started from another shell takes its full share, one whose autogroup is niced gives way: a
    2-core machine shared with such jobs left XNNPACK's second thread 0.58x of one thread while
    the strict reading kept partita's worker out). None: ask ``niced_groups`` (it changes as
    processes come and go)."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            return False
    except (AttributeError, OSError):
        return False
    try:
        with open(autogroup) as f:
            return True if f.read().strip() == "0" else None
    except OSError:
        return True  # no autogroups in this kernel


def niced_groups(proc: str = "/proc", seen: dict | None = None) -> bool:
    """Every niced process that runs (state R, or CPU time grown since ``seen``, which this
    updates: pid -> ticks) sits in an autogroup niced above 0 (/proc/PID/autogroup, "... nice
    N"), so the scheduler gives its time to a process of an autogroup at nice 0."""
    seen = {} if seen is None else seen
    ok = True
    try:
        names = [n for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return False
    for name in names:
        try:
            with open(f"{proc}/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            state, ticks, nice = fields[0], int(fields[11]) + int(fields[12]), int(fields[16])
        except (OSError, ValueError, IndexError):
            continue
        grew = ticks > seen.get(name, ticks)
        seen[name] = ticks
        if nice <= 0 or not (state == "R" or grew) or not ok:
            continue
        try:
            with open(f"{proc}/{name}/autogroup") as f:
                ok = int(f.read().split()[-1]) > 0
        except (OSError, ValueError, IndexError):
            ok = False
    return ok


def _ticks_per_second() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, OSError, ValueError):
        return 100


class IdleCPU:
    """Whether a CPU besides the caller's is left free by *other processes*: over the time since
    the last look (at least SPAN seconds ago), all CPUs' busy time in /proc/stat minus this
    process's own CPU time (all its threads: ``time.process_time``), as CPUs; the CPUs the others
    leave must hold the caller's thread and NEED of the worker's. This process's threads are not
    another CPU's load: a runtime's pool spinning next to partita in the same process (ONNX
    Runtime's spins for tens of milliseconds after each of its calls) is left to the measured
    run times (TwoModes), another process on the second core is not. Niced processes' time
    counts as free where they give way to this process (``_niced_give_way``). Off Linux: the
    one-minute load average below the CPU count minus one."""

    SPAN = 0.05  # seconds: /proc/stat counts in 10 ms jiffies
    # seconds: a last look older than this starts a new window instead of answering (the window
    # since a region was built holds the build's own parallel compile, other processes: ResNet-50's
    # amx region, built before the plain tier was, was kept off its worker for 8 runs so)
    STALE = 1.0
    NEED = 0.6  # CPUs (averaged over the span) the worker needs besides the caller's one
    RESCAN = 2.0  # seconds between two looks at the niced processes' autogroups (niced_groups)

    def __init__(self, stat=None, clock=None, loadavg=None, cpus: int | None = None,
                 own=None, hz: int | None = None):
        self.clock = clock or time.monotonic
        # niced processes' time is free where they give way to this one: always (True), never
        # (False), or as niced_groups says (None); an injected ``stat`` counts it as it does
        self.nice_mode = _niced_give_way() if stat is None else False
        self.groups: dict = {}  # niced_groups' CPU ticks per process
        self.nice_when, self.nice_free = None, False  # niced_groups' last look and answer
        self.stat = stat or _proc_stat_nice
        self.own = own or time.process_time  # this process's CPU seconds, all threads
        self.hz = hz or _ticks_per_second()  # /proc/stat's jiffies per second
        self.loadavg = loadavg or (os.getloadavg if hasattr(os, "getloadavg") else None)
        self.cpus = cpus or os.cpu_count() or 1
        self.last, self.when, self.answer = self.stat(), self.clock(), None
        self.mine, self.renewed = self.own(), False

    def free_cpus(self) -> float | None:
        """CPUs other processes left unused since the last look (this process's threads count
        as free: the caller's own thread is one of them), or None without /proc/stat."""
        now = self.clock()
        if now - self.when < self.SPAN:
            return self.answer  # too soon for new jiffies: the last answer (None: none yet)
        sample, mine = self.stat(), self.own()
        if sample is None or self.last is None:
            return None
        d_idle, d_total = sample[0] - self.last[0], sample[1] - self.last[1]
        if len(sample) > 2 and self.niced_free():  # the niced processes' time is free
            d_idle += sample[2] - self.last[2]
        if d_total <= 0:
            return self.answer
        # in jiffies, as /proc/stat counts (a forked child's clock starts again at 0)
        d_mine = max(mine - self.mine, 0.0) * self.hz
        self.last, self.when, self.mine, self.renewed = sample, now, mine, False
        others = min(max(d_total - d_idle - d_mine, 0.0), d_total)
        self.answer = self.cpus * (1.0 - others / d_total)
        return self.answer

    def niced_free(self) -> bool:
        """Whether niced processes' time counts as free now (_niced_give_way; with autogroups
        niced_groups, looked at again at most every RESCAN seconds)."""
        if self.nice_mode is not None:
            return self.nice_mode
        if self.nice_when is not None and self.clock() - self.nice_when < self.RESCAN:
            return self.nice_free
        self.nice_when = self.clock()
        self.nice_free = niced_groups(seen=self.groups)
        return self.nice_free

    def fresh(self) -> bool:
        """Start a new window now if the last look is older than STALE (True: no answer yet;
        the next look, SPAN or more later, covers recent time only). A window started so is
        read whatever its age (``renewed``): a region called in bursts shorter than SPAN, with
        pauses longer than STALE (a benchmark's interleaved rounds), gets its answer at its next
        burst instead of starting a new window at every one."""
        now = self.clock()
        if self.last is None or self.renewed or now - self.when <= self.STALE:
            return False
        sample = self.stat()
        if sample is None:
            return False
        self.last, self.when, self.mine, self.answer = sample, now, self.own(), None
        self.renewed = True
        return True

    def __call__(self) -> bool | None:
        """Whether a second CPU is free; None: not known yet (a new window was started, or it
        is shorter than SPAN): ask again on a later run."""
        if self.cpus < 2:
            return False
        if self.fresh():
            return None
        free = self.free_cpus()
        if free is not None:
            return free >= 1.0 + self.NEED
        if self.last is not None:
            return None  # /proc/stat is there, the window too short to read yet
        if self.loadavg is None:
            return True
        return self.loadavg()[0] < self.cpus - 1


class Siblings:
    """How much CPU this process's *other* threads ran over a call of the caller's: the sum over
    /proc/self/task/*/schedstat (run time in nanoseconds) of every thread but the caller,
    between ``start`` and ``used``. During a run with the worker, the worker alone runs at
    most the run's wall time; more than that (``crowded``) means a third thread of the process
    (another runtime's pool still spinning after its call: ONNX Runtime's spins ~23 ms of CPU)
    shared the two cores with the run, so the run says nothing about two threads against one.
    Off Linux, or without schedstat, it never says crowded."""

    SLACK = 1.15  # the worker's run time over the wall time that counts as another thread's
    FLOOR = 2e-4  # seconds of others' run time always allowed (a wake-up, a reading's jitter)

    def __init__(self, task_dir: str = "/proc/self/task", me=threading.get_native_id):
        self.task_dir, self.me = task_dir, me
        self.before: dict | None = None

    def others(self) -> dict | None:
        """Thread id -> nanoseconds run, for every thread of the process but the caller."""
        try:
            names = os.listdir(self.task_dir)
        except OSError:
            return None
        mine, out = str(self.me()), {}
        for name in names:
            if name == mine:
                continue
            try:
                with open(f"{self.task_dir}/{name}/schedstat") as f:
                    out[name] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended, or no schedstat: counts nothing
        return out

    def start(self) -> None:
        self.before = self.others()

    def used(self) -> float | None:
        """Seconds the other threads ran since ``start`` (None: no reading)."""
        before, self.before = self.before, None
        after = self.others() if before is not None else None
        if not after:
            return None if after is None else 0.0
        return sum(ns - before.get(t, 0) for t, ns in after.items()) * 1e-9

    def crowded(self, wall: float) -> bool:
        used = self.used()
        return used is not None and used > self.SLACK * wall + self.FLOOR
