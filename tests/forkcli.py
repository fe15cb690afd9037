"""Many CLI calls at the cost of a few: a helper process imports the console scripts' modules once
(and torch, numpy, h5py), then forks one child per call. Each call is still a process of its own —
its own argv, exit code, stdout and stderr, and the entry point the console script runs — only the
interpreter start-up and the imports are shared. The start-up itself is covered by the tests that
use ``conftest.run_cli``.

    with ForkCLI() as cli:
        results = cli.run_many([["probe", "info", "x.h5"], ...], jobs=2)   # CompletedProcess each
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

# The imports, the entry points and one call: both helpers below share this prelude.
_PRELUDE = r'''
import importlib, json, os, sys, time
import numpy, h5py, torch                      # the heavy imports, once
for mod in ("probe.api", "probe.batch", "probe.figures", "probe.render", "probe.format.validate",
            "probe.readers.checkpoints", "probe.readers.activations", "probe_train.trainer", "probe_train.tasks",
            "probe_train.evaluate", "rich.console", "rich.progress", "scipy.linalg", "probe.chart.mpl"):
    importlib.import_module(mod)
sys.modules["probe.chart.style"].pyplot()          # matplotlib with its Agg backend, as a figure call sets it
from importlib.metadata import entry_points
# the console scripts as installed (pyproject's [project.scripts]), so the entry points cannot drift
mains = {ep.name: ep.load() for ep in entry_points(group="console_scripts") if ep.name in ("probe", "probe-train")}
assert set(mains) == {"probe", "probe-train"}, mains

def call(argv, out, err, cwd=None):
    """Fork a child that runs the console script ``argv[0]`` with stdout/stderr into the files
    ``out``/``err`` (in ``cwd``) and exits with its code; returns the child's pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        fo, fe = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0); os.dup2(fo, 1); os.dup2(fe, 2)
        sys.stdout = open(1, "w", closefd=False); sys.stderr = open(2, "w", closefd=False)
        if cwd:
            os.chdir(cwd)
        sys.argv = list(argv)
        try:
            mains[argv[0]]()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)

print("ready", flush=True)
'''

_SERVER = _PRELUDE + r'''
running, started = {}, {}
jobs = int(sys.argv[1])

def reap(block):
    pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
    if pid:
        print(json.dumps([running.pop(pid), os.waitstatus_to_exitcode(status), time.perf_counter() - started.pop(pid)]),
              flush=True)
    return pid

for line in sys.stdin:
    if not line.strip():
        break
    key, argv, out, err = json.loads(line)
    while len(running) >= jobs:
        reap(True)
    pid = call(argv, out, err)
    running[pid], started[pid] = key, time.perf_counter()
while running:
    reap(True)
'''


class ForkCLI:
    def __init__(self, jobs: int = 2):
        self.jobs = jobs

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("PROBE_DEBUG", None)
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(self.jobs)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env)
        assert self._proc.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *exc):
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._tmp.cleanup()

    def run_many(self, calls: list[list[str]]) -> list[subprocess.CompletedProcess]:
        """Run every call (``[script, *args]``), ``jobs`` at a time; results in the order given (and
        each call's wall time in ``self.seconds``)."""
        files = []
        for k, argv in enumerate(calls):
            out, err = (os.path.join(self._tmp.name, f"{k}.{s}") for s in ("out", "err"))
            files.append((out, err))
            self._proc.stdin.write(json.dumps([k, [str(a) for a in argv], out, err]) + "\n")
        self._proc.stdin.write("\n")
        self._proc.stdin.close()
        codes, self.seconds = {}, {}
        for line in self._proc.stdout:
            k, code, seconds = json.loads(line)
            codes[k], self.seconds[k] = code, seconds
        self._proc.wait()
        results = []
        for k, argv in enumerate(calls):
            out, err = files[k]
            with open(out) as fo, open(err) as fe:
                results.append(subprocess.CompletedProcess(argv, codes[k], fo.read(), fe.read()))
        return results


# One call at a time, for as long as the test process lives: the child's pid comes back first (so a
# call past its timeout can be killed), then its exit code.
_WARM = _PRELUDE + r'''
for line in sys.stdin:
    pid = call(*json.loads(line))
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
'''


class WarmCLI:
    """A console-script call in a process forked from a helper that imported the CLI once (``tests/
    conftest.run_cli``): same argv, exit code, stdout, stderr and working directory as a fresh
    process, without its ~1 s of interpreter start-up and imports. The helper starts on first use and
    keeps the environment it started with; a call under another environment runs as a fresh process."""

    def __init__(self):
        self._proc, self._env = None, None

    @staticmethod
    def _environ() -> dict:
        return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}   # set per test phase

    def usable(self) -> bool:
        return self._proc is None or (self._proc.poll() is None and self._environ() == self._env)

    def _start(self):
        self._tmp = tempfile.TemporaryDirectory()
        self._env = self._environ()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("PROBE_DEBUG", None)
        self._proc = subprocess.Popen([sys.executable, "-c", _WARM], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env)
        self._buf = b""
        assert self._line(None) == "ready"

    def _line(self, timeout: float | None) -> str | None:
        """The helper's next line, or None after ``timeout`` seconds (read from the fd unbuffered, so
        select sees every byte)."""
        import select

        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError("the CLI helper process ended")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode().strip()

    def run(self, argv: list[str], timeout: float, cwd=None) -> subprocess.CompletedProcess:
        import signal

        if self._proc is None:
            self._start()
        out, err = (os.path.join(self._tmp.name, s) for s in ("out", "err"))
        self._proc.stdin.write(json.dumps([argv, out, err, os.fspath(cwd) if cwd else None]) + "\n")
        self._proc.stdin.flush()
        pid = int(self._line(None))
        code = self._line(timeout)
        if code is None:
            os.kill(pid, signal.SIGKILL)
            self._line(None)
            raise subprocess.TimeoutExpired(argv, timeout)
        code = int(code)
        with open(out) as fo, open(err) as fe:
            return subprocess.CompletedProcess(argv, code, fo.read(), fe.read())

    def close(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._tmp.cleanup()
            self._proc = None
