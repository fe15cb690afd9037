import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def _script(name: str) -> list[str]:
    exe = BIN / name
    if exe.exists():
        return [str(exe)]
    module = {"probe": "probe", "probe-train": "train"}[name]
    return [sys.executable, "-m", module]


def run_cli(name: str, *args, timeout: float = 300, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """Run a console script for real and capture its output (``env``: instead of this process's)."""
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    env.pop("PROBE_DEBUG", None)
    return subprocess.run(_script(name) + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def popen_cli(name: str, *args, env: dict | None = None, **kw) -> subprocess.Popen:
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(_script(name) + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A finished tiny transformer run, trained through the real CLI."""
    out = tmp_path_factory.mktemp("runs") / "tiny.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--gamma", "0.8", "--out", out, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="session")
def two_runs(tiny_run, tmp_path_factory) -> tuple[Path, Path]:
    """The tiny run at γ 0.8 and the same at γ 0.3 (runs compared side by side)."""
    other = tmp_path_factory.mktemp("runs") / "tiny-g03.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--gamma", "0.3", "--out", other, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    return tiny_run, other
