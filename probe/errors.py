"""The one exception type, the one warning type, and how a command line reports them.

Library code names the Python parameter a bad value came from with :func:`param`;
``str(error)`` shows it as Python spells it (``step='latest'``), a command line as its flag
(``--step latest``), so neither reader is told about an option they never passed.
"""
from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Callable, NoReturn

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
    return f"{name}={value}" if re.fullmatch(r"[-+.\deE]+|None|True|False", value) else f"{name}={value!r}"


def _flag(name: str, value: str | None) -> str:
    flag = "--" + name.replace("_", "-")
    return flag if value is None else f"{flag} {value}"


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


def _show_warning(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning):
    if issubclass(category, ProbeWarning):
        print(f"warning: {message}", file=sys.stderr)
    else:
        _default(message, category, filename, lineno, file, line)


def run_cli(app) -> None:
    """Run a command-line entry point; bad input ends in one ``Error: ...`` line on stderr and exit 2."""
    warnings.showwarning = _show_warning
    try:
        app()
    except ProbeError as exc:
        print(f"Error: {exc.cli_message()}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # e.g. `probe info run.h5 | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as exc:  # h5py raises OSError for unreadable or corrupted data
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"Error: {msg}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # a bug, not bad input: still no traceback unless asked for
        if os.environ.get("PROBE_DEBUG"):
            raise
        print(f"Error: unexpected {type(exc).__name__}: {exc} (set PROBE_DEBUG=1 for the traceback)",
              file=sys.stderr)
        sys.exit(1)
