"""Output files: fail before any work when one cannot be written."""
from __future__ import annotations

import os
import tempfile

from .errors import ProbeError


def writable(path: str, what: str) -> None:
    """Raise a one-line ProbeError unless ``path`` can be created: its folder exists and takes a new
    file (tried with a temporary one, removed at once), and ``path`` is not a folder."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ProbeError(f"cannot write {what} {path}: directory {parent} does not exist")
    if os.path.isdir(path):
        raise ProbeError(f"cannot write {what} {path}: it is a directory")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise ProbeError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
