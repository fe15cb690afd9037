"""The one exception type, the one warning type, and how a command line reports them.

Library code names the Python parameter a bad value came from with :func:`param`;
``str(error)`` shows it as Python spells it (``step='latest'``), a command line as its flag
(``--step latest``), so neither reader is told about an option they never passed.
"""
from __future__ import annotations

import errno
import os
import re
import sys
import warnings
from typing import Callable, NoReturn

from ._text import ERRORS as _SHOWN

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
    """Bad input or an unusable file; the message is shown to the user as is."""

    def __str__(self) -> str:
        return render(super().__str__())

    def cli_message(self) -> str:
        """The message with parameters written as the command-line flags that feed them."""
        return render(super().__str__(), _flag)


class ProbeWarning(UserWarning):
    """Something the user should know about a result that is still given (a zero vector, a
    word left out); a command line prints it as one ``warning: ...`` line on stderr."""


def warn(message: str) -> None:
    warnings.warn(render(message), ProbeWarning, stacklevel=3)


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
        print(f"warning: {message}", file=sys.stderr)
    else:
        _default(message, category, filename, lineno, file, line)


class Interrupted(Exception):
    """Ctrl-C, handled: the work stopped at a safe point; the message says what was kept.
    (Not a KeyboardInterrupt: command-line libraries would swallow it into a silent exit 130.)"""

    def __str__(self) -> str:
        return render(super().__str__(), _flag)


class _Sigint:
    """Ctrl-C as a flag: inside ``with SIGINT.caught():`` a SIGINT sets ``asked`` instead of raising
    KeyboardInterrupt wherever the interpreter happens to be (inside an HDF5 write, a torch import);
    long work reads the flag at its safe points and stops there. Main thread only (Python's rule)."""

    def __init__(self):
        self.asked = False
        self._depth = 0
        self._old = None

    def _handle(self, signum, frame):
        if self.asked:  # a second Ctrl-C: the user will not wait for the safe point
            raise KeyboardInterrupt
        self.asked = True

    def caught(self):
        import contextlib
        import signal
        import threading

        @contextlib.contextmanager
        def block():
            main = threading.current_thread() is threading.main_thread()
            if main and self._depth == 0:
                self._old = signal.signal(signal.SIGINT, self._handle)
            self._depth += main
            try:
                yield self
            finally:
                self._depth -= main
                if main and self._depth == 0:
                    signal.signal(signal.SIGINT, self._old)
                    self.asked = False

        return block()


SIGINT = _Sigint()


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


def run_cli(app, **kw) -> None:
    """Run a command-line entry point (a Typer app or a function): bad input ends in one ``Error: ...``
    line on stderr and exit 2, Ctrl-C in one line saying what was kept and exit 130."""
    warnings.showwarning = _show_warning
    _printable_streams()
    if not isinstance(sys.stdout, _Stdout):
        sys.stdout = _Stdout(sys.stdout)
    try:
        rc = _invoke(app, **kw)
        if rc == EXIT_INTERRUPTED:  # Typer turns a KeyboardInterrupt it catches into exit 130, silently
            print("Error: interrupted", file=sys.stderr)
        sys.stdout.flush()
        sys.exit(rc)
    except _usage_errors() as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `probe` alone: its help, as --help shows it
            print(exc.format_message())
            sys.exit(0)
        if type(exc).__name__ == "Abort":
            print("Error: aborted", file=sys.stderr)
            sys.exit(1)
        print(f"Error: {_usage_message(exc)}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Interrupted as exc:
        print(str(exc), file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except ProbeError as exc:
        print(f"Error: {exc.cli_message()}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except (_PipeClosed, BrokenPipeError):  # e.g. `probe info run.h5 | head`: a closed pipe ends quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as exc:  # h5py raises OSError for unreadable or corrupted data
        if os_errno(exc) in _ONLY_WRITES_FAIL:   # e.g. stdout redirected to a full disk
            where = exc.filename if getattr(exc, "filename", None) else "the output (stdout)"
            msg = f"{write_cause(exc)} while writing {where}"
        else:
            msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"Error: {msg}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # a bug, not bad input: still no traceback unless asked for
        if os.environ.get("PROBE_DEBUG"):
            raise
        print(f"Error: unexpected {type(exc).__name__}: {exc} (set PROBE_DEBUG=1 for the traceback)",
              file=sys.stderr)
        sys.exit(1)
