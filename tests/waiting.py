"""Waiting for events, not for time (tests/README.md): a test that sleeps and then asserts a process is
still in some state passes only on machines as slow as the one it was tuned on. Each helper here polls
for something a process did (a snapshot committed, a line on its terminal, torch being loaded)
and fails with a message when the process ends first; the deadline only bounds a test that would hang."""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

DEADLINE = 300.0   # seconds any one event may take on a loaded 2-core machine


def wait_for(cond, what: str, proc: subprocess.Popen | None = None, timeout: float = DEADLINE):
    """``cond()``'s first true value; fails if ``proc`` ends first or the deadline passes."""
    end = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None and not proc.stderr.closed else ""
            pytest.fail(f"the process ended (exit {proc.returncode}) before {what}:\n{err}")
        if time.monotonic() > end:
            pytest.fail(f"no {what} within {timeout:.0f} s")
        time.sleep(0.02)


def committed(paths, step: int = 1) -> bool:
    """Every file in ``paths`` exists and has a committed snapshot at ``step`` or later."""
    from probe.format import last_step

    paths = list(paths)
    return bool(paths) and all((last_step(p) or 0) >= step for p in paths)


def importing_torch(pid: int) -> bool:
    """Whether process ``pid`` has begun loading torch (its shared libraries are mapped): a program
    still starting, past its own first lines."""
    try:
        return "/torch/lib/" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


class Terminal:
    """A command whose stderr is a terminal (a pseudo-terminal this test reads), as a user at a
    terminal has it: the progress lines that a pipe does not get are the events to wait for."""

    def __init__(self, argv: list[str], env: dict | None = None):
        import pty

        self._master, slave = pty.openpty()
        env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "TERM": "xterm"}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                                     env=env, text=True)
        os.close(slave)
        self.seen = ""

    def _read(self, wait: float) -> bool:
        import select

        if not select.select([self._master], [], [], wait)[0]:
            return False
        try:
            chunk = os.read(self._master, 65536)
        except OSError:     # EIO: every holder of the terminal's other side has closed it
            return False
        self.seen += chunk.decode(errors="replace")
        return bool(chunk)

    def wait_for(self, pattern: str, what: str, timeout: float = DEADLINE) -> re.Match:
        """The first match of ``pattern`` in what the command wrote to its terminal."""
        end = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.seen)
            if m:
                return m
            if not self._read(0.05) and self.proc.poll() is not None:
                while self._read(0):
                    pass
                m = rx.search(self.seen)
                if m:
                    return m
                pytest.fail(f"the process ended (exit {self.proc.returncode}) before {what}:\n{self.text()}")
            if time.monotonic() > end:
                pytest.fail(f"no {what} within {timeout:.0f} s:\n{self.text()}")

    def finish(self, timeout: float = DEADLINE) -> tuple[str, str]:
        """Wait for the command to end; (stdout, terminal text without control sequences)."""
        out, _ = self.proc.communicate(timeout=timeout)
        while self._read(0):
            pass
        os.close(self._master)
        return out, self.text()

    def text(self) -> str:
        """What the terminal shows line by line: escape sequences and carriage-return redraws dropped."""
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", self.seen)
        return "\n".join(ln.split("\r")[-1] for ln in plain.replace("\r\n", "\n").split("\n"))
