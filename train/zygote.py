"""The fork server's own process (:mod:`.forkserver` starts it and talks to it): it imports torch,
h5py and the trainer once, then forks one ``probe-train`` child per request and reports each child's
end. The protocol is described in :mod:`.forkserver`."""
from __future__ import annotations

import json
import os
import select
import signal
import sys

from probe._proc import stop_signals


def serve() -> None:
    """The server's loop (started by :class:`.forkserver.ForkServer` with the stop signals blocked)."""
    from probe._proc import adopt_parent

    # what every trainer imports, once (no torch operation runs here: the children set their threads)
    import h5py  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401

    from . import cli, trainer  # noqa: F401
    try:
        import tokenizers  # noqa: F401 - text runs
    except ImportError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent stops each child itself
    adopt_parent()                                 # SIGTERM (default: end) when the parent dies
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [s for s in stop_signals() if s != signal.SIGINT])
    out = os.fdopen(os.dup(1), "w", buffering=1)
    children: set[int] = set()
    buf, eof = b"", False
    while not (eof and not children):
        ready, _, _ = select.select([] if eof else [0], [], [], 0.05)
        if ready:
            data = os.read(0, 1 << 16)
            eof = not data
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                pid = _fork(req, out)
                children.add(pid)
                out.write(json.dumps({"id": req["id"], "pid": pid}) + "\n")
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            out.write(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n")


def _fork(req: dict, out) -> int:
    """Fork one trainer; in the child run ``probe-train ARGS`` and never return."""
    out.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    # the child starts with the stop signals blocked, as a spawned trainer does (probe._proc.start): one
    # sent at once is delivered when its command line handles them, not lost to the server's SIG_IGN
    old = signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals())
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return pid
    code = 1
    try:
        os.setsid()                       # a session of its own, like start_new_session=True
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        os.close(null)
        os.close(err)
        out.close()
        os.environ.clear()
        os.environ.update(req["env"])
        # die with the server (which dies with the parent): a forked child's parent is the server
        os.environ["PROBE_PARENT"] = f"{os.getppid()}:{int(signal.SIGTERM)}"
        sys.argv = ["probe-train", *req["args"]]
        from probe.signals import STOP

        with STOP.caught():
            STOP.unblock()
            from ._entry import main

            main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:   # noqa: BLE001 - whatever happened, this child must not return into the server
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)
