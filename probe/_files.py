"""Files the user names: inputs are read only when they are regular files; outputs fail before any
work when one cannot be written."""
from __future__ import annotations

import os
import stat
import tempfile

from .errors import ProbeError

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(path, mode: int, what: str) -> ProbeError:
    if stat.S_ISDIR(mode):
        return ProbeError(f"{os.fsdecode(path)}: {what} is a directory, not a file")
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    try:
        via = " (through a symbolic link)" if os.path.islink(path) else ""
    except (OSError, ValueError):
        via = ""
    return ProbeError(f"{os.fsdecode(path)}: {what} is {kind}{via}, not a regular file; only regular files are read")


def regular_file(path, what: str = "file") -> None:
    """Raise a one-line ProbeError unless ``path`` is a regular file (a symbolic link to one is fine).

    Decided from ``stat`` alone, the file never opened: opening a FIFO for reading blocks until a
    writer comes, and opening a device can act on it. ``what`` names the file's role in the message
    ("groups file" -> "x.json: groups file is a FIFO (named pipe), not a regular file; ..."). Call it
    before handing a path to a library that opens it itself (h5py, torch.load, safetensors,
    tokenizers); :func:`open_regular` checks and opens in one step."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:
        raise ProbeError(f"{os.fsdecode(path)}: cannot read {what} ({getattr(exc, 'strerror', None) or exc})") \
            from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode, what)


def open_regular(path, mode: str = "r", what: str = "file", **kw):
    """``open(path, mode, **kw)`` for reading, refused (one-line ProbeError) unless ``path`` is a
    regular file. The path is checked with :func:`regular_file` first, then opened non-blocking and
    checked again on the open descriptor, so a file swapped for a FIFO in between cannot block us."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_regular reads only, not mode {mode!r}")
    regular_file(path, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ProbeError(f"{os.fsdecode(path)}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise _not_regular(path, st_mode, what)
        os.set_blocking(fd, True)
        return open(fd, mode, **kw)
    except BaseException:
        try:
            os.close(fd)
        except OSError:     # open() had taken the descriptor and closed it
            pass
        raise


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
