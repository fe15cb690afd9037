"""Where training and evaluation run: torch's CPU threads and the device (used by the trainer and
by :mod:`.evaluate`, which the trainer imports: a module of its own keeps them out of a circle)."""
from __future__ import annotations

import functools
import platform
import subprocess
from pathlib import Path

import torch

from probe import environment
from probe.errors import ProbeError


def set_threads(threads: int = 0, device: torch.device | None = None) -> None:
    """Torch's CPU threads: ``threads``, or with 0 the toolkit's default, which is 1 on a CPU.

    Measured (bench/bench_threads.py, 2 cores): with one competing process torch's default (every
    core, OpenMP spinning) trained the quick preset 2.0x slower than one thread, while on the idle
    machine it was only 1.15x faster (1.6x slower / 1.45x faster at d_model 256, batch 512); one
    thread also gives the same float reduction order, hence the same trajectory, whatever the
    machine is doing. The environment
    variable PROBE_THREADS sets another count, or 'torch' to keep torch's own choice.
    """
    env = environment.threads()
    if threads <= 0 and env == "torch":
        return
    if threads <= 0 and env:
        try:
            threads = int(env)
        except ValueError:
            raise ProbeError(f"PROBE_THREADS={env!r}: use a number of threads or 'torch'") from None
    if threads <= 0:
        if device is not None and device.type != "cpu":
            return   # the GPU does the work; torch's CPU threads only feed it
        threads = 1
    torch.set_num_threads(threads)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ProbeError(f"unknown device '{name}'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ProbeError("device 'cuda' asked for, but CUDA is not available")
    return dev


def device_name(device: torch.device) -> str:
    """The device in words, as a run file records it: the GPU's name, or the CPU's model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            name = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        name = ""
    return name or platform.processor() or "CPU"


@functools.cache
def source_commit() -> str | None:
    """The git commit of the toolkit's checkout that trains (``-dirty`` with uncommitted changes), or
    None outside one (installed from a wheel): a results table names the code its runs trained with,
    not only the code that wrote the table."""
    try:
        p = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True,
                           text=True, timeout=30, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None
