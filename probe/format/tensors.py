"""A time-first tensor (axis 0 the snapshot) as every source hands it out — a snapshot file's dataset
or a checkpoint's canonical tensor — read within the memory budget: :func:`read_at` (rows at the
selected snapshots), :func:`check_fits` (the budget's check before a read), :func:`read_whole` (a
dataset with no snapshot axis), :func:`read_rows` (rows as hyperslabs); and the per-head convention
of the stored weights, :func:`as_matrix` (a per-head tensor back to its linear map)."""
from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from ..limits import WHY, check


def read_at(ds, indices: list[int], rows=None, work: float = 0) -> list[np.ndarray]:
    """``ds`` at each snapshot index (only ``rows``, if given); one read when the indices are contiguous.

    Parameters
    ----------
    ds : dataset-like
        A source's tensor (``Source.tensor``): ``shape``, ``dtype``, ``name``, indexing; axis 0 the snapshot.
    indices : list of int
        Snapshot indices (``Source.step_indices``).
    rows : sequence of int, optional
        Rows of axis 1 (token ids), in the order wanted; None: all.
    work : float, default 0
        What the math holds besides, in multiples of one snapshot of what is read in float32
        (``probe.limits.DECOMPOSITION``, ``FLOAT64``): checked with the read (:func:`check_fits`).

    Returns
    -------
    list of ndarray
        One array per index, the per-snapshot shape (with ``rows``: (len(rows), ...)).

    Raises
    ------
    ProbeError
        What is read (and ``work``) does not fit the memory budget (``--max-memory``).
    """
    check_fits(ds, len(indices), rows, work)
    if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
        sl = slice(indices[0], indices[-1] + 1)
        return list(ds[sl] if rows is None else read_rows(ds, sl, rows))
    return [ds[i] if rows is None else read_rows(ds, i, rows) for i in indices]


def check_fits(ds, steps: int, rows=None, work: float = 0) -> None:
    """The memory budget's check of reading ``rows`` (None: all) of ``ds`` at ``steps`` snapshots, with
    ``work`` more (see :func:`read_at`); a ProbeError naming the file, the tensor and the sizes if not."""
    one = ((len(rows),) + tuple(ds.shape[2:])) if rows is not None else tuple(ds.shape[1:])
    count = math.prod(one)
    where = getattr(ds, "path", None) or ds.file.filename    # a checkpoint's tensor, or an h5py dataset
    at = (f" ({len(rows)} of its {ds.shape[1]} rows)" if rows is not None else "") + \
        (f" at {steps} steps" if steps > 1 else "")
    check(where, ds.name.lstrip("/"), one if steps == 1 else (steps, *one), ds.dtype.name, ds.dtype.itemsize,
          need=count * (steps * ds.dtype.itemsize + 4 * work), why=WHY, at=at)


def read_whole(ds, work: float = 0) -> np.ndarray:
    """All of ``ds``, a dataset with no snapshot axis (the task's P^s, the probe batch), checked against the
    memory budget first (``work``: as for :func:`read_at`)."""
    check(ds.file.filename, ds.name.lstrip("/"), ds.shape, ds.dtype.name, ds.dtype.itemsize,
          need=math.prod(ds.shape) * (ds.dtype.itemsize + 4 * work), why=WHY)
    return np.asarray(ds[...])


def read_rows(ds, index: int | slice, rows: Sequence[int] | np.ndarray) -> np.ndarray:
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


def as_matrix(name: str, W: np.ndarray) -> np.ndarray:
    """Per-head tensors back to the full linear map: (H, d, e) -> (d, H*e); W_O (H, e, d) -> (H*e, d)."""
    if W.ndim == 3:
        if name.endswith("W_O"):
            return W.reshape(-1, W.shape[-1])
        return W.transpose(1, 0, 2).reshape(W.shape[1], -1)
    return W


def natural(name: str) -> list:
    """Sort key of tensor names in natural order: ``layer2`` before ``layer10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]
