"""Reading a run: :class:`Run`, the one reader of snapshot files (lazy: only the bytes a probe
asks for are read, each dataset checked before its first read)."""
from __future__ import annotations

import json
import os
from typing import Sequence

import h5py
import numpy as np

from probe_schemas import path_of

from ..errors import ProbeError
from ._h5 import (
    METRICS, P, PARAMS_GROUP, WEIGHTS_GROUP, _json_attr, check_header, damaged_file_error, datasets, open_h5
)
from .steps import step_indices


# ----------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------

class Run:
    """Read access to one snapshot file (works while the trainer still writes it).

    >>> with Run("run.h5") as run:
    ...     emb = run.read("token_embedding", run.step_index("latest"), rows=[11, 12, 13])
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._f = open_h5(self.path)
        try:
            self.schema_version = check_header(self._f, self.path)
            self.config = _json_attr(self._f, "config", self.path)
            self.task = _json_attr(self._f, "task", self.path)
            self.dims = _json_attr(self._f, "dims", self.path)
            # What the probes rely on, in the words of `probe validate`: links, attributes and steps now,
            # each dataset before its first read (self._get).
            from ._checks import ReadCheck

            self._check = ReadCheck(self._f, self.path, self.schema_version,
                                    {"config": self.config, "task": self.task, "dims": self.dims})
        except BaseException as exc:
            self._f.close()
            damaged = damaged_file_error(exc, self.path)
            if damaged is not None:
                raise damaged from None
            raise
        self.package_version = str(self._f.attrs.get("package_version", "?"))
        try:
            self.environment = json.loads(self._f.attrs.get("environment", "{}"))
        except (TypeError, ValueError):
            self.environment = {}
        self.extra_groups: dict[str, np.ndarray] = {}

    def check_all(self, resume_slots: bool = False) -> None:
        """Check every dataset now, not each before its first read: for a reader of everything (the
        report; a resume, which also reads and copies the ``resume_slots``)."""
        self._check.everything(resume_slots)

    # context manager -------------------------------------------------------
    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        damaged = damaged_file_error(exc, self.path)
        if damaged is not None:
            raise damaged from None

    @property
    def h5(self) -> h5py.File:
        return self._f

    # datasets --------------------------------------------------------------
    def dataset(self, entry: str, **fields) -> h5py.Dataset:
        """The dataset of schema entry ``entry``; a clear error if it is missing."""
        path = path_of(entry, **fields)
        return self._get(path)

    def _get(self, path: str) -> h5py.Dataset:
        try:
            obj = self._f[path]
        except KeyError:
            raise ProbeError(f"{self.path}: missing dataset '{path}'") from None
        except (OSError, RuntimeError) as exc:
            raise ProbeError(f"{self.path}: dataset '{path}' is unreadable ({exc})") from None
        if not isinstance(obj, h5py.Dataset):
            raise ProbeError(f"{self.path}: '{path}' is a group, not a dataset")
        self._check.dataset(path, obj)   # (and, under SWMR, its refresh)
        return obj

    @property
    def steps(self) -> np.ndarray:
        """Steps of the complete snapshots, in order (strictly increasing, or a ProbeError)."""
        return self._check.steps(np.asarray(self.dataset("step")[...], dtype=np.int64))

    @property
    def n_snapshots(self) -> int:
        return int(self.dataset("step").shape[0])

    @property
    def groups(self) -> dict[str, np.ndarray]:
        grp_path = P["token_group"].rsplit("/", 1)[0]
        grp = self._f.get(grp_path)
        stored = {} if grp is None else {name: np.asarray(self._get(f"{grp_path}/{name}")[...], dtype=np.int64)
                                         for name in grp}
        return {**self._check.groups(stored), **self.extra_groups}

    def token_strings(self) -> list[str] | None:
        """Text of every token (index = token id) for text runs; ``None`` when not stored."""
        if P["vocab_strings"] not in self._f:
            return None
        return [str(s) for s in self._get(P["vocab_strings"]).asstr()[...]]

    @property
    def splits(self) -> list[str]:
        return list(self.task.get("splits", []))

    def tensors(self) -> dict[str, tuple[int, ...]]:
        """Every time-first tensor (canonical names, then parameter names) and its per-snapshot shape."""
        out: dict[str, tuple[int, ...]] = {}

        def visit(prefix: str, group: h5py.Group, base: str) -> None:
            for key, obj in group.items():
                name = f"{prefix}{key}"
                if isinstance(obj, h5py.Group):
                    visit(name + "/", obj, base)
                else:
                    self._check.dataset(f"{base}/{name}", obj)   # info shows its shape: it must be right
                    out[name] = tuple(obj.shape[1:])

        for grp in (WEIGHTS_GROUP, PARAMS_GROUP):
            if grp in self._f:
                visit("", self._f[grp], grp)
        return out

    def weights(self) -> dict[str, tuple[int, ...]]:
        """The canonical tensors (``token_embedding``, ``layer0/W_V``, ...) and their per-snapshot shapes."""
        grp = self._f.get(WEIGHTS_GROUP)
        return {} if grp is None else {n: tuple(self._get(f"{WEIGHTS_GROUP}/{n}").shape[1:])
                                       for n, _ in datasets(grp)}

    def tensor(self, name: str) -> h5py.Dataset:
        """A weight tensor by canonical name (``token_embedding``, ``layer0/W_V``) or parameter name."""
        for grp in (WEIGHTS_GROUP, PARAMS_GROUP):
            full = f"{grp}/{name}"
            if full in self._f:
                return self._get(full)
        known = ", ".join(sorted(self.tensors())) or "none"
        raise ProbeError(f"{self.path}: no tensor '{name}'; known tensors: {known}")

    def weight_matrices(self) -> list[str]:
        """Parameter names of the weight matrices (2-D or per-head 3-D, named W...)."""
        params = self._f.get(PARAMS_GROUP, {})
        return [n for n, _ in datasets(params)
                if self._get(f"{PARAMS_GROUP}/{n}").ndim >= 3 and n.rsplit(".", 1)[-1].startswith("W")] \
            if params else []

    def has(self, entry: str, **fields) -> bool:
        """Whether the file holds schema entry ``entry`` (optional datasets of newer minor versions)."""
        return path_of(entry, **fields) in self._f

    def strings(self, entry: str) -> list[str]:
        """A string dataset (``norm_sites``) as a list."""
        return [str(x) for x in self.dataset(entry).asstr()[...]]

    def step_losses(self) -> np.ndarray:
        """Training-batch loss of every step up to the newest complete snapshot (row t: step t)."""
        if not self.has("step_loss"):
            raise ProbeError(f"{self.path}: holds no per-step loss log (written from schema 1.3)")
        n = int(self.steps[-1]) if self.n_snapshots else 0
        return np.asarray(self.dataset("step_loss")[:n])

    def metrics(self) -> dict[str, dict[str, np.ndarray]]:
        n = self.n_snapshots
        out: dict[str, dict[str, np.ndarray]] = {}
        for split in self.splits:
            out[split] = {}
            for metric in METRICS:
                path = path_of("metric", split=split, metric=metric)
                if path in self._f:
                    out[split][metric] = np.asarray(self._get(path)[:n])
        return out

    # steps -----------------------------------------------------------------
    def step_indices(self, spec: str | int) -> list[int]:
        """Snapshot indices for ``latest``, ``all``, a step number, a ``A:B`` step range (half-open) or
        a comma list of these (``100,500,latest``; each snapshot once, in step order)."""
        return step_indices(spec, self.steps, self.path)

    # reading ---------------------------------------------------------------
    def read(self, name: str, index: int, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Tensor ``name`` at snapshot ``index``; with ``rows``, only those rows of its first axis.

        Rows are read as contiguous hyperslabs, so only the chunks holding them are touched.
        """
        ds = self.tensor(name)
        if not 0 <= index < self.n_snapshots:
            raise ProbeError(f"{self.path}: snapshot index {index} out of range")
        if rows is None:
            return np.asarray(ds[index])
        return read_rows(ds, index, rows)

    def read_many(self, name: str, indices: Sequence[int]) -> np.ndarray:
        """Tensor ``name`` at several snapshots, stacked on a new first axis in the order given:
        one read of the rows they span (a trajectory costs one HDF5 call per tensor, not one per step)."""
        ds = self.tensor(name)
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size == 0:
            return np.empty((0,) + ds.shape[1:], dtype=ds.dtype)
        if idx.min() < 0 or idx.max() >= self.n_snapshots:
            raise ProbeError(f"{self.path}: snapshot index out of range")
        lo, hi = int(idx.min()), int(idx.max()) + 1
        if (hi - lo) <= 2 * idx.size:                 # dense: one contiguous hyperslab, then pick
            return np.asarray(ds[lo:hi])[idx - lo]
        order = np.unique(idx)
        return np.asarray(ds[order])[np.searchsorted(order, idx)]


def resumable_step(run: "Run") -> int | None:
    """The newest step a resume can start from, or None when no resume slot was completed (a writer
    killed while finishing its first snapshot)."""
    if not run.has("resume_step"):
        return None
    marks = run.dataset("resume_step")
    steps = set(int(s) for s in run.steps)
    held = [int(s) for s in marks[...] if s >= 0 and int(s) in steps]
    return max(held) if held else None


def last_step(path: str | os.PathLike) -> int | None:
    """Step of the newest complete snapshot in ``path``; None when it is no readable run or has none."""
    try:
        with Run(path) as run:
            return int(run.steps[-1]) if run.n_snapshots else None
    except (ProbeError, OSError):
        return None


def read_rows(ds: h5py.Dataset, index: int | slice, rows: Sequence[int] | np.ndarray) -> np.ndarray:
    """``ds[index, rows]`` in the order of ``rows``, reading one hyperslab per run of consecutive ids.

    ``index`` is a snapshot index or a slice of them (then axis 0 of the result is time).
    Only the chunks that hold the rows are read, never the whole tensor.
    """
    rows = np.asarray(rows, dtype=np.int64)
    axis = 0 if isinstance(index, (int, np.integer)) else 1
    order = np.unique(rows)
    if order.size == 0:
        raise ValueError("no rows asked for")
    breaks = np.flatnonzero(np.diff(order) != 1) + 1
    parts = [ds[index, int(run[0]):int(run[-1]) + 1] for run in np.split(order, breaks)]
    block = np.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]
    pos = np.searchsorted(order, rows)
    if len(pos) == len(order) and np.array_equal(pos, np.arange(len(order))):
        return block
    return np.take(block, pos, axis=axis)
