"""Trainers forked from one process that imported torch once.

A ``probe-train`` process spends its first 2-3 s importing torch (bench/bench_presets.py); a figures
or sweep command that trains dozens of small runs pays that dozens of times. The fork server is one
process that imports torch, h5py and the trainer, and forks a child for each run. Each run is still a
process of its own, the same ``probe-train`` command line with the same arguments: a crash stays in
it; its stop signals, its run file's lock, its stderr and its exit code are its own.

Protocol (JSON lines): the parent writes ``{"id", "args", "stderr", "env"}`` to the server's stdin;
the server answers ``{"id", "pid"}`` once it forked, and ``{"pid", "code"}`` when that child has ended
(its exit code, or -N for a signal, as subprocess reports it). The parent signals its children
directly (``os.kill``); the server only forks and reaps. The parent closing the server's stdin ends the
server once its children have ended. Process deaths cascade as for plain children: the server gets
SIGTERM when its parent dies (:func:`probe._proc.adopt_parent`), each child when the server dies, and
a child stops at its next step boundary, its run file resumable.

Linux only (``fork`` of a process that imported torch, before it ran a single torch operation, so no
thread pool exists yet); elsewhere, or with ``PROBE_FORK_SERVER=0``, trainers start as plain processes.
This module is the parent's side; the server's process runs :mod:`.zygote` (started by name: nothing
imports it, so the trainer it imports never imports this queue back).
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

from probe._proc import child_env, module_command, start
from probe.errors import ProbeError


def enabled() -> bool:
    return sys.platform.startswith("linux") and os.environ.get("PROBE_FORK_SERVER", "1") != "0"


# --- the parent's side -------------------------------------------------------------------------------

class Forked:
    """A trainer forked by the server, with the part of :class:`subprocess.Popen` the trainer queue uses."""

    def __init__(self, server: "ForkServer", pid: int, args: list[str]):
        self.server, self.pid, self.args = server, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.server.pump()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.server.pump(0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:   # never a pid the server has reaped (and the kernel may give to another)
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """Start trainers as children of one fork server (:func:`probe_train.zygote.serve`)."""

    def __init__(self):
        import tempfile

        self._log = tempfile.TemporaryFile("w+")
        self.proc = start(module_command("probe_train.zygote", "serve"), stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=self._log, start_new_session=True,
                          env=child_env(signal.SIGTERM))
        self._out = self.proc.stdout.fileno()
        self._buf = b""
        self._ids = 0
        self._started: dict[int, int] = {}     # request id -> pid
        self._children: dict[int, Forked] = {}
        self._ended: dict[int, int] = {}       # pid -> exit code, reported before its handle exists

    def start(self, args: list[str], stderr_path: str, env: dict) -> Forked:
        """Fork ``probe-train ARGS``, its stderr written to ``stderr_path``; raises ProbeError if the
        server is gone."""
        self._ids += 1
        req = {"id": self._ids, "args": args, "stderr": stderr_path, "env": env}
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ProbeError(f"the trainers' fork server ended: {self._last_log()}") from None
        while self._ids not in self._started:
            if not self.pump(1.0) and self.proc.poll() is not None:
                raise ProbeError(f"the trainers' fork server ended: {self._last_log()}")
        pid = self._started.pop(self._ids)
        child = self._children[pid] = Forked(self, pid, args)
        if pid in self._ended:
            child.returncode = self._ended.pop(pid)
        return child

    def pump(self, timeout: float = 0.0) -> bool:
        """Read what the server said (waiting up to ``timeout`` s for something); False at its end."""
        ready, _, _ = select.select([self._out], [], [], timeout)
        if not ready:
            return True
        data = os.read(self._out, 1 << 16)
        if not data:   # the server is gone (killed): its children are gone or going (their death signal)
            for child in self._children.values():
                if child.returncode is None:
                    child.returncode = -int(signal.SIGKILL)
            return False
        self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            msg = json.loads(line)
            if "id" in msg:
                self._started[msg["id"]] = msg["pid"]
            elif msg["pid"] in self._children:
                self._children[msg["pid"]].returncode = msg["code"]
            else:
                self._ended[msg["pid"]] = msg["code"]
        return True

    def close(self) -> None:
        """End the server (its children have ended: the queue waited for each)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self._log.close()

    def _last_log(self) -> str:
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit {self.proc.poll()}"
