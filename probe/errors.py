"""The one exception type, the one warning type, and how a command line reports them.

Library code names the Python parameter a bad value came from with :func:`param`;
``str(error)`` shows it as Python spells it (``step='latest'``), a command line as its flag
(``--step latest``), so neither reader is told about an option they never passed.
"""
from __future__ import annotations

import errno
import os
import re
import signal
import sys
import warnings
from typing import Callable, NoReturn

from . import _watchdog
from ._proc import adopt_parent, stop_signals
from ._text import ERRORS as _SHOWN, terminal  # terminal: probe-train's door too (train imports errors)

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
_MARK = "\x1f"  # brackets a parameter reference inside a message; never typed by a user
_REF = re.compile(f"{_MARK}([A-Za-z_][A-Za-z0-9_]*)(?:=(.*?))?{_MARK}")


def param(name: str, value=None) -> str:
    """A reference to parameter ``name`` (optionally with a value) inside an error message."""
    return f"{_MARK}{name}{_MARK}" if value is None else f"{_MARK}{name}={value}{_MARK}"


def _python(name: str, value: str | None) -> str:
    if value is None:
        return name
    return f"{name}={value}" if re.fullmatch(r"[-+.\deE]+|[-+]?inf|nan|None|True|False", value) else f"{name}={value!r}"


def _flag(name: str, value: str | None) -> str:
    flag = "--" + name.replace("_", "-")
    # a switch set to True is the flag itself (Python: allow_nonfinite=True, CLI: --allow-nonfinite)
    return flag if value is None or value == "True" else f"{flag} {value}"


def render(message: str, style: Callable[[str, str | None], str] = _python) -> str:
    """``message`` with its parameter references written in ``style``."""
    return _REF.sub(lambda m: style(m.group(1), m.group(2)), message)


class ProbeError(Exception):
    """Bad input or an unusable file; the message is shown to the user as is.

    Every documented failure of the toolkit is one. ``str(error)`` names the parameter a bad value came
    from as Python spells it (``step='latest'``); a command line shows the same message with the flag
    instead (``--step latest``, ``cli_message()``), as one ``Error:`` line and exit code 2.

    Examples
    --------
    >>> import probe
    >>> try:
    ...     probe.similarity("run.h5", step=123456)
    ... except probe.ProbeError as exc:
    ...     print(exc)
    """

    def __str__(self) -> str:
        return render(super().__str__())

    def cli_message(self) -> str:
        """The message with parameters written as the command-line flags that feed them."""
        return render(super().__str__(), _flag)


class ProbeWarning(UserWarning):
    """Something the user should know about a result that is still given (a zero vector, a word left out).

    A ``UserWarning``, filtered like any other; a command line prints it as one ``warning: ...``
    line on stderr.

    Examples
    --------
    >>> import warnings
    >>> import probe
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", probe.ProbeWarning)     # stop at the first one
    ...     probe.similarity("run.h5", allow_nonfinite=True)
    """


def warn(message: str) -> None:
    warnings.warn(render(message), ProbeWarning, stacklevel=3)


def captured(call: Callable[[], list]) -> tuple[list, Exception | None, list[str]]:
    """``call()`` as batch and the report run a probe, where one failure must not stop the rest:
    (its results or [] if it raised, the exception it raised or None, its ProbeWarning messages
    once each). A stop signal or Ctrl-C is not caught; :func:`failure` words the exception."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ProbeWarning)   # into the table or the page, not onto stderr
        try:
            results, error = call(), None
        except Exception as exc:
            results, error = [], exc
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, ProbeWarning)))
    return results, error, notes


def failure(exc: Exception) -> str:
    """A ProbeError's message; for anything else (a bug, a library's error) ``Type: message``."""
    return str(exc) if isinstance(exc, ProbeError) else f"{type(exc).__name__}: {exc}"


def fail(message: str) -> NoReturn:
    raise ProbeError(message)


# --- faults while writing --------------------------------------------------------------------------
# What a user can do something about, named the way they would search for it. EIO and the rest keep
# the system's own wording (os.strerror).
_WRITE_CAUSES = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "file too large (over a file-size limit)",
}
_ONLY_WRITES_FAIL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)   # EACCES may be a read's
_ERRNO_IN_TEXT = re.compile(r"errno = (\d+)|\[Errno (\d+)\]")


def os_errno(exc: BaseException) -> int | None:
    """The errno behind ``exc``: an OSError's own, or the one HDF5 writes into the text of the
    OSError/RuntimeError h5py raises (``... file write failed: ..., errno = 28, ...``)."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        return code
    m = _ERRNO_IN_TEXT.search(str(exc))
    return int(m.group(1) or m.group(2)) if m else None


def is_write_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is the file system refusing a write (full, read-only, no permission, a quota or
    size limit) rather than a damaged file or a bug."""
    return isinstance(exc, (OSError, RuntimeError)) and os_errno(exc) in _WRITE_CAUSES


def write_cause(exc: BaseException) -> str:
    """Why a write failed, in a few words: ``no space left on device``, ``read-only file system``, ..."""
    code = os_errno(exc)
    if code in _WRITE_CAUSES:
        return _WRITE_CAUSES[code]
    if code is not None:
        return os.strerror(code).lower()
    text = getattr(exc, "strerror", None) or str(exc).split("(", 1)[0]
    return " ".join(str(text).split()) or type(exc).__name__


def write_error(exc: BaseException, what: str, after: str = "") -> ProbeError:
    """The one-line error for a write that failed: ``<cause> while writing <what><after>``, e.g.
    ``no space left on device while writing plot sim.png``."""
    return ProbeError(f"{write_cause(exc)} while writing {what}{after}")


def _show_warning(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning):
    if issubclass(category, ProbeWarning):
        print(terminal(f"warning: {message}"), file=sys.stderr)   # it may quote a file's text
    else:   # a library's warning may quote a file too (its own lines: where it was raised)
        _default(terminal(str(message)), category, filename, lineno, file, line)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Interrupted(Exception):
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP), handled: the work stopped at a safe point; the message
    says what was kept. ``signum`` is the signal (default: the one :data:`STOP` caught, else SIGINT);
    a command line exits with ``exit_code``, 128 + the signal's number (130, 143, 129), as a shell
    reports a process a signal ended. (Not a KeyboardInterrupt: command-line libraries would swallow
    it into a silent exit 130.)"""

    def __init__(self, *args, signum: int | None = None):
        super().__init__(*args)
        self.signum = int(signum or STOP.asked or signal.SIGINT)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        text = render(super().__str__(), _flag)
        if self.signum != signal.SIGINT and text.startswith("Interrupted"):   # "Interrupted by SIGTERM: ..."
            text = f"Interrupted by {_signal_name(self.signum)}{text[len('Interrupted'):]}"
        return text


class _Stop:
    """The stop signals as a flag: inside ``with STOP.caught():`` SIGINT (Ctrl-C), SIGTERM (``kill``,
    ``timeout``, a service manager) and SIGHUP (the terminal closed) set ``asked`` to the signal's
    number instead of raising KeyboardInterrupt wherever the interpreter happens to be (inside an HDF5
    write, a torch import); long work reads the flag at its safe points, stops its workers there and
    raises :class:`Interrupted`. A second Ctrl-C raises KeyboardInterrupt (the user will not wait for
    the safe point); a repeated SIGTERM or SIGHUP does not (``timeout`` sends SIGTERM to the process
    and then to its whole group: the same request, twice). A signal that was ignored when the block
    began (SIGHUP under ``nohup``) stays ignored. Main thread only (Python's rule).

    Outside the blocks a command line (:func:`run_cli`, through :meth:`stop_outside`) ends at once on
    any of the three, with one line and the signal's exit code (:meth:`_now`)."""

    def __init__(self):
        self.asked = 0        # inside caught(): the first stop signal (0: none yet)
        self.received = 0     # the last stop signal handled, inside a block or not (for the exit code)
        self._depth = 0
        self._old: dict = {}
        self._cleanups: list = []

    @staticmethod
    def signals() -> list:
        return stop_signals()

    def at_stop(self, cleanup: Callable[[], None]) -> None:
        """Call ``cleanup`` when a stop signal ends the command at once (:meth:`_now`): a module
        with work to undo registers it (:mod:`probe._files` removes its unfinished temporary files),
        so this one imports nothing of it."""
        if cleanup not in self._cleanups:
            self._cleanups.append(cleanup)

    def _handle(self, signum, frame):
        _watchdog.heard()
        self.received = signum
        if self.asked and signum == signal.SIGINT:  # a second Ctrl-C: the user will not wait for the safe point
            raise KeyboardInterrupt
        self.asked = self.asked or signum

    def _now(self, signum, frame):
        """Outside the blocks: the command ends here, with one line and the signal's exit code. What
        runs there keeps nothing at a safe point (an analysis prints at its end, every file is written
        under a temporary name and renamed: :func:`probe._files.write_atomic`, whose unfinished
        temporary files are removed first). Not a KeyboardInterrupt: raised wherever the interpreter
        happens to be, one can be lost (in a finaliser or a weakref callback Python only prints it: CI
        saw ``ood --threads 2`` run on to exit 0 after a SIGHUP) or break a library in mid-call (h5py's
        lock: "SystemError: FastRLock.__exit__ returned a result with an exception set", 5 of 20
        SIGHUPs to that command)."""
        _watchdog.heard()
        self._end(signum)

    def _end(self, signum: int, stuck: bool = False) -> None:
        """Remove unfinished files, say so in one line, exit 128 + ``signum``. ``stuck``: called by the
        watchdog while the main thread is inside a library call (:mod:`probe._watchdog`), which may hold
        stdout's lock: nothing is flushed, the line goes straight to the descriptor."""
        self.received = signum
        for cleanup in self._cleanups:
            try:
                cleanup()
            except Exception:
                pass
        if stuck:
            try:
                os.write(2, (_interrupted_line() + "\n").encode())
            except OSError:
                pass
            os._exit(128 + signum)
        try:
            sys.stdout.flush()   # what was printed before the signal
        except Exception:
            pass
        _say(_interrupted_line())
        os._exit(128 + signum)

    def caught(self):
        import contextlib
        import threading

        @contextlib.contextmanager
        def block():
            main = threading.current_thread() is threading.main_thread()
            if main and self._depth == 0:
                self._old = {}
                for sig in self.signals():
                    old = signal.getsignal(sig)
                    # SIGINT always: a parent stops its children with it, even where a shell started the
                    # parent with SIGINT ignored; the others not where ignored (nohup) or set outside Python
                    if old is None or (old == signal.SIG_IGN and sig != signal.SIGINT):
                        continue
                    self._old[sig] = signal.signal(sig, self._handle)
            self._depth += main
            try:
                yield self
            finally:
                self._depth -= main
                if main and self._depth == 0:
                    for sig, old in self._old.items():
                        signal.signal(sig, old)
                    self._old = {}
                    self.asked = 0

        return block()

    def stop_outside(self) -> None:
        """A command line's handlers: outside caught() blocks SIGINT, SIGTERM and SIGHUP end the command
        at once (:meth:`_now`), where Python's default would be a KeyboardInterrupt (SIGINT) or no
        last line at all. A signal ignored or handled outside Python is left as it is. Main thread only."""
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.signals():
            current = self._old.get(sig) if self._depth else signal.getsignal(sig)
            if (current is signal.default_int_handler or current is _Stop._exit   # _exit: an earlier run_cli's
                    or (current == signal.SIG_DFL and sig != signal.SIGINT)):
                if self._depth:
                    self._old[sig] = self._now     # what the outermost block restores
                else:
                    signal.signal(sig, self._now)

    def unblock(self) -> None:
        """Unblock the stop signals in this thread (a toolkit child starts with them blocked:
        :func:`probe._proc.start`); one sent meanwhile is delivered now."""
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, self.signals())

    def late(self) -> None:
        """A command line that has its exit code: a stop signal from now on ends the process at once
        with the signal's exit code (its output is complete, nothing is left to stop) instead of a
        KeyboardInterrupt traceback out of the interpreter's shutdown. Main thread only."""
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.signals():
            if self._depth and sig in self._old:
                self._old[sig] = self._exit      # what the outermost block restores
            current = signal.getsignal(sig)
            if current is not None and current != signal.SIG_IGN:
                signal.signal(sig, self._exit)

    @staticmethod
    def _exit(signum, frame):
        _watchdog.heard()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(128 + signum)

    def exit_code(self) -> int:
        """The exit code of a command a stop signal ended: 128 + its number (Ctrl-C 130)."""
        return 128 + (self.received or signal.SIGINT)

    def name(self) -> str:
        return _signal_name(self.received or signal.SIGINT)


STOP = _Stop()
SIGINT = STOP   # the name from before SIGTERM and SIGHUP were handled: the same object


def _usage_errors() -> tuple[type, ...]:
    """Typer/Click's usage-error classes among the modules already imported (Typer >= 0.20 vendors
    Click as ``typer._click``; plain Click, 30 ms to import, can only raise once something imported it).
    Called in the ``except`` clause, so only when an exception is on its way out."""
    found = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        module = sys.modules.get(name)
        if module is not None:
            found.append(module.ClickException)
    return tuple(found)


def _usage_message(exc) -> str:
    """A usage error on one line: what is wrong, with the option and the allowed values, and where help is."""
    msg = " ".join(exc.format_message().split()).replace("Value error, ", "")
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        msg += f" (see '{ctx.command_path} --help')"
    return msg


class _PipeClosed(Exception):
    """stdout's reader went away (``probe ... | head``); not an OSError, so no library turns it into an exit 1."""


class _Stdout:
    """sys.stdout, with a closed pipe raised as :class:`_PipeClosed`."""

    def __init__(self, raw):
        self._raw = raw

    def write(self, text):
        try:
            return self._raw.write(text)
        except BrokenPipeError:
            raise _PipeClosed() from None

    def flush(self):
        try:
            return self._raw.flush()
        except BrokenPipeError:
            raise _PipeClosed() from None

    def __getattr__(self, name):
        return getattr(self._raw, name)


def _invoke(app, **kw) -> int:
    """Call ``app``; a Typer app runs without Click's own error printing, so usage errors reach us."""
    try:
        import typer
    except ImportError:  # pragma: no cover - typer is a dependency
        typer = None
    if typer is not None and isinstance(app, typer.Typer):
        rc = app(standalone_mode=False, **kw)
        return rc if isinstance(rc, int) else 0
    if hasattr(app, "main"):   # a click command (the lean build of a Typer app)
        rc = app.main(standalone_mode=False, **kw)
        return rc if isinstance(rc, int) else 0
    app()
    return 0


def _printable_streams() -> None:
    """stdout and stderr write what their encoding lacks as ``\\xNN`` (:mod:`probe._text`) instead of
    failing: a file name that is not UTF-8 prints under any locale and ``PYTHONIOENCODING``, and what
    reaches a pipe or a file is valid in the stream's encoding (no raw undecodable bytes)."""
    for stream in (sys.stdout, sys.stderr):
        stream = getattr(stream, "_raw", stream)
        try:
            stream.reconfigure(errors=_SHOWN)
        except (AttributeError, ValueError, OSError):   # not a text stream of io (a test's capture)
            pass


def _interrupted_line() -> str:
    """What a command a stop signal ended outside a safe point says (nothing to keep there)."""
    return "Error: interrupted" + ("" if STOP.exit_code() == EXIT_INTERRUPTED else f" by {STOP.name()}")


def _say(line: str) -> None:
    """A last line on stderr, which may be gone (a closed terminal: SIGHUP)."""
    try:
        print(terminal(line), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def run_cli(app, **kw) -> None:
    """Run a command-line entry point (a Typer app or a function): bad input ends in one ``Error: ...``
    line on stderr and exit 2; a stop signal in one line saying what was kept and exit 128 + the
    signal's number (Ctrl-C 130, SIGTERM 143, SIGHUP 129)."""
    try:
        _run_cli(app, **kw)
    finally:
        STOP.late()


def _run_cli(app, **kw) -> None:
    warnings.showwarning = _show_warning
    _printable_streams()
    if not isinstance(sys.stdout, _Stdout):
        sys.stdout = _Stdout(sys.stdout)
    STOP.stop_outside()
    _watchdog.start(STOP.signals(), lambda signum: STOP._end(signum, stuck=True))
    try:
        adopt_parent()   # a child of the toolkit: stop when the process that started it ends
        rc = _invoke(app, **kw)
        if rc == EXIT_INTERRUPTED:  # Typer turns a KeyboardInterrupt it catches into exit 130, silently
            _say(_interrupted_line())
            sys.exit(STOP.exit_code())
        sys.stdout.flush()
        sys.exit(rc)
    except _usage_errors() as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `probe` alone: its help, as --help shows it
            print(exc.format_message())
            sys.exit(0)
        if type(exc).__name__ == "Abort":
            print("Error: aborted", file=sys.stderr)
            sys.exit(1)
        print(terminal(f"Error: {_usage_message(exc)}"), file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Interrupted as exc:
        _say(str(exc))
        sys.exit(exc.exit_code)
    except ProbeError as exc:
        print(terminal(f"Error: {exc.cli_message()}"), file=sys.stderr)   # names from files: escaped
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        _say(_interrupted_line())
        sys.exit(STOP.exit_code())
    except (_PipeClosed, BrokenPipeError):  # e.g. `probe info run.h5 | head`: a closed pipe ends quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as exc:  # h5py raises OSError for unreadable or corrupted data
        if os_errno(exc) in _ONLY_WRITES_FAIL:   # e.g. stdout redirected to a full disk
            where = exc.filename if getattr(exc, "filename", None) else "the output (stdout)"
            msg = f"{write_cause(exc)} while writing {where}"
        else:
            msg = " ".join(str(exc).split()) or type(exc).__name__
        print(terminal(f"Error: {msg}"), file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # a bug, not bad input: still no traceback unless asked for
        if os.environ.get("PROBE_DEBUG"):
            raise
        print(terminal(f"Error: unexpected {type(exc).__name__}: {exc} (set PROBE_DEBUG=1 for the traceback)"),
              file=sys.stderr)
        sys.exit(1)
