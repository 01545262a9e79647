"""This process's memory, as the benchmarks report it: no import of the project, so a
child that runs the previous release (``load_child.py``) can use it too."""

from __future__ import annotations

import resource
import sys
from pathlib import Path


def memory_kib() -> dict[str, int]:
    """``VmRSS`` (now) and ``VmHWM`` (peak so far) of this process, in KiB."""
    out: dict[str, int] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    except OSError:
        pass
    if "VmHWM" not in out:  # not Linux: only the peak is known (bytes on macOS)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["VmHWM"] = peak // 1024 if sys.platform == "darwin" else peak
        out.setdefault("VmRSS", out["VmHWM"])
    return out
