"""Shared CLI plumbing: one-line errors, exit codes."""
from __future__ import annotations

import os
import sys
from typing import NoReturn

from .errors import ProbeError

EXIT_BAD_INPUT = 2


def fail(message: str) -> NoReturn:
    raise ProbeError(message)


def run_cli(app) -> None:
    """Run a Typer app; bad input ends in one ``Error: ...`` line on stderr and exit code 2."""
    try:
        app()
    except ProbeError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        sys.exit(130)
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
