"""Start-up of ``probe --help`` and ``probe info FILE``: this checkout against an older commit's, alternating
in one run, beside ``python -c "import typer"`` (issue 36's goal: both within 0.5 s on a 2-core machine).

    git worktree add /tmp/old e6ef380
    python bench/bench_startup.py /tmp/old [--rounds 15]

Both trees run in this interpreter through the same wrapper (the tree first on ``sys.path``), so only
the package differs; the minimum of the rounds is each command's own cost on a shared machine.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def probe_cmd(tree: Path, *argv: str) -> list[str]:
    code = (f"import sys; sys.path.insert(0, {str(tree)!r}); sys.argv = ['probe', *{list(argv)!r}]\n"
            "from probe.cli import main\nmain()")
    return [sys.executable, "-c", code]


def once(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path, help="a checkout of the commit to compare with")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run = str(Path(d) / "tiny.h5")
        subprocess.run([str(BIN / "probe-train"), "--preset", "tiny", "--out", run, "-q"], check=True,
                       stdout=subprocess.DEVNULL)
        rows = {"python -c 'import typer'": [sys.executable, "-c", "import typer"]}
        for label, argv in (("probe --help", ("--help",)), ("probe info FILE", ("info", run))):
            rows[f"{label} (old)"] = probe_cmd(args.old, *argv)
            rows[f"{label} (new)"] = probe_cmd(ROOT, *argv)
        times: dict[str, list[float]] = {k: [] for k in rows}
        for i in range(args.rounds):   # alternate: each round runs every command once, the order reversed every other round
            for k in (list(rows) if i % 2 == 0 else list(reversed(rows))):
                times[k].append(once(rows[k]))
    print(f"machine: {machine()}; {args.rounds} rounds, alternating")
    print(f"{'command':<30} {'min s':>7} {'median s':>9}")
    for k, ts in times.items():
        print(f"{k:<30} {min(ts):>7.3f} {statistics.median(ts):>9.3f}")
    for label in ("probe --help", "probe info FILE"):
        old, new = min(times[f"{label} (old)"]), min(times[f"{label} (new)"])
        print(f"{label}: new/old {new / old:.2f} (min)")


if __name__ == "__main__":
    main()
