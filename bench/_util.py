"""Shared benchmark helpers: bytes read from /proc, a machine description, --set overrides."""
from __future__ import annotations

import os
import platform


def rchar(pid: str | int = "self") -> int:
    """Bytes this process has read through read() calls (page-cache hits included)."""
    with open(f"/proc/{pid}/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/<pid>/io")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}"


def overrides(preset_name: str, pairs: list[str]) -> dict:
    """``["lr=1e-3", "d_model=128"]`` as config overrides, typed like the preset's fields."""
    from probe_train import preset

    base, out = preset(preset_name), {}
    for kv in pairs:
        k, v = kv.split("=", 1)
        out[k] = type(getattr(base, k))(v)
    return out
