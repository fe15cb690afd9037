"""The one job runner: a picklable function over many items, in local processes or as the tasks of a Dask
distributed cluster, for ``probe batch``, ``probe-train sweep``, the figures and the demo (their trainers).

    from probe.jobs import run
    from probe.signals import stop_asked, stoppable

    with stoppable(), contextlib.closing(run(fn, items, at_once=4)) as ends:
        for item, result, exc in ends:      # as each ends: its result, or the exception that ended it
            ...
    if stop_asked():
        raise Interrupted(...)

Locally each item runs in a process of its own (``reuse``: in ``at_once`` workers that take one item after
another), started from the multiprocessing context the caller gives (the trainers': a fork server that
imported the trainer once) or spawned; its result or exception comes back through a pipe. The caller's
stop (:func:`probe.signals.stop_asked`, read between two waits of at most 0.2 s), an error raised in the
caller's loop or a second Ctrl-C stop the running ones by the caller's ``grace``: 0, killed at once (a
batch task holds no output); else SIGTERM and up to ``grace`` seconds to stop at a step boundary, their
files resumable, then killed. No process outlives the call; one whose parent dies however it dies (SIGKILL
too) gets the same signal from the kernel or its watching thread.

On a cluster, Dask recomputes the tasks of a lost worker by itself. A scheduler that is not there, never
answers or is none ends the command before any work starts (a :class:`ProbeError`: one line); a scheduler
lost while the work runs is a :class:`ClusterLost`, which the caller says with what it kept. A stop with
``grace`` sets an event the tasks read (:func:`stop_wanted`) and waits up to ``grace`` seconds for them.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager, suppress
from typing import Callable, Iterable, Iterator

from .errors import ProbeError, param
from .signals import die_with_parent, ignore_stop_signals, signals_blocked, stop_asked

TIMEOUT_S = 5.0   # a live scheduler answers in milliseconds; a silent port should not hold a command for long
TIMEOUT_HELP = ("seconds to connect to the Dask scheduler, and as many again for its answer (a port that "
                "accepts and never answers ends then)")


class ClusterLost(ProbeError):
    """The scheduler went away while the work ran."""


@contextmanager
def _session(scheduler: str, timeout: float = TIMEOUT_S):
    """A ``distributed.Client`` of ``scheduler``, closed at the end, or one line saying why not: Dask
    missing, not an address, nothing there, a server that does not finish Dask's handshake in time
    (``timeout`` seconds to connect, as many again to answer), or one that answers in another protocol.
    Meanwhile Dask's own log stays off the terminal: the tracebacks of its reconnect attempts say less
    than the one line :func:`_finished` gives for a lost scheduler."""
    import asyncio   # lazily, as logging: 40 ms of every command's start-up otherwise
    import logging

    try:
        from distributed import Client
        from distributed.comm import connect
    except ImportError:
        raise ProbeError(f"{param('scheduler')} needs dask.distributed: pip install 'dask[distributed]'") from None

    async def handshake():
        # Dask bounds the TCP connect but not the handshake read after it (distributed.comm.core.connect):
        # a port that accepts and never answers would hold the Client forever
        comm = await asyncio.wait_for(connect(scheduler, timeout=timeout), 2 * timeout)
        await comm.close()

    # Dask's config gives some of its loggers levels of their own (distributed.client: warning)
    logs = [logging.getLogger(n) for n in ["distributed", *logging.root.manager.loggerDict]
            if n.startswith("distributed.") or n == "distributed"]
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.CRITICAL)
    try:
        try:
            asyncio.run(handshake())
            client = Client(scheduler, timeout=f"{timeout}s")
        except TimeoutError:   # asyncio's too
            raise ProbeError(f"the server at {scheduler} did not answer as a Dask scheduler within "
                              f"{2 * timeout:g} s ({param('scheduler_timeout')} waits longer)") from None
        except OSError as exc:
            raise ProbeError(f"cannot reach the Dask scheduler at {scheduler} ({type(exc).__name__}: {exc})"
                              ) from None
        except (ValueError, TypeError) as exc:
            raise ProbeError(f"{param('scheduler', scheduler)} is not a Dask scheduler address such as "
                              f"tcp://host:8786 ({exc})") from None
        except Exception as exc:   # noqa: BLE001 - a server speaking another protocol (MemoryError included)
            raise ProbeError(f"{scheduler} did not answer as a Dask scheduler ({type(exc).__name__})") from None
        try:
            yield client
        finally:
            with suppress(Exception):   # a dead scheduler cannot be told goodbye
                client.close()
    finally:
        for log, level in zip(logs, levels):
            log.setLevel(level)


def _finished(pending: set, scheduler: str) -> Iterator[tuple[object, object, BaseException | None]]:
    """``(future, result, None)`` or ``(future, None, exception)`` for each future of ``pending`` as it
    finishes, removed from the set; ends early when a stop is asked (the rest stay in ``pending``).
    A task's own exception (a worker it killed three times: ``KilledWorker``) is yielded; a lost
    scheduler raises :class:`ClusterLost`."""
    import asyncio
    import concurrent.futures

    from distributed import wait

    def lost(exc: BaseException) -> ClusterLost:
        return ClusterLost(f"lost the Dask scheduler at {scheduler} ({type(exc).__name__})")

    while pending and not stop_asked():
        try:
            done = wait(pending, timeout=0.5, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            continue
        except (concurrent.futures.CancelledError, asyncio.CancelledError, OSError) as exc:
            raise lost(exc) from None
        for fut in done:
            pending.discard(fut)
            try:
                result = fut.result()
            except (concurrent.futures.CancelledError, asyncio.CancelledError) as exc:   # the scheduler's end
                raise lost(exc) from None
            except Exception as exc:   # noqa: BLE001 - the task's own failure, for the caller to record
                yield fut, None, exc
            else:
                yield fut, result, None


class Ended(ProbeError):
    """A job's process ended without its result: killed (the kernel's OOM killer, any signal) or exited
    (a command line's ``sys.exit``). ``exitcode``: its exit code, ``-N`` for signal N."""

    def __init__(self, exitcode: int | None):
        super().__init__(f"a job's process ended without its result (exit code {exitcode})")
        self.exitcode = exitcode


def run(fn: Callable, items: Iterable, *, at_once: int = 1, scheduler: str | None = None, timeout: float = TIMEOUT_S,
        context=None, grace: float = 0.0, reuse: bool = False, prepare: Callable | None = None) -> Iterator[tuple]:
    """``(item, fn(prepare(item)), None)`` or ``(item, None, exception)`` for each item as it ends.

    Parameters
    ----------
    fn : callable
        Picklable (a module's function): it runs in another process, or on a Dask worker.
    items : iterable
        Started in their order.
    at_once : int, default 1
        Local processes at once (on a cluster its workers decide).
    scheduler : str, optional
        A Dask scheduler's address: every item a task there, reached within ``timeout`` seconds (as
        many again for its answer).
    context : multiprocessing context, optional
        Where local processes start (default: spawned).
    grace : float, default 0
        How a stop, an error in the caller's loop or a second Ctrl-C ends the running jobs: 0 kills
        them (a cluster's are cancelled); else each gets SIGTERM (a cluster's, :func:`stop_wanted`) and
        up to ``grace`` seconds to end, then is killed (cancelled). A local job starts with the stop
        signals blocked: it hears one from its first :func:`probe.signals.stoppable` block on.
    reuse : bool, default False
        Local items run one after another in ``at_once`` workers (their imports paid once), not a
        process each.
    prepare : callable, optional
        ``prepare(item)``, called as the item starts (on a cluster: for every item, once the scheduler
        answered), gives what ``fn`` gets; None leaves the item out; an exception ends the run.

    Returns
    -------
    generator
        Close it (``contextlib.closing``) so that an error in the caller's loop stops the running jobs at
        once. A process that ended without a result gives :class:`Ended`; ``fn``'s own exception comes
        back as raised. Ends early, the running jobs stopped, when a stop is asked.

    Raises
    ------
    ProbeError
        The scheduler cannot be reached; :class:`ClusterLost` once it is lost.
    """
    import multiprocessing   # lazily, as Dask: a command's start-up imports this module for its options

    prepare = prepare or (lambda item: item)
    if scheduler:
        return _on_dask(fn, items, prepare, scheduler, timeout, grace)
    return _local(fn, list(items), prepare, at_once, context or multiprocessing.get_context("spawn"), grace, reuse)


class _Worker:
    """A process that runs ``fn`` on each item its pipe brings (one, unless ``reuse``)."""

    def __init__(self, ctx, fn: Callable, grace: float, reuse: bool):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(fn, child, os.getpid(), grace, reuse))
        self.item = None
        # a fork server started here, and so every process forked from it, begin with the stop signals
        # blocked: one sent while a trainer starts is heard once its command line handles them
        with signals_blocked():
            self.proc.start()
        child.close()

    def reply(self) -> tuple:
        """(result, exception) of the item it ran."""
        try:
            if self.conn.poll():
                return self.conn.recv()
        except (EOFError, OSError):   # it died before it answered
            pass
        except Exception as exc:   # noqa: BLE001 - a result this side cannot unpickle
            return None, exc
        self.proc.join()
        return None, Ended(self.proc.exitcode)

    def close(self) -> None:
        self.conn.close()
        self.proc.join()


def _local(fn, items: list, prepare, at_once: int, ctx, grace: float, reuse: bool) -> Iterator[tuple]:
    from multiprocessing.connection import wait

    idle: list[_Worker] = []
    busy: list[_Worker] = []
    try:
        while (items or busy) and not stop_asked():
            while items and len(busy) < at_once:
                item = items.pop(0)
                arg = prepare(item)
                if arg is None:
                    continue
                worker = idle.pop() if idle else _Worker(ctx, fn, grace, reuse)
                worker.item = item
                busy.append(worker)
                worker.conn.send(arg)
            ready = set(wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.2))
            for worker in [w for w in busy if w.conn in ready or w.proc.sentinel in ready]:
                busy.remove(worker)
                result, exc = worker.reply()
                if reuse and worker.proc.exitcode is None:
                    idle.append(worker)
                else:
                    worker.close()
                yield worker.item, result, exc
    finally:
        for worker in idle:   # None: no more items (a closed pipe is not enough: a forked worker holds copies)
            with suppress(OSError):
                worker.conn.send(None)
        try:
            _halt(busy, grace)
        finally:
            for worker in idle:
                worker.close()


def _halt(busy: list[_Worker], grace: float) -> None:
    """SIGTERM to each running job and up to ``grace`` seconds to end (none: killed at once); one still
    running then, or at a second Ctrl-C, is killed. Each is waited for."""
    try:
        if grace:
            for worker in busy:
                worker.proc.terminate()
            deadline = time.monotonic() + grace
            for worker in busy:
                worker.proc.join(max(0.1, deadline - time.monotonic()))
    finally:
        for worker in busy:
            if worker.proc.exitcode is None:
                worker.proc.kill()
            worker.close()


def _serve(fn: Callable, conn, parent: int, grace: float, reuse: bool) -> None:
    """A job's process: in a session of its own (a terminal's Ctrl-C or hangup, ``timeout``'s SIGTERM to
    the group, reach the parent, which stops its jobs itself), with the stop signal of its policy
    (SIGTERM with a ``grace``, else SIGKILL) when the parent ends however it ends."""
    with suppress(AttributeError, OSError):
        os.setsid()
    if not grace:
        ignore_stop_signals()
    signum = signal.SIGTERM if grace else signal.SIGKILL
    if os.getppid() == parent:   # the kernel's signal: also for a process stuck in C (a forked one's parent is its server)
        die_with_parent(parent, signum)
    threading.Thread(target=_with_parent, args=(signum,), daemon=True).start()
    while True:
        try:
            arg = conn.recv()
        except EOFError:   # the parent has gone
            return
        if arg is None:   # no more items
            return
        try:
            reply = fn(arg), None
        except Exception as exc:   # noqa: BLE001 - the job's failure, for the caller to record
            reply = None, exc
        try:
            conn.send(reply)
        except Exception as exc:   # noqa: BLE001 - a result or exception that does not pickle
            conn.send((None, ProbeError(f"{type(exc).__name__}: {exc}")))
        if not reuse:
            return


def _with_parent(signum: int) -> None:
    """Send ``signum`` to this process once its parent (the process that asked for it, a fork server's
    too) has ended."""
    import multiprocessing

    multiprocessing.parent_process().join()
    os.kill(os.getpid(), signum)


_task_stop = threading.local()


def stop_wanted(timeout: float) -> bool:
    """In a Dask task that :func:`run` started with a ``grace``: whether its caller asks it to stop, after
    waiting up to ``timeout`` seconds for that."""
    event = getattr(_task_stop, "event", None)
    if event is None:
        time.sleep(timeout)
        return False
    return event.wait(timeout=timeout)


def _task(fn: Callable, arg, stop: str | None):
    """A Dask task: ``fn(arg)``, which reads the caller's stop through :func:`stop_wanted`."""
    if stop is not None:
        from distributed import Event

        event = Event(stop)
        if event.is_set():   # stopped while this task waited for a worker: nothing started, nothing to keep
            return None
        _task_stop.event = event
    try:
        return fn(arg)
    finally:
        _task_stop.event = None


def _on_dask(fn, items, prepare, scheduler: str, timeout: float, grace: float) -> Iterator[tuple]:
    import uuid

    with _session(scheduler, timeout) as client:
        from distributed import Event, wait

        stop = Event(f"probe-stop-{uuid.uuid4().hex}", client=client) if grace else None   # set: the tasks stop
        futures = {}
        for item in items if not stop_asked() else ():   # a stop while the scheduler answered: nothing sent
            arg = prepare(item)
            if arg is not None:
                futures[client.submit(_task, fn, arg, stop and stop.name, pure=False,
                                      key=f"{fn.__name__}-{uuid.uuid4().hex}")] = item
        pending = set(futures)
        lost = False
        try:
            for fut, result, exc in _finished(pending, scheduler):
                yield futures[fut], result, exc
            if pending and stop is not None:
                # a running task cannot be cancelled: the event stops it, and a task still queued returns
                # at once; waited for (a second Ctrl-C ends the wait), so its files are whole
                stop.set()
                with suppress(TimeoutError, KeyboardInterrupt):
                    wait(list(pending), timeout=grace, return_when="ALL_COMPLETED")
        except ClusterLost:
            lost = True
            raise
        finally:
            if pending and not lost:   # a dead scheduler cannot be told
                with suppress(Exception):
                    if stop is not None:
                        stop.set()
                    client.cancel(list(pending))
