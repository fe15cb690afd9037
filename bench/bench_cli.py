"""Start-up cost of the CLI, against the bare interpreter and a bare h5py import (same run).

    python bench/bench_cli.py [FILE]   # FILE: a snapshot; a tiny one is trained if omitted
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

BIN = Path(sys.executable).parent


def wall(cmd: list[str], n: int = 9) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        if len(sys.argv) > 1:
            path = sys.argv[1]
        else:
            path = str(Path(d) / "tiny.h5")
            subprocess.run([str(BIN / "probe-train"), "--preset", "tiny", "--out", path, "-q"], check=True,
                           stdout=subprocess.DEVNULL)
        py = [sys.executable, "-c"]
        rows = [
            ("python -c pass (baseline)", py + ["pass"]),
            ("python -c 'import numpy'", py + ["import numpy"]),
            ("python -c 'import h5py'", py + ["import h5py"]),
            ("probe --help", [str(BIN / "probe"), "--help"]),
            ("probe info FILE", [str(BIN / "probe"), "info", path]),
            ("probe similarity FILE", [str(BIN / "probe"), "similarity", path, "--tokens", "reasoning"]),
        ]
        base = None
        print(f"machine: {machine()}")
        print(f"{'command':<30} {'median s':>9} {'x baseline':>11}")
        for name, cmd in rows:
            t = wall(cmd)
            base = base or t
            print(f"{name:<30} {t:>9.3f} {t / base:>11.2f}")


if __name__ == "__main__":
    main()
