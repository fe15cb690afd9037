"""Writing a run: :class:`Writer` appends snapshots under HDF5 SWMR, so readers can follow a live
run, and keeps the resume state in two ping-pong slots."""
from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
from datetime import datetime, timezone
from functools import partial
from typing import Iterable, Mapping

import h5py
import numpy as np

from probe_schemas import path_of, version_tuple

from ..errors import ProbeError, write_cause
from ._h5 import (
    FORMAT, METRICS, P, PARAMS_GROUP, RESUME_GROUP, RUN_GROUP, SCHEMA_VERSION, SNAPSHOTS_GROUP, WEIGHTS_GROUP, chunks_for,
    toolkit_version, datasets
)
from ._checks import CHECKSUMS_SINCE, dataset_findings, meta_findings, refuse, schema_entry
from .run import Dataset, Run
from ._write import (
    WriteFailed, abandon_file, new_dataset, file_size_limit, new_file, open_then_replace, snapshots_kept, temp_names,
    vfd_name, with_metadata
)

# Whether new files carry checksums (schema 1.4). Only bench/bench_checksum.py turns it off, to time
# training without them: the files it then makes claim a schema they do not follow.
CHECKSUMS = True


class Writer:
    """Appends snapshots to a run file under SWMR. Create with :meth:`create` or :meth:`resume`.

    A write the file system refuses (full, read-only, a size limit) raises :class:`WriteFailed` and
    leaves the file as a killed writer would: every snapshot committed before stays readable and
    resumable; the writer is closed.
    """

    def __init__(self, f: h5py.File, path: str):
        self._f = f
        self.path = path
        self._n = int(f[P["step"]].shape[0])
        self._params = {name: f[f"{PARAMS_GROUP}/{name}"] for name, _ in datasets(f[PARAMS_GROUP])}
        splits = json.loads(f.attrs["task"]).get("splits", [])
        self._metric_paths = {path_of("metric", split=s, metric=m) for s in splits for m in METRICS}
        self.vfd_name = vfd_name(f)
        rows = {ds.id: ds for _, ds in datasets(f[SNAPSHOTS_GROUP])}   # a dataset that hard links name twice: once
        self._row_bytes = sum(int(np.prod(ds.shape[1:], dtype=np.int64)) * ds.dtype.itemsize for ds in rows.values())

    @property
    def n_snapshots(self) -> int:
        return self._n

    @staticmethod
    def remove_stale(path: str | os.PathLike) -> None:
        """Remove the temporary files a killed writer of ``path`` left beside it (and ``.creating`` /
        ``.resuming``, the fixed names of earlier versions). Only while holding the file's lock."""
        path = os.fspath(path)
        for stale in glob.glob(temp_names(path)) + [path + ".creating", path + ".resuming"]:
            with contextlib.suppress(OSError):
                os.unlink(stale)

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        *,
        config: Mapping,
        task: Mapping,
        dims: Mapping[str, int],
        groups: Mapping[str, Iterable[int]],
        run_arrays: Mapping[str, np.ndarray],
        params: Mapping[str, tuple[int, ...]],
        roles: Mapping[str, str],
        attention_shape: tuple[int, ...] | None,
        resume_tensors: Mapping[str, tuple[tuple[int, ...], str]],
        environment: Mapping | None = None,
        series: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
        recorded: Iterable[str] = (),
        sparse_log: bool = False,
    ) -> "Writer":
        """Create a run file with every dataset it will ever need, then open it for SWMR appends.

        ``run_arrays`` maps schema entries (``label_dist``, ``probe_tokens``, ...) to arrays;
        ``roles`` maps canonical weight names (``token_embedding``, ``layer0/W_Q``) to
        parameter names; they become hard links, so nothing is stored twice. ``series`` maps
        further time-first schema entries (``norm_ms``, ``token_loss``, ...) to their per-snapshot
        shape and dtype; :meth:`append` then takes their values in ``extra``. ``recorded`` names further
        metrics of each snapshot (a :class:`probe.Recorder`'s learning rate ...); ``sparse_log``: the step
        log says which steps' losses were given (``step_logged``: a loop that logs every few steps).
        The file is built under a temporary name and renamed into place, so a kill
        during creation never leaves a half-made file at ``path``. Every dataset that holds data
        carries a checksum (schema 1.4: :func:`._write.new_dataset`).
        """
        path = os.fspath(path)
        _weights_fit(path, dims, params, roles)
        kept = "the old file is unchanged" if os.path.exists(path) else "no file was made"
        with new_file(path, "creating it", kept) as (f, tmp):
            f.attrs["format"] = FORMAT
            f.attrs["schema_version"] = SCHEMA_VERSION
            f.attrs["package_version"] = toolkit_version()
            # to the microsecond: a run made anew (--overwrite) within the second of the last is still another run
            f.attrs["created"] = datetime.now(timezone.utc).isoformat(timespec="microseconds")
            for key, value in (("config", config), ("task", task), ("dims", dims), ("environment", environment)):
                if value is not None:
                    f.attrs[key] = json.dumps(dict(value), sort_keys=True)
            new = partial(new_dataset, f, checksums=CHECKSUMS)
            for name, ids in groups.items():
                new(path_of("token_group", group=name), np.asarray(list(ids), dtype=np.int64))
            for entry, arr in run_arrays.items():
                if np.asarray(arr).dtype.kind in "OU":  # text: variable-length UTF-8 (HDF5 filters none)
                    f.create_dataset(path_of(entry), data=[str(x) for x in arr], dtype=h5py.string_dtype())
                else:
                    new(path_of(entry), np.asarray(arr))

            def time_first(p: str, row_shape=(), dtype="f8"):
                new(p, shape=(0, *row_shape), maxshape=(None, *row_shape), dtype=dtype,
                    chunks=chunks_for(row_shape, np.dtype(dtype).itemsize))

            time_first(P["step"], dtype="i8")
            for entry in ("epoch", "time", "train_loss"):
                time_first(P[entry])
            for split in task["splits"]:
                for metric in METRICS:
                    time_first(path_of("metric", split=split, metric=metric))
            for name, shape in params.items():
                time_first(path_of("param", name=name), shape, "f4")
            for role, pname in roles.items():
                f[f"{WEIGHTS_GROUP}/{role}"] = f[path_of("param", name=pname)]
            if attention_shape is not None:
                time_first(P["attention"], attention_shape, "f4")
            for entry, (shape, dtype) in (series or {}).items():
                time_first(P[entry], shape, dtype)
            for name in recorded:
                time_first(path_of("recorded_metric", name=name))
            time_first(P["step_loss"])
            if sparse_log:
                time_first(P["step_logged"], dtype="u1")
            if resume_tensors:
                new(P["resume_step"], np.full(2, -1, dtype=np.int64))
                for slot in (0, 1):
                    for name, (shape, dtype) in resume_tensors.items():
                        new(path_of("resume_tensor", slot=slot, name=name), shape=tuple(shape), dtype=dtype)
        return cls(open_then_replace(tmp, path, "creating it", kept, 0), path)

    def append(
        self,
        *,
        step: int,
        epoch: float,
        time: float,
        train_loss: float,
        params: Mapping[str, np.ndarray],
        metrics: Mapping[str, Mapping[str, float]],
        attention: np.ndarray | None = None,
        extra: Mapping[str, np.ndarray] | None = None,
        step_losses: np.ndarray | None = None,
        step_logged: np.ndarray | None = None,
        recorded: Mapping[str, float] | None = None,
    ) -> None:
        """Append one snapshot; it becomes visible to readers only when complete. ``extra``: values of
        the ``series`` entries given at creation; ``step_losses``: the loss of every step since the
        previous snapshot (appended to the step log), ``step_logged`` whether each was given (a file
        created with ``sparse_log``; default: all); ``recorded``: the ``recorded`` metrics."""
        f, n = self._f, self._n
        missing = set(self._params) - set(params)
        if missing:
            raise ValueError(f"snapshot lacks parameters {sorted(missing)}")
        per_step = 9 if P["step_logged"] in f else 8   # a float64 loss (and a uint8 mark) a step
        self._within_limit(self._row_bytes + per_step * len(step_losses if step_losses is not None else ()),
                           f"snapshot at step {step}")
        values: dict[str, object] = {P["epoch"]: epoch, P["time"]: time, P["train_loss"]: train_loss}
        values.update({path_of("metric", split=s, metric=m): v for s, ms in metrics.items() for m, v in ms.items()})
        for p in self._metric_paths - values.keys():   # a metric not given (a Recorder's loop gave no accuracy)
            values[p] = np.nan
        values.update({path_of("param", name=name): arr for name, arr in params.items()})
        if attention is not None:
            values[P["attention"]] = attention
        values.update({P[entry]: v for entry, v in (extra or {}).items()})
        values.update({path_of("recorded_metric", name=k): v for k, v in (recorded or {}).items()})
        try:
            if step_losses is not None and len(step_losses) and P["step_loss"] in f:
                log = f[P["step_loss"]]
                at = log.shape[0]
                log.resize(at + len(step_losses), axis=0)
                log[at:] = np.asarray(step_losses, dtype=np.float64)
                log.flush()
                if P["step_logged"] in f:   # (written before the log's rows count, as the log before the step)
                    given = f[P["step_logged"]]
                    given.resize(at + len(step_losses), axis=0)
                    given[at:] = 1 if step_logged is None else np.asarray(step_logged, dtype=np.uint8)
                    given.flush()
            values[P["step"]] = step   # the commit, last: only now does the snapshot count grow
            for p, v in values.items():
                ds = f[p]
                ds.resize(n + 1, axis=0)
                ds[n] = v
                ds.flush()
            self._n = n + 1
            f.flush()
        except (OSError, RuntimeError) as exc:
            raise self._failed(exc, f"snapshot at step {step}") from None

    @property
    def logged_steps(self) -> int:
        """The rows of the step log (``step_loss``): the steps whose training loss the file holds."""
        return int(self._f[P["step_loss"]].shape[0]) if P["step_loss"] in self._f else 0

    def last(self, entry: str):
        """Value of time-first schema entry ``entry`` at the newest complete snapshot (None if none)."""
        return self._f[P[entry]][self._n - 1] if self._n else None

    def save_resume(self, step: int, tensors: Mapping[str, np.ndarray]) -> None:
        """Store the state needed to continue from ``step`` in the older of the two slots."""
        f = self._f
        marks = f[P["resume_step"]]
        held = marks[...]
        slot = int(np.argmin(held))
        unallocated = [ds for _, ds in datasets(f[f"{RESUME_GROUP}/slot{slot}"]) if ds.id.get_storage_size() == 0]
        self._within_limit(sum(ds.nbytes for ds in unallocated), f"resume state at step {step}")
        try:
            held[slot] = -1
            marks[...] = held
            marks.flush()
            for name, arr in tensors.items():
                ds = f[path_of("resume_tensor", slot=slot, name=name)]
                ds[...] = arr
                ds.flush()
            held[slot] = step
            marks[...] = held
            marks.flush()
            f.flush()
        except (OSError, RuntimeError) as exc:
            raise self._failed(exc, f"resume state at step {step}") from None

    def _within_limit(self, nbytes: int, doing: str) -> None:
        """Stop before a write that would pass this process's file-size limit (``ulimit -f``): that
        write would fail, and with a hard limit even a failed write cannot be closed safely (see
        :func:`_scratch`). The limit is known beforehand, unlike the free space of a disk; the
        file, closed normally, keeps every snapshot before."""
        limit = file_size_limit()
        if limit is None or int(self._f.id.get_filesize()) + with_metadata(nbytes) <= limit:
            return
        self.close()
        raise WriteFailed(f"{write_cause(OSError(errno.EFBIG, ''))} while writing {self.path} ({doing}: the "
                          f"file would grow past this process's limit of {limit} bytes); {snapshots_kept(self._n)}", self._n)

    def _failed(self, exc: BaseException, doing: str) -> WriteFailed:
        """Close the file without another write (see :func:`abandon_file`) and say what failed and what is kept."""
        abandon_file(self._f, self.vfd_name)
        return WriteFailed(f"{write_cause(exc)} while writing {self.path} ({doing}); {snapshots_kept(self._n)}",
                           self._n)

    def close(self) -> None:
        if self._f.id.valid:
            try:
                self._f.flush()   # a full disk fails here, leaving the file whole for abandon_file; in close() it would not
                self._f.close()
            except (OSError, RuntimeError) as exc:
                raise self._failed(exc, "closing it") from None

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @classmethod
    def resume(cls, path: str | os.PathLike, config: Mapping | None = None, environment: Mapping | None = None
               ) -> tuple["Writer", int, dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Reopen a run for appending from its newest resumable snapshot.

        Returns ``(writer, step, resume_tensors, params_at_step)``. The file (possibly
        left by a killed writer, which HDF5 then refuses to reopen for writing) is
        copied up to that snapshot into a fresh file that atomically replaces it;
        snapshots after it are dropped, and an uninterrupted run would have written
        them identically. Only committed rows and the resumed slot are read: a killed
        writer may have left the rows or slot it was writing unreadable. Each row read is
        checked against its checksum (a damaged one stops the resume, the file unchanged), and
        the copy keeps the file's schema: checksums if it had them. ``config`` replaces
        the stored configuration (a resume may change the number of steps).
        """
        def resumed(run: Run) -> tuple[int, int, int]:
            f = run.h5
            if P["resume_step"] not in f:
                raise ProbeError(f"{path}: holds no resume state")
            held = np.asarray(f[P["resume_step"]][...])
            steps = run.steps
            slot = int(np.argmax(held))
            step = int(held[slot])
            if step < 0 or step not in steps:
                raise ProbeError(f"{path}: no complete resume state (the run was stopped before its first "
                                 "snapshot finished)")
            return int(np.flatnonzero(steps == step)[0]) + 1, step, slot

        writer, keep, step, slot = cls._rewrite(path, resumed, config, environment)
        state = {name: np.asarray(ds[...]) for name, ds in datasets(writer._f[f"{RESUME_GROUP}/slot{slot}"])}
        params = {name: np.asarray(ds[keep - 1]) for name, ds in writer._params.items()}
        return writer, step, state, params

    @classmethod
    def reopen(cls, path: str | os.PathLike, environment: Mapping | None = None, upto: int | None = None
               ) -> tuple["Writer", int | None]:
        """Reopen a run for appending after its newest complete snapshot, every complete snapshot kept
        (a file with no resume state: a :class:`probe.Recorder`'s after its loop restarted). Copied, as
        :meth:`resume` does, so that a file a killed writer left is whole again. ``upto``: keep only the
        snapshots at or before this step, and the step log up to it (a loop resumed from a checkpoint
        older than the file's newest snapshot: what comes after is trained again).

        Returns ``(writer, step)``: the step of the newest snapshot kept (None when it keeps none)."""
        def every(run: Run) -> tuple[int, int | None, None, int | None]:
            steps = run.steps if upto is None else run.steps[run.steps <= upto]
            last = int(steps[-1]) if len(steps) else None
            # the log's rows of the steps before the next snapshot's: row t is step t, rows past the
            # newest snapshot's step belong to no snapshot (a writer killed between the two)
            rows = None if upto is None else (0 if last is None else last + 1)
            return len(steps), last, None, rows

        writer, _, step, _ = cls._rewrite(path, every, None, environment)
        return writer, step

    @classmethod
    def _rewrite(cls, path, choose, config, environment):
        """Copy ``path`` up to the snapshot ``choose(run)`` names — ``(snapshots kept, step, resume slot or
        None[, rows of the step log kept])`` — into a fresh file that replaces it, opened for SWMR appends."""
        path = os.fspath(path)
        with Run(path) as run:
            run.check_all(resume_slots=True)
            f = run.h5
            sums = run.schema_version >= CHECKSUMS_SINCE   # a resumed file keeps its schema, with or without
            keep, step, slot, *rows = choose(run)
            doing, kept = f"copying it to resume from step {step}", "the file is unchanged"
            limit, size = file_size_limit(), os.path.getsize(path)
            if limit is not None and with_metadata(size) > limit:   # the copy is about as big
                raise WriteFailed(f"{write_cause(OSError(errno.EFBIG, ''))} while writing {path} ({doing}: "
                                  f"a copy of its {size} bytes would pass this process's limit of {limit} bytes); {kept}")
            with new_file(path, doing, kept) as (g, tmp):
                g.attrs.update(f.attrs)
                if config is not None:
                    g.attrs["config"] = json.dumps(dict(config), sort_keys=True)
                if environment is not None:
                    env = dict(environment, resumed_at=step)
                    old = run.environment   # (parsed at open, with the depth limit of every JSON read)
                    if old:
                        env["before_resume"] = {k: v for k, v in old.items() if k != "before_resume"}
                    g.attrs["environment"] = json.dumps(env, sort_keys=True)
                f.copy(f[RUN_GROUP], g, name=RUN_GROUP)   # written once, at creation (chunks copied as stored)
                _copy_rows(run, g, SNAPSHOTS_GROUP, keep, sums)
                if P["step_loss"] in f:   # the losses of the steps before the resumed one
                    log = run.dataset("step_loss")
                    k = min(step or 0, int(log.shape[0])) if slot is not None else int(log.shape[0])
                    if rows and rows[0] is not None:
                        k = min(rows[0], int(log.shape[0]))
                    new_dataset(g, P["step_loss"], np.asarray(log[:k]), maxshape=(None,), chunks=log.chunks,
                                checksums=sums)
                    if run.has("step_logged"):
                        given = run.dataset("step_logged")
                        new_dataset(g, P["step_logged"], np.asarray(given[:k]), maxshape=(None,),
                                    chunks=given.chunks, checksums=sums)
                if slot is not None:
                    _copy_slot(run, g, slot, sums)
                g.flush()
        return cls(open_then_replace(tmp, path, doing, kept, keep), path), keep, step, slot


def _copy_rows(run: Run, g: h5py.File, base: str, keep: int, checksums: bool) -> None:
    """The first ``keep`` rows of every time-first dataset under ``run``'s ``base`` into ``g[base]``, one
    snapshot at a time (bounded memory), keeping layout, checksums and hard links. Each row is read,
    its checksum verified, and written anew: a damaged one stops the copy with one line naming it."""
    made: dict[int, str] = {}
    for name, ds in datasets(run.h5[base], each_link=True):
        full = f"{base}/{name}"
        key = hash(ds.id)
        if key in made:
            g[full] = g[made[key]]
            continue
        src = Dataset(ds, run, full)   # (not run.at: under SWMR its refresh, with `ds` open, makes 1-D reads zeros)
        new = new_dataset(g, full, shape=(keep, *ds.shape[1:]), maxshape=ds.maxshape, dtype=ds.dtype, chunks=ds.chunks,
                       checksums=checksums)
        for i in range(keep):
            new[i] = src[i]
        new.flush()   # a full disk fails here, not silently when `new` is dropped (see _dealloc_faults)
        made[key] = full


def _copy_slot(run: Run, g: h5py.File, slot: int, checksums: bool) -> None:
    """The resume state of ``slot``; the other slot is recreated empty and marked invalid."""
    held = np.full(2, -1, dtype=np.int64)
    held[slot] = run.dataset("resume_step")[slot]
    new_dataset(g, P["resume_step"], held, checksums=checksums)
    for other in (0, 1):
        for name, ds in datasets(run.h5[f"{RESUME_GROUP}/slot{slot}"], each_link=True):
            path = path_of("resume_tensor", slot=other, name=name)
            if other == slot:
                new_dataset(g, path, np.asarray(Dataset(ds, run, path)[()]), checksums=checksums)
            else:
                new_dataset(g, path, shape=ds.shape, dtype=ds.dtype, checksums=checksums)


def _weights_fit(path: str, dims: Mapping, params: Mapping[str, tuple[int, ...]], roles: Mapping[str, str]) -> None:
    """Refuse, in a reader's words, weights whose shapes the file's ``dims`` contradict (a name-mapping
    that does not fit the model): no file is made that a reader would refuse."""
    version = version_tuple(SCHEMA_VERSION)
    sizes = meta_findings({"dims": dict(dims)})[1]
    found = []
    for role, name in roles.items():
        entry = schema_entry(f"{WEIGHTS_GROUP}/{role}", version)
        if entry is not None and name in params:
            found += dataset_findings(f"{WEIGHTS_GROUP}/{role}", np.dtype("f4"), (0, *params[name]), entry[1], sizes, None)
    refuse(path, found)
