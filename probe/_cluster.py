"""One way to use a Dask distributed cluster, for ``probe batch`` and ``probe-train sweep``: a bounded
handshake, results as they finish, and one line for each way a cluster fails.

Dask recomputes the tasks of a lost worker by itself. A scheduler that is not there, never answers or
is none ends the command before any work starts (a :class:`ProbeError`: one line); a scheduler lost
while the work runs is a :class:`ClusterLost`, which the caller says with what it kept.
"""
from __future__ import annotations

from contextlib import contextmanager, suppress
from typing import Iterator

from .errors import ProbeError, param
from .signals import stop_asked

TIMEOUT_S = 5.0   # a live scheduler answers in milliseconds; a silent port should not hold a command for long
TIMEOUT_HELP = ("seconds to connect to the Dask scheduler, and as many again for its answer (a port that "
                "accepts and never answers ends then)")


class ClusterLost(ProbeError):
    """The scheduler went away while the work ran."""


@contextmanager
def session(scheduler: str, timeout: float = TIMEOUT_S):
    """A ``distributed.Client`` of ``scheduler``, closed at the end, or one line saying why not: Dask
    missing, not an address, nothing there, a server that does not finish Dask's handshake in time
    (``timeout`` seconds to connect, as many again to answer), or one that answers in another protocol.
    Meanwhile Dask's own log stays off the terminal: the tracebacks of its reconnect attempts say less
    than the one line :func:`finished` gives for a lost scheduler."""
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


def finished(pending: set, scheduler: str) -> Iterator[tuple[object, object, BaseException | None]]:
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
