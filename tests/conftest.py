import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def _signals_as_from_a_terminal() -> None:
    """A suite run under ``nohup`` (or as a background job of a script) ignores SIGHUP (SIGINT), and
    an ignored signal is inherited: every command the tests start would ignore it too, and the tests
    that send it would wait for a stop that never comes. A handler that does nothing keeps this
    process alive through a hangup just as well, and is not inherited: the commands start with the
    signal's default, as from a terminal. (The nohup test sets SIG_IGN for its command itself.)"""
    import signal

    for name in ("SIGHUP", "SIGINT"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, lambda signum, frame: None)


_signals_as_from_a_terminal()


def _script(name: str) -> list[str]:
    exe = BIN / name
    if exe.exists():
        return [str(exe)]
    from probe.children import entry_command

    return entry_command(name)


_WARM = None


def run_cli(name: str, *args, timeout: float = 300, env: dict | None = None, real: bool = False,
            **kw) -> subprocess.CompletedProcess:
    """Run a console script in a process of its own and capture its output. By default the process is
    forked from a helper that imported the CLI once (``forkcli.WarmCLI``: same argv, exit code and
    output, ~1 s less start-up); ``real=True``, ``env`` (instead of this process's) or other
    ``subprocess.run`` arguments than ``cwd`` start the installed script afresh."""
    global _WARM
    if not real and env is None and set(kw) <= {"cwd"} and not os.environ.get("PROBE_TEST_REAL_CLI"):
        from forkcli import WarmCLI

        if _WARM is not None and not _WARM.usable():
            _WARM.close()
            _WARM = None
        if _WARM is None:
            import atexit

            _WARM = WarmCLI()
            atexit.register(_WARM.close)
        return _WARM.run([name] + [str(a) for a in args], timeout, kw.get("cwd"))
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    env.pop("PROBE_DEBUG", None)
    return subprocess.run(_script(name) + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def train_sweep(out: Path, preset: str, *grids: str, jobs: int = 2, timeout: float = 600) -> Path:
    """``probe-train sweep --preset PRESET --grid G ... --out OUT``, through the real CLI; the sweep folder."""
    res = run_cli("probe-train", "sweep", "--preset", preset, *(a for g in grids for a in ("--grid", g)),
                  "--out", out, "--jobs", str(jobs), timeout=timeout)
    assert res.returncode == 0, res.stderr
    return out


def popen_cli(name: str, *args, env: dict | None = None, **kw) -> subprocess.Popen:
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(_script(name) + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def end_all(*procs) -> None:
    """Kill and reap every process of ``procs`` still running (a test's clean-up; paused ones included)."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()


def linked_runs(folder: Path, n: int) -> Path:
    """``n`` names (run_0.h5 ...) for one 56-snapshot tiny run in ``folder``: `ood --step all` takes about a
    second on each, long enough for a batch to be caught at work."""
    res = run_cli("probe-train", "--preset", "tiny", "--steps", "100", "--snapshot-every", "2", "--threads", "1",
                  "--quiet", "--out", folder / "run_0.h5")
    assert res.returncode == 0, res.stderr
    for k in range(1, n):
        os.link(folder / "run_0.h5", folder / f"run_{k}.h5")
    return folder


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A finished tiny transformer run, trained through the real CLI."""
    out = tmp_path_factory.mktemp("runs") / "tiny.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--gamma", "0.8", "--out", out, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="session")
def width_sweep(tmp_path_factory) -> Path:
    """A width sweep of the tiny preset (d_model 16 and 32, seeds 0 and 1): what probe regime --widths reads."""
    out = tmp_path_factory.mktemp("runs") / "widths"
    res = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "d_model=16,32", "--grid", "seed=0:2",
                  "--out", out, "-j", "1")
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="session")
def two_runs(tiny_run, tmp_path_factory) -> tuple[Path, Path]:
    """The tiny run at γ 0.8 and the same at γ 0.3 (runs compared side by side)."""
    other = tmp_path_factory.mktemp("runs") / "tiny-g03.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--gamma", "0.3", "--out", other, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    return tiny_run, other


# xdist hands out whole files (--dist loadfile) in collection order: a long file collected last keeps
# one worker busy while the other has nothing left. The longest files go first (measured with
# --junitxml on main, 2026-11-24: test_signals.py 121 s of worker time, the others 18-41 s); the rest
# keep their order. test_notebook.py (added later): ~60 s, most of it the tutorial notebook's kernel.
LONGEST_FIRST = ("test_docs.py", "test_signals.py", "test_notebook.py", "test_interrupt.py", "test_report.py",
                 "test_bad_input_text.py", "test_faults.py", "test_figures.py", "test_paper4.py", "test_sweep.py",
                 "test_effect.py", "test_bad_input_nonfinite.py", "test_user_folder.py", "test_bad_input.py",
                 "test_bad_input_readers.py", "test_batch.py", "test_resume.py", "test_report_browser.py",
                 # added later, 25-60 s of worker time each (--durations, 2026-11-28): ahead of the short files
                 "test_ensemble.py", "test_faults_outputs.py", "test_faults_reruns.py", "test_faults_workers.py",
                 "test_language_corpora.py", "test_untrusted_open.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: order within a file kept


RAW_TEX = re.compile(r"\$|\\[A-Za-z]+")   # a dollar or a TeX command: math a figure printed instead of drawing


def svg_texts(path: Path) -> list[str]:
    """The text of each ``<text>`` element of a matplotlib SVG (the toolkit writes text as text:
    ``svg.fonttype: none``), its spans joined, its entities decoded: what a reader sees."""
    import html

    return [html.unescape("".join(part.strip(" \n") for part in re.split(r"<[^>]+>", t)))
            for t in re.findall(r"<text\b[^>]*>(.*?)</text>", Path(path).read_text(encoding="utf-8"), re.S)]


def without_status(stderr: str) -> str:
    """stderr without the status lines a command prints off a terminal once its work takes over 2 s
    (``ood: step 1000 (3/9)``, ``batch: 1/2 tasks done``, ``report: …``): on a loaded machine a
    command that is usually quick prints them, and a test about its errors or warnings must not
    depend on the machine's speed."""
    import re

    from probe import registry

    names = "|".join(re.escape(n) for n in [*registry.names(), "batch", "report", "sweep-summary"])
    return "".join(ln for ln in stderr.splitlines(keepends=True) if not re.match(rf"(?:{names}): ", ln))


def cli_commands() -> dict:
    """Every ``probe`` command, by name, as the command line builds it (the probe commands on demand)."""
    from probe.cli import app

    return {name: app.get_command(None, name) for name in app.list_commands(None)}
