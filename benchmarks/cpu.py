"""Where a machine's CPU goes, sampled from ``/proc``: the soak's answer to "a run got
slower: did it do more work, or did something else take the CPU?".

:class:`CpuSampler` reads every process's CPU time (user + system, and that of the
children it has reaped) at each :meth:`CpuSampler.sample` and charges the difference
since the previous sample to the part of the deployment the process belongs to (by its
command line): a process born since the previous sample is charged whole; one that died
is charged what it used after the previous sample, when its parent reaps it, to the
parent's part (the code server's reaped children are the run workers it launched; the
soak's, the parts it killed and started again). Also the machine's busy share
(``/proc/stat``) and its load average. Linux only; no project import.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# (part, what its command line holds), the first that matches wins
PARTS = (
    ("run workers", "dagster api execute_run"),
    ("run workers", "dagster api execute_step"),
    ("code server", "dagster api grpc"),
    ("daemon", "dagster-daemon"),
    ("webserver", "dagster-webserver"),
    ("celery workers", "celery"),
    ("postgresql", "postgres"),
    ("mariadb", "mariadbd"),
    ("rabbitmq", "beam.smp"),
    ("rabbitmq", "erl_child_setup"),
    ("s3 (moto)", "moto.server"),
    ("redis", "redis-server"),
)
SOAK = "soak (app, sampling)"
# the part of a child process that its command line does not name, when not its parent's
CHILD = {"code server": "run workers"}
# where the CPU of a part's reaped children goes, when not to the part itself
REAPED = CHILD | {SOAK: "the soak's children, once gone (killed parts, commands)"}


def _read(pid: str) -> tuple[int, int, int] | None:
    """(ppid, own ticks, reaped children's ticks) of a process, or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the command: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _name(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _machine() -> tuple[int, int]:
    """(busy ticks, all ticks) of every CPU since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


class CpuSampler:
    """CPU seconds a minute by part between consecutive samples; ``own`` is the pid whose
    process is the soak itself (its app threads included)."""

    def __init__(self, own: int):
        self.own = str(own)
        self.seen: dict[str, tuple[str, int, int, int]] = {}  # pid: (part, own, reaped, ppid)
        self.parts: dict[str, str] = {}
        self.machine = _machine()
        self.at = time.monotonic()
        self.sample()  # the baseline: nothing before it is charged

    def part(self, pid: str, procs: dict, depth: int = 0) -> str:
        """By the command line; else a child's as its parent's children are (the code
        server's spawned run workers), else ``other (<name>)``."""
        if pid not in self.parts:
            if pid == self.own:
                self.parts[pid] = SOAK
            elif pid == "1":
                self.parts[pid] = "init (reaps orphans)"
            else:
                command = _command(pid)
                found = next((p for p, s in PARTS if s in command), None)
                ppid = str(procs[pid][0]) if pid in procs else "0"
                if found is None and ppid in procs and ppid != "1" and depth < 20:
                    parent = self.part(ppid, procs, depth + 1)
                    found = CHILD.get(parent, parent)
                self.parts[pid] = found or f"other ({_name(pid)})"
        return self.parts[pid]

    def sample(self) -> dict:
        """CPU seconds a minute of each part since the previous sample, with the seconds
        between the two, the machine's busy share over them and its 1-minute load
        average (empty at the first sample)."""
        procs = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                read = _read(entry.name)
                if read is not None:
                    procs[entry.name] = read
        # what the processes gone since the last sample had used by then, and so been
        # charged already: their parents' reaped counters hold it again
        counted: dict[str, int] = {}
        for pid, (_part, own, reaped, ppid) in self.seen.items():
            if pid not in procs:
                counted[str(ppid)] = counted.get(str(ppid), 0) + own + reaped
        charged: dict[str, float] = {}
        now: dict[str, tuple[str, int, int, int]] = {}
        for pid, (ppid, own, reaped) in procs.items():
            part = self.part(pid, procs)
            before = self.seen.get(pid)
            if before is None or before[0] != part:  # new (or a pid used again)
                mine, children = own, reaped
            else:
                mine, children = own - before[1], reaped - before[2] - counted.get(pid, 0)
            charged[part] = charged.get(part, 0.0) + mine / TICK
            other = REAPED.get(part, part)
            charged[other] = charged.get(other, 0.0) + max(0, children) / TICK
            now[pid] = (part, own, reaped, ppid)
        first = not self.seen
        self.seen = now
        self.parts = {pid: part for pid, part in self.parts.items() if pid in now}
        busy, total = _machine()
        share = (busy - self.machine[0]) / max(1, total - self.machine[1])
        self.machine = (busy, total)
        load = float(Path("/proc/loadavg").read_text().split()[0])
        at = time.monotonic()
        seconds, self.at = at - self.at, at
        if first:
            return {}
        per_minute = 60 / max(seconds, 1e-3)
        return {
            "seconds": round(seconds, 1),
            "parts": {k: round(v * per_minute, 2) for k, v in sorted(charged.items()) if v > 0},
            "busy_share": round(share, 3),
            "load_1min": load,
        }
