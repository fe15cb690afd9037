"""The one exception type, the one warning type, and how a command line reports them (the stop
signals: :mod:`probe.signals`).

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
import types
import warnings
from contextlib import suppress
from typing import Callable, NoReturn

from . import environment
from .printable import ERRORS as _SHOWN, terminal  # terminal: probe-train's door too (train imports errors)
from .signals import STOP, adopt_parent, say, signal_name, started_blocked, stoppable

EXIT_BAD_INPUT = 2
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


def spell(message: str, spelling: Callable[[str, str | None], str] = _python) -> str:
    """``message`` with its parameter references written by ``spelling`` (Python's, or a flag)."""
    return _REF.sub(lambda m: spelling(m.group(1), m.group(2)), message)


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
        return spell(super().__str__())

    def cli_message(self) -> str:
        """The message with parameters written as the command-line flags that feed them."""
        return spell(super().__str__(), _flag)


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
    warning = ProbeWarning(spell(message))
    warning.flags = spell(message, _flag)   # as a command line shows it (--skip-damaged, not skip_damaged=True)
    warnings.warn(warning, stacklevel=3)


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


def closest(name: str, known) -> str | None:
    """The one of ``known`` closest to a mistyped ``name`` (difflib's ratio 0.6 or more), or None."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return close[0] if close else None


def did_you_mean(name: str, known) -> str:
    """``"; did you mean 'NAME'?"`` with :func:`closest`, else ``""``: the tail of an ``unknown ...
    'name'`` message, before its list."""
    match = closest(name, known)
    return f"; did you mean '{match}'?" if match else ""


def unknown(what: str, name: str, known, listed: str = "known") -> ProbeError:
    """The error for a name that is none of ``known``: ``unknown preset 'quik'; did you mean 'quick'?
    (known: paper1, quick, ...)``; ``listed`` words the list (``known``, ``probe batch's``)."""
    return ProbeError(f"unknown {what} '{name}'{did_you_mean(name, known)} ({listed}: {', '.join(known)})")


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


def out_of_memory(exc: BaseException) -> str | None:
    """What an allocation that failed asked for, in one line (None: ``exc`` is not that): Python's
    ``MemoryError``, torch's CPU allocator (a ``RuntimeError``) and CUDA's ``OutOfMemoryError``."""
    text = " ".join(str(exc).split())
    if not (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text):
        return None
    cpu = re.search(r"allocate (\d+) bytes", text)
    cuda = re.search(r"[Tt]ried to allocate ([\d.]+ [KMGT]iB)", text)
    asked = f"{int(cpu[1]) / 2**30:,.1f} GiB" if cpu else cuda[1] if cuda else None
    return (f"out of memory{f' ({asked} asked at once)' if asked else ''}: more than this machine can hold; a "
            "smaller configuration (a narrower or shallower model, a smaller batch) or fewer jobs at once needs less")


def _show_warning(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning):
    if issubclass(category, ProbeWarning):
        # it may quote a file's text; a parameter it names is the flag that feeds it, as in an Error line
        print(terminal(f"warning: {getattr(message, 'flags', message)}"), file=sys.stderr)
    else:   # a library's warning may quote a file too (its own lines: where it was raised)
        _default(terminal(str(message)), category, filename, lineno, file, line)


class Interrupted(Exception):
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP), handled: the work stopped at a safe point; the message
    says what was kept. ``signum`` is the signal (default: the one :data:`probe.signals.STOP` caught,
    else SIGINT); a command line exits with ``exit_code``, 128 + the signal's number (130, 143, 129),
    as a shell reports a process a signal ended. (Not a KeyboardInterrupt: command-line libraries
    would swallow it into a silent exit 130.)"""

    def __init__(self, *args, signum: int | None = None):
        super().__init__(*args)
        self.signum = int(signum or STOP.asked or signal.SIGINT)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        text = spell(super().__str__(), _flag)
        if self.signum != signal.SIGINT and text.startswith("Interrupted"):   # "Interrupted by SIGTERM: ..."
            text = f"Interrupted by {signal_name(self.signum)}{text[len('Interrupted'):]}"
        return text


def _usage_errors() -> tuple[type, ...]:
    """Click's usage-error class and its Abort (a KeyboardInterrupt or EOFError inside a command, which
    Click re-raises as Abort, a RuntimeError) if Click is imported (30 ms to import; it can only raise
    once something imported it). Called in the ``except`` clause, so only when an exception is on its way out."""
    module = sys.modules.get("click.exceptions")
    return () if module is None else (module.ClickException, module.Abort)


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
    """Call ``app``: a Typer app or a Click command runs without Click's own error printing, so usage
    errors reach us; a plain function is called as it is."""
    if isinstance(app, types.FunctionType):
        app()
        return 0
    rc = app(standalone_mode=False, **kw)
    return rc if isinstance(rc, int) else 0


def _printable_streams() -> None:
    """stdout and stderr write what their encoding lacks as ``\\xNN`` (:mod:`probe.printable`) instead of
    failing: a file name that is not UTF-8 prints under any locale and ``PYTHONIOENCODING``, and what
    reaches a pipe or a file is valid in the stream's encoding (no raw undecodable bytes)."""
    for stream in (sys.stdout, sys.stderr):
        stream = getattr(stream, "_raw", stream)
        with suppress(AttributeError, ValueError, OSError):   # not a text stream of io (a test's capture)
            stream.reconfigure(errors=_SHOWN)


def run_cli(app, **kw) -> None:
    """Run a command-line entry point (a Typer app or a function): bad input ends in one ``Error: ...``
    line on stderr and exit 2; a stop signal in one line saying what was kept and exit 128 + the
    signal's number (Ctrl-C 130, SIGTERM 143, SIGHUP 129). A child of the toolkit, started with the stop
    signals blocked (:func:`probe.signals.signals_blocked`), runs whole inside
    :func:`~probe.signals.stoppable`: a stop asked while it starts is heard at its first safe point."""
    if started_blocked():
        with stoppable():
            _run_cli(app, **kw)
    else:
        _run_cli(app, **kw)


def _run_cli(app, **kw) -> None:
    warnings.showwarning = _show_warning
    _printable_streams()
    if not isinstance(sys.stdout, _Stdout):
        sys.stdout = _Stdout(sys.stdout)
    STOP.stop_outside()
    try:
        adopt_parent()   # a child of the toolkit: stop when the process that started it ends
        rc = _invoke(app, **kw)
        sys.stdout.flush()
        sys.exit(rc)
    except _usage_errors() as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `probe` alone: its help, as --help shows it
            print(exc.format_message())
            sys.exit(0)
        if type(exc).__name__ == "Abort":
            if isinstance(exc.__cause__, KeyboardInterrupt):   # a second Ctrl-C (signals.STOP raises it)
                say(STOP.line())
                sys.exit(STOP.exit_code())
            print("Error: aborted", file=sys.stderr)
            sys.exit(1)
        print(terminal(f"Error: {_usage_message(exc)}"), file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Interrupted as exc:
        say(str(exc))
        sys.exit(exc.exit_code)
    except ProbeError as exc:
        print(terminal(f"Error: {exc.cli_message()}"), file=sys.stderr)   # names from files: escaped
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        say(STOP.line())
        sys.exit(STOP.exit_code())
    except (_PipeClosed, BrokenPipeError):  # e.g. `probe info run.h5 | head`: a closed pipe ends quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as exc:  # h5py raises OSError for unreadable or corrupted data
        if os_errno(exc) in _ONLY_WRITES_FAIL:   # e.g. stdout redirected to a full disk
            msg = f"{write_cause(exc)} while writing {exc.filename or 'the output (stdout)'}"
        else:
            msg = " ".join(str(exc).split()) or type(exc).__name__
        print(terminal(f"Error: {msg}"), file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # a bug, not bad input: still no traceback unless asked for
        if out_of_memory(exc):   # a configuration too big for the machine: the user's to change
            print(terminal(f"Error: {out_of_memory(exc)}"), file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        if environment.debug():
            raise
        print(terminal(f"Error: unexpected {type(exc).__name__}: {exc} (set PROBE_DEBUG=1 for the traceback)"),
              file=sys.stderr)
        sys.exit(1)
    finally:
        STOP.late()
