"""THE FILE: the snapshot format, written by the trainer and read by every probe.

A run is one HDF5 file (see ``schemas/snapshot-v1.json``):

* ``run/``        what never changes: token groups, P^s, the probe batch.
* ``snapshots/``  time-first datasets, axis 0 = snapshot index, appended under
  HDF5 SWMR so readers can follow a live run. ``snapshots/step`` is appended
  last, so its length is the number of *complete* snapshots; extra rows in
  other datasets belong to an unfinished snapshot and are ignored.
* ``resume/``     two ping-pong slots of optimizer/RNG state; a slot is marked
  invalid while it is rewritten, so a kill at any moment leaves one good slot.

Files are written with ``libver=("v110", "v110")`` so HDF5 1.10 tools read them.

One module per concept: :mod:`._h5` opens a file (header, SWMR, damage) and holds the schema's
names; :mod:`._checks` the checks against the schema; :mod:`.run` the reader (:class:`Run`);
:mod:`.tensors` budgeted reads of a time-first tensor (a checkpoint's too); :mod:`.writer` the
writer (:class:`Writer`) over :mod:`._write` (new files, refused writes);
:mod:`.validate` every finding; :mod:`.sweep` the sweep manifest; :mod:`.tensorboard` TensorBoard
event files (the optional tensorboard package, imported only there). Nothing here imports anything
of the package but :mod:`probe.errors` and :mod:`probe.files`, and :mod:`schemas`.
"""
from ._h5 import P, is_snapshot_file
from .run import Run, last_step
from .tensors import read_rows
from .validate import validate
from .writer import Writer

__all__ = ["P", "Run", "Writer", "is_snapshot_file", "last_step", "read_rows", "validate"]
