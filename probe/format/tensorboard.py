"""TensorBoard event files: a run's logged numbers and its probes' numbers as scalars, one TensorBoard
run per folder (``probe-train --tensorboard DIR`` writes ``DIR/<run>``; ``probe batch --tensorboard DIR``
a folder per run it reads).

The tags, each a series over the training step:

=========================  =====================================================================
``loss/SPLIT``             evaluation loss of each split, at every snapshot (``acc/SPLIT`` likewise)
``train/loss``             mean training-batch loss since the previous snapshot, at every snapshot
``train/batch_loss``       training-batch loss of every update (step t: the update from t to t + 1)
``train/lr``               learning rate of every update
``PROBE/METRIC[KEY]``      a probe's numbers (``similarity/distance_corr``, ``pca/order_pc1[reasoning]``):
                           its rows in ``probe batch``'s table, ``[KEY]`` where the row has a key
=========================  =====================================================================

The files hold the scalars as ``torch.utils.tensorboard``'s ``SummaryWriter.add_scalar`` writes them
(``simple_value``), through the ``tensorboard`` package's own ``EventFileWriter``, the writer
SummaryWriter writes through: importing it takes 0.4 s, ``torch.utils.tensorboard`` 2.6 s (torch), which
``probe batch`` on weights never imports. The package is the optional extra
``gamma-probe[tensorboard]``; :func:`require` says so in one line where it is missing.

A folder only grows forward: :class:`Events` writes a point of a tag only after the last step that tag
holds in the folder (in any of its event files), so writing the same numbers again adds nothing (a
resumed run, a batch run twice). TensorBoard reads a step that goes back as a restart and drops the
points after it; a point before a tag's last step that the folder does not hold is therefore left out,
and counted (:attr:`Events.left_out`). Non-finite values are left out too (no point: the train loss at step 0).
"""
from __future__ import annotations

import glob
import importlib
import math
import os
import time
from typing import Callable, Iterable, Mapping

from ..files import writable_folder
from ..errors import ProbeError, param, write_cause

EXTRA = "pip install 'gamma-probe[tensorboard]'"
_PATTERN = "events.out.tfevents.*"


def require(name: str = "tensorboard") -> None:
    """Raise a one-line ProbeError (naming parameter ``name``) unless the tensorboard package can be
    imported: before any work starts, not after a run has trained."""
    try:
        importlib.import_module("tensorboard.summary.writer.event_file_writer")   # the writer the events need
    except ImportError:
        raise ProbeError(f"{param(name)} needs the tensorboard package: {EXTRA}") from None
    except Exception as exc:   # installed but broken (a protobuf it does not work with)
        raise ProbeError(f"{param(name)}: the tensorboard package does not load ({type(exc).__name__}: {exc})") \
            from None


def prepare(folder: str | os.PathLike, name: str = "tensorboard") -> str:
    """Make ``folder`` (and its parents) if needed and check that it takes new files; a one-line
    ProbeError naming parameter ``name`` where it cannot. Returns the folder."""
    folder = os.fspath(folder)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ProbeError(f"{param(name, folder)}: not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise ProbeError(f"{param(name, folder)}: cannot make the folder ({write_cause(exc)})") from None
    writable_folder(folder, "TensorBoard events")
    return folder


def event_files(folder: str | os.PathLike) -> list[str]:
    """The event files directly in ``folder`` (one TensorBoard run), in the order TensorBoard reads them."""
    return sorted(p for p in glob.glob(os.path.join(glob.escape(os.fspath(folder)), _PATTERN)) if os.path.isfile(p))


def remove_events(folder: str | os.PathLike) -> None:
    """Remove the event files of the run in ``folder`` (a run started again from scratch)."""
    for p in event_files(folder):
        try:
            os.unlink(p)
        except OSError as exc:
            raise ProbeError(f"cannot remove {p}: {write_cause(exc)}") from None


def held(folder: str | os.PathLike) -> dict[str, set[int]]:
    """Tag -> the steps it holds in ``folder``'s event files (a file cut short by a kill is read up to its
    last whole record)."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    steps: dict[str, set[int]] = {}
    for path in event_files(folder):
        try:
            for event in LegacyEventFileLoader(path).Load():
                for v in event.summary.value:
                    steps.setdefault(v.tag, set()).add(int(event.step))
        except Exception as exc:   # not an event file after all, unreadable
            raise ProbeError(f"{path}: cannot read it as a TensorBoard event file ({type(exc).__name__}: {exc})") \
                from None
    return steps


class Events:
    """The event files of one TensorBoard run (``folder``): :meth:`add` writes scalars after the last step
    each tag already holds there. The file is made at the first point written; :meth:`close` (or the
    ``with`` block) writes everything out.

    >>> with Events("tb/run") as ev:
    ...     ev.add(100, {"loss/mem": 0.31, "acc/mem": 0.93})
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = os.fspath(folder)
        self.written = 0      # points written
        self.left_out = 0     # points before their tag's last step, not held (see the module's doc)
        self._held = held(self.folder) if os.path.isdir(self.folder) else {}
        self._last = {tag: max(steps) for tag, steps in self._held.items()}
        self._writer = None

    def add(self, step: int, scalars: Mapping[str, float]) -> None:
        """One point per tag at ``step``; non-finite values and points not after the tag's last step are
        left out (those the folder does not hold counted in :attr:`left_out`)."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        step = int(step)
        values = []
        for tag, value in scalars.items():
            value = float(value)
            if not math.isfinite(value):
                continue
            if step <= self._last.get(tag, -1):
                self.left_out += step not in self._held.get(tag, ())
                continue
            values.append(Summary.Value(tag=tag, simple_value=value))
            self._last[tag] = step
            self._held.setdefault(tag, set()).add(step)
        if values:
            self._file().add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=values)))
            self.written += len(values)

    def _file(self):
        if self._writer is None:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter

            try:
                os.makedirs(self.folder, exist_ok=True)
                self._writer = EventFileWriter(self.folder)
            except OSError as exc:
                raise ProbeError(f"cannot write TensorBoard events into {self.folder}: {write_cause(exc)}") from None
        return self._writer

    def flush(self) -> None:
        """Everything added so far on disk (TensorBoard shows it at its next look)."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> "Events":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def add_snapshot(events: Events, step: int, metrics: Mapping[str, Mapping[str, float]], train_loss: float,
                 losses: Iterable[float] = (), lr: Callable[[int], float] | None = None) -> None:
    """One snapshot's numbers: first the batch loss (and learning rate, ``lr(t)``) of each update before
    it, ``losses`` being those of the updates ``step - len(losses)`` to ``step - 1``; then the snapshot's
    metrics (``METRIC/SPLIT`` of each split's loss and accuracy) and mean train loss at ``step``."""
    losses = [float(x) for x in losses]
    first = int(step) - len(losses)
    for t, loss in enumerate(losses, first):
        events.add(t, {"train/batch_loss": loss, **({"train/lr": lr(t)} if lr is not None else {})})
    scalars = {f"{metric}/{split}": value for split, m in metrics.items() for metric, value in m.items()}
    events.add(step, {**scalars, "train/loss": train_loss})


def add_run(events: Events, path: str | os.PathLike, lr: Callable[[int], float] | None = None) -> None:
    """The numbers a run file holds, as the trainer would have written them (the learning rate as
    ``lr(t)`` says: the file stores none): what a run resumed with ``--tensorboard`` adds to a folder
    that lacks them (the folder keeps what it has)."""
    import numpy as np

    from .run import Run

    with Run(path) as run:
        steps = [int(s) for s in run.steps]
        metrics = run.metrics()
        train_loss = np.asarray(run.dataset("train_loss")[:len(steps)])
        losses = run.step_losses() if run.has("step_loss") else None
    prev = 0
    for i, step in enumerate(steps):
        update = [] if losses is None else losses[prev:step]
        add_snapshot(events, step, {s: {m: v[i] for m, v in ms.items()} for s, ms in metrics.items()},
                     float(train_loss[i]), update, lr)
        prev = step


def probe_tag(probe: str, metric: str, key: str = "") -> str:
    """``PROBE/METRIC`` or ``PROBE/METRIC[KEY]``: the name a probe's summary gives the number, under the probe."""
    return f"{probe}/{metric}[{key}]" if key not in ("", None) else f"{probe}/{metric}"
