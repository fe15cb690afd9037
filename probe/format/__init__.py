"""THE FILE: the snapshot format, written by the trainer and read by every probe.

:mod:`.snapshot` holds :class:`Run` (read) and :class:`Writer` (append under SWMR);
:mod:`.validate` checks a file against ``schemas/snapshot-v1.json``. Nothing here imports
anything of the package but :mod:`probe.errors` and :mod:`schemas`.
"""
from .snapshot import P, Run, Writer, is_snapshot_file, last_step, read_rows
from .validate import validate

__all__ = ["P", "Run", "Writer", "is_snapshot_file", "last_step", "read_rows", "validate"]
