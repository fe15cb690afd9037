"""The snapshot file format: the one module that writes and reads run files.

A run is one HDF5 file (see ``schemas/snapshot-v1.json``):

* ``run/``        what never changes: token groups, P^s, the probe batch.
* ``snapshots/``  time-first datasets, axis 0 = snapshot index, appended under
  HDF5 SWMR so readers can follow a live run. ``snapshots/step`` is appended
  last, so its length is the number of *complete* snapshots; extra rows in
  other datasets belong to an unfinished snapshot and are ignored.
* ``resume/``     two ping-pong slots of optimizer/RNG state; a slot is marked
  invalid while it is rewritten, so a kill at any moment leaves one good slot.

Files are written with ``libver=("v110", "v110")`` so HDF5 1.10 tools read them.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

import h5py
import numpy as np

from probe_schemas import path_of, snapshot_schema, version_tuple

from ..errors import ProbeError, is_write_fault, param, write_cause

LIBVER = ("v110", "v110")
_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_SCHEMA = snapshot_schema()
FORMAT = _SCHEMA["format"]
SCHEMA_VERSION = _SCHEMA["version"]
METRICS = ("loss", "acc")
# Chunks of at most this many bytes per snapshot are stored whole; bigger
# tensors are split into row blocks so a probe that needs a few rows of a
# 50257 x 768 embedding reads kilobytes, not the whole matrix.
_WHOLE_CHUNK_BYTES = 1 << 20
_ROW_BLOCK_BYTES = 1 << 16

P = {name: entry["path"] for name, entry in _SCHEMA["datasets"].items()}
SNAPSHOTS_GROUP = P["step"].split("/")[0]
RUN_GROUP = P["token_group"].split("/")[0]
RESUME_GROUP = P["resume_step"].split("/")[0]
PARAMS_GROUP = P["param"].rsplit("/", 1)[0]
WEIGHTS_GROUP = P["token_embedding"].rsplit("/", 1)[0]
LOG_GROUP = P["step_loss"].split("/")[0]


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("gamma-probe")
    except Exception:  # running from a source tree that is not installed
        return "0+unknown"


def _chunks(row_shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    row_shape = tuple(int(s) for s in row_shape)
    nbytes = itemsize * int(np.prod(row_shape, dtype=np.int64))
    if not row_shape or nbytes <= _WHOLE_CHUNK_BYTES:
        return (1, *row_shape) if row_shape else (1,)
    per_row = nbytes // row_shape[0]
    rows = max(1, min(row_shape[0], _ROW_BLOCK_BYTES // max(per_row, 1)))
    return (1, rows, *row_shape[1:])


# ----------------------------------------------------------------------------
# Opening
# ----------------------------------------------------------------------------

def _writer_fapl():
    """File access of a writer: HDF5 1.10 format, and no data sieve buffer. The sieve buffer holds
    small raw writes back until the dataset is closed, which h5py does when it drops the object:
    a full disk then fails inside that close, where h5py can only print the error, and HDF5 is left
    with a half-closed dataset that crashes the process when the file is closed (measured: creation
    on a 648 KiB tmpfs). Without it every write fails in the call that makes it. The writers write
    whole datasets and rows, which the sieve buffer does not speed up."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V110, h5py.h5f.LIBVER_V110)
    fapl.set_sieve_buf_size(0)
    return fapl


def _open_swmr_writer(path: str) -> h5py.File:
    fapl = _writer_fapl()
    # Opening straight into SWMR-write mode leaves no window in which the file
    # is open for a plain write (that state would not survive a SIGKILL).
    fid = h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDWR | h5py.h5f.ACC_SWMR_WRITE, fapl=fapl)
    return h5py.File(fid)


def is_snapshot_file(path: str | os.PathLike) -> bool:
    """True for an existing file that starts with the HDF5 signature."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as fh:
        return fh.read(8) == _SIGNATURE


def open_h5(path: str | os.PathLike) -> h5py.File:
    """Open an HDF5 file read-only, live or killed runs included."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ProbeError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ProbeError(f"{path}: is a directory, not a snapshot file")
    from .._files import regular_file   # a FIFO or device is refused unopened: opening a FIFO blocks
    regular_file(path, "snapshot file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(48)
    except OSError as exc:
        raise ProbeError(f"{path}: cannot read ({exc.strerror})") from None
    if head[:8] != _SIGNATURE:
        raise ProbeError(f"{path}: not an HDF5 file" + (" (empty: 0 bytes)" if not head else ""))
    live = _swmr_writer_flag(head)
    if not live:
        _check_not_truncated(path, head)
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as exc:
        first = exc
    if "already open for write" in str(first) or (live and "truncated file" in str(first)):
        # A running or killed SWMR writer left its flag set: only a SWMR read open works. A running
        # one also moves the superblock's end-of-file ahead of the bytes it has written yet, which a
        # plain open calls truncated and a SWMR open allows. (Tried second: on a damaged file a SWMR
        # open retries for minutes.)
        try:
            return h5py.File(path, "r", swmr=True)
        except (OSError, ValueError) as exc:
            first = exc
    msg = str(first).split("(", 1)[0].strip() or type(first).__name__
    raise ProbeError(f"{path}: cannot open HDF5 file, it is truncated or corrupted ({msg})")


def _swmr_writer_flag(head: bytes) -> bool:
    """True when a version 3 superblock says a SWMR writer has (or had, if killed) the file open:
    byte 11 holds the file consistency flags, bit 2 the SWMR-write one."""
    return len(head) >= 12 and head[8] == 3 and bool(head[11] & 0b100)


def _check_not_truncated(path: str, head: bytes) -> None:
    """Compare the file size with the end-of-file address of a version 2/3 superblock."""
    if len(head) >= 36 and head[8] in (2, 3) and head[9] == 8:
        eof = int.from_bytes(head[28:36], "little")
        size = os.path.getsize(path)
        if size < eof:
            raise ProbeError(f"{path}: truncated HDF5 file ({size} bytes, the superblock says {eof})")


def damaged_file_error(exc: BaseException | None, path: str) -> ProbeError | None:
    """The ProbeError to raise for an HDF5 library error met while reading ``path``, else None.

    HDF5 reports damaged metadata deep inside reads, as OSError, RuntimeError or a
    KeyError whose text starts with "Unable to"; all mean the file is corrupted.
    """
    if isinstance(exc, (OSError, RuntimeError)) or (isinstance(exc, KeyError) and "Unable to" in str(exc)):
        msg = " ".join(str(exc.args[0] if exc.args else exc).split())
        return ProbeError(f"{path}: damaged HDF5 file ({msg})")
    return None


def _json_attr(f: h5py.File, key: str, path: str) -> dict:
    if key not in f.attrs:
        raise ProbeError(f"{path}: missing root attribute '{key}'")
    try:
        return json.loads(f.attrs[key])
    except (TypeError, ValueError):
        raise ProbeError(f"{path}: root attribute '{key}' is not valid JSON") from None


def check_header(f: h5py.File, path: str) -> tuple[int, int]:
    """Check the file is a snapshot file this version can read; return its schema version."""
    fmt = f.attrs.get("format")
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if fmt != FORMAT:
        raise ProbeError(f"{path}: not a gamma-probe snapshot file (no '{FORMAT}' format attribute)")
    raw = f.attrs.get("schema_version")
    try:
        version = version_tuple(raw.decode() if isinstance(raw, bytes) else raw)
    except (TypeError, ValueError, AttributeError):
        raise ProbeError(f"{path}: unreadable schema_version attribute {raw!r}") from None
    if version[0] > version_tuple(SCHEMA_VERSION)[0]:
        raise ProbeError(
            f"{path}: written with snapshot schema {version[0]}.{version[1]}, newer than this "
            f"toolkit's {SCHEMA_VERSION}; upgrade gamma-probe to read it")
    return version


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
            from .validate import ReadCheck   # (validate imports this module)

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
                                       for n, _ in named_datasets(grp)}

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
        return [n for n in _dataset_names(params)
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
        steps = self.steps
        if len(steps) == 0:
            raise ProbeError(f"{self.path}: has no complete snapshot yet")
        spec = str(spec).strip()
        if "," in spec:
            parts = [p for p in spec.split(",") if p.strip()]
            if not parts:
                raise ProbeError(f"bad {param('step')} '{spec}': use latest, all, a step number or A:B")
            return sorted({i for p in parts for i in self.step_indices(p)})
        if spec == "latest":
            return [len(steps) - 1]
        if spec == "all":
            return list(range(len(steps)))
        if re.fullmatch(r"-?\d*:-?\d*", spec):
            lo_s, hi_s = spec.split(":")
            lo = int(lo_s) if lo_s else None
            hi = int(hi_s) if hi_s else None
            idx = [i for i, s in enumerate(steps) if (lo is None or s >= lo) and (hi is None or s < hi)]
            if not idx:
                raise ProbeError(f"{self.path}: no snapshot with step in [{lo_s or 'start'}, {hi_s or 'end'})")
            return idx
        try:
            want = int(spec)
        except ValueError:
            raise ProbeError(f"bad {param('step')} '{spec}': use latest, all, a step number, A:B or a comma "
                             "list of these") from None
        hits = np.flatnonzero(steps == want)
        if len(hits) == 0:
            shown = ", ".join(str(s) for s in steps[:12]) + (", ..." if len(steps) > 12 else "")
            raise ProbeError(f"{self.path}: no snapshot at step {want}; steps are {shown}")
        return [int(hits[0])]

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


# ----------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------

class WriteFailed(ProbeError):
    """The file system refused a write of the run file (full, read-only, no permission, a size limit);
    the message names the cause and what was kept. ``snapshots``: complete snapshots in the file."""

    def __init__(self, message: str, snapshots: int | None = None):
        super().__init__(message)
        self.snapshots = snapshots


def _vfd(f: h5py.File) -> tuple[int, os.stat_result] | None:
    """The OS file descriptor under ``f`` (the sec2 driver's) and what it is open on, or None."""
    try:
        fd = f.id.get_vfd_handle()
        return (fd, os.fstat(fd)) if isinstance(fd, int) and fd >= 0 else None
    except Exception:
        return None


def _abandon(f: h5py.File, vfd: tuple[int, os.stat_result] | None) -> None:
    """Close ``f`` after HDF5 failed to write it, without writing to it again.

    After a failed write (a full disk) HDF5 still holds dirty metadata: closing the file tries to
    write it again, fails again, and leaves a half-closed file that crashes the process when it is
    touched or cleaned up (a segmentation fault; h5py 3.16, HDF5 1.14). So the file's descriptor is
    first pointed elsewhere (:func:`_scratch`): the close writes there and succeeds, and the file on
    disk stays as the failed write left it, like a writer killed at that moment, whose committed
    snapshots (the step dataset grows last) readers, ``validate`` and ``--resume`` handle.

    ``vfd`` is the descriptor, taken from the file while it was sound (:func:`_vfd`): asking a file
    whose close failed half-way for it crashes; it is redirected only while it is still open on the
    same file."""
    try:
        fd = vfd[0] if vfd is not None and os.path.samestat(os.fstat(vfd[0]), vfd[1]) else None
    except OSError:
        fd = None
    limit = None
    if fd is not None:
        scratch, limit = _scratch()
        try:
            os.dup2(scratch, fd)
        finally:
            os.close(scratch)
    try:
        f.close()
    except Exception:
        pass
    finally:
        if limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, limit)


def _scratch() -> tuple[int, tuple[int, int] | None]:
    """A descriptor that takes HDF5's last writes in place of the file: an anonymous file in memory
    (at close HDF5 also sets the file's length to its end address, which /dev/null refuses, and a
    refused close is the crash), else /dev/null. Those writes reach past the point where a file-size
    limit stopped the real file, so the soft limit is raised to the hard one meanwhile; returns the
    limit to put back (or None)."""
    import resource

    if not hasattr(os, "memfd_create"):
        return os.open(os.devnull, os.O_RDWR), None
    fd = os.memfd_create("abandoned-hdf5-file", os.MFD_CLOEXEC)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == hard:
        return fd, None
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    return fd, (soft, hard)


def _with_metadata(nbytes: int) -> int:
    """``nbytes`` of data and what HDF5 may add beside it (chunk index blocks, object headers): measured
    0-15 KiB per snapshot of the tiny preset (62 KB of data), so 64 KiB and an eighth to spare."""
    return nbytes + nbytes // 8 + (64 << 10)


def _file_size_limit() -> int | None:
    """This process's file-size limit in bytes (RLIMIT_FSIZE, ``ulimit -f``), None when there is none."""
    try:
        import resource
    except ImportError:   # not a POSIX system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def temp_names(path: str | os.PathLike) -> str:
    """A glob of the temporary files a writer of ``path`` makes beside it (a killed one leaves them)."""
    folder, base = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(folder, f".{base}.*.new")


class _DeallocFaults:
    """Write faults HDF5 reports while h5py closes an object that was dropped (a Dataset with data
    still in its chunk cache): h5py can only print them ("Exception ignored in __dealloc__") and
    HDF5 goes on, in a state where a later flush crashes the process. Inside this block they are
    recorded instead, and :meth:`check` raises the first. (Writers flush each dataset they fill, so
    this is the net, not the rule.)"""

    def __enter__(self) -> "_DeallocFaults":
        import sys

        self.first: BaseException | None = None
        self._sys, self._old = sys, sys.unraisablehook

        def hook(unraisable):
            if is_write_fault(unraisable.exc_value):
                self.first = self.first or unraisable.exc_value
            else:
                self._old(unraisable)

        sys.unraisablehook = hook
        return self

    def check(self) -> None:
        if self.first is not None:
            raise self.first

    def __exit__(self, *exc) -> None:
        self._sys.unraisablehook = self._old


@contextlib.contextmanager
def _new_file(path: str, doing: str, kept: str):
    """A new HDF5 file under a unique temporary name beside ``path`` (``.run.h5.<pid>.<random>.new``),
    closed and flushed to disk when the block ends; yields ``(file, temporary name)``, the caller
    renames it into place. On any failure the temporary file is removed; a write the file system
    refused becomes :class:`WriteFailed` (``<cause> while writing <path> (<doing>); <kept>``)."""
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.new")
    f = vfd = None
    try:
        with _DeallocFaults() as faults:
            f = h5py.File(h5py.h5f.create(os.fsencode(tmp), h5py.h5f.ACC_EXCL, fapl=_writer_fapl()))
            vfd = _vfd(f)
            yield f, tmp
            faults.check()
            f.flush()   # a full disk fails here, leaving the file whole for _abandon; in close() it would not
            f.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as exc:
        if f is not None:
            _abandon(f, vfd)
        _remove(tmp)
        if is_write_fault(exc):
            raise WriteFailed(f"{write_cause(exc)} while writing {path} ({doing}); {kept}") from None
        raise


def _open_then_replace(tmp: str, path: str, doing: str, kept: str, snapshots: int) -> h5py.File:
    """Open the finished ``tmp`` as the SWMR writer, then rename it over ``path``: the file appears
    at ``path`` already open for SWMR writing. (Renamed first, a reader that opened it in the moment
    before the writer did held HDF5's file lock, and the writer's open failed "unable to lock file":
    a `probe info` or a report following a starting run killed its trainer.)"""
    try:
        f = _open_swmr_writer(tmp)
    except (OSError, RuntimeError) as exc:
        _remove(tmp)
        if is_write_fault(exc):
            raise WriteFailed(f"{write_cause(exc)} while writing {path} (opening it); {kept}", snapshots) from None
        raise
    try:
        _replace(tmp, path, doing, kept)
    except BaseException:
        f.close()
        _remove(tmp)
        raise
    return f


def _replace(tmp: str, path: str, doing: str, kept: str) -> None:
    """Rename the finished ``tmp`` over ``path`` (and make the rename durable)."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise WriteFailed(f"{write_cause(exc)} while writing {path} ({doing}); {kept}") from None
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:   # some file systems cannot sync a folder; the rename itself is done
        pass


def _snapshots_kept(n: int) -> str:
    return (f"the {n} snapshot{'s' if n != 1 else ''} written before {'are' if n != 1 else 'is'} kept" if n
            else "it holds no complete snapshot yet")


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
        self._params = {name: f[f"{PARAMS_GROUP}/{name}"] for name in _dataset_names(f[PARAMS_GROUP])}
        self._vfd = _vfd(f)
        rows = {ds.id: ds for _, ds in _links(f[SNAPSHOTS_GROUP])}   # hard links counted once
        self._row_bytes = sum(int(np.prod(ds.shape[1:], dtype=np.int64)) * ds.dtype.itemsize for ds in rows.values())

    @property
    def n_snapshots(self) -> int:
        return self._n

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
    ) -> "Writer":
        """Create a run file with every dataset it will ever need, then open it for SWMR appends.

        ``run_arrays`` maps schema entries (``label_dist``, ``probe_tokens``, ...) to arrays;
        ``roles`` maps canonical weight names (``token_embedding``, ``layer0/W_Q``) to
        parameter names; they become hard links, so nothing is stored twice. ``series`` maps
        further time-first schema entries (``norm_ms``, ``token_loss``, ...) to their per-snapshot
        shape and dtype; :meth:`append` then takes their values in ``extra``.
        The file is built under a temporary name and renamed into place, so a kill
        during creation never leaves a half-made file at ``path``.
        """
        path = os.fspath(path)
        series_shapes = series
        kept = "the old file is unchanged" if os.path.exists(path) else "no file was made"
        with _new_file(path, "creating it", kept) as (f, tmp):
            f.attrs["format"] = FORMAT
            f.attrs["schema_version"] = SCHEMA_VERSION
            f.attrs["package_version"] = _package_version()
            f.attrs["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            f.attrs["config"] = json.dumps(config, sort_keys=True)
            f.attrs["task"] = json.dumps(task, sort_keys=True)
            f.attrs["dims"] = json.dumps(dict(dims), sort_keys=True)
            if environment is not None:
                f.attrs["environment"] = json.dumps(dict(environment), sort_keys=True)
            for name, ids in groups.items():
                f.create_dataset(path_of("token_group", group=name), data=np.asarray(list(ids), dtype=np.int64))
            for entry, arr in run_arrays.items():
                if np.asarray(arr).dtype.kind in "OU":  # text: variable-length UTF-8
                    f.create_dataset(path_of(entry), data=[str(x) for x in arr], dtype=h5py.string_dtype())
                else:
                    f.create_dataset(path_of(entry), data=arr)

            def series(p: str, row_shape=(), dtype="f8"):
                itemsize = np.dtype(dtype).itemsize
                return f.create_dataset(p, shape=(0, *row_shape), maxshape=(None, *row_shape), dtype=dtype,
                                        chunks=_chunks(row_shape, itemsize))

            series(P["step"], dtype="i8")
            for entry in ("epoch", "time", "train_loss"):
                series(P[entry])
            for split in task["splits"]:
                for metric in METRICS:
                    series(path_of("metric", split=split, metric=metric))
            for name, shape in params.items():
                series(path_of("param", name=name), shape, "f4")
            for role, pname in roles.items():
                f[f"{WEIGHTS_GROUP}/{role}"] = f[path_of("param", name=pname)]
            if attention_shape is not None:
                series(P["attention"], attention_shape, "f4")
            for entry, (shape, dtype) in (series_shapes or {}).items():
                series(P[entry], shape, dtype)
            series(P["step_loss"])
            if resume_tensors:
                f.create_dataset(P["resume_step"], data=np.full(2, -1, dtype=np.int64))
                for slot in (0, 1):
                    for name, (shape, dtype) in resume_tensors.items():
                        f.create_dataset(path_of("resume_tensor", slot=slot, name=name), shape=shape, dtype=dtype)
        return cls(_open_then_replace(tmp, path, "creating it", kept, 0), path)

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
    ) -> None:
        """Append one snapshot; it becomes visible to readers only when complete. ``extra``: values of
        the ``series`` entries given at creation; ``step_losses``: the loss of every step since the
        previous snapshot (appended to the step log)."""
        f, n = self._f, self._n
        missing = set(self._params) - set(params)
        if missing:
            raise ValueError(f"snapshot lacks parameters {sorted(missing)}")
        self._within_limit(self._row_bytes + 8 * len(step_losses if step_losses is not None else ()),
                           f"snapshot at step {step}")
        values: dict[str, object] = {P["epoch"]: epoch, P["time"]: time, P["train_loss"]: train_loss}
        for split, ms in metrics.items():
            for metric, v in ms.items():
                values[path_of("metric", split=split, metric=metric)] = v
        for name, arr in params.items():
            values[path_of("param", name=name)] = arr
        if attention is not None:
            values[P["attention"]] = attention
        for entry, v in (extra or {}).items():
            values[P[entry]] = v
        try:
            if step_losses is not None and len(step_losses) and P["step_loss"] in f:
                log = f[P["step_loss"]]
                at = log.shape[0]
                log.resize(at + len(step_losses), axis=0)
                log[at:] = np.asarray(step_losses, dtype=np.float64)
                log.flush()
            for p, v in values.items():
                ds = f[p]
                ds.resize(n + 1, axis=0)
                ds[n] = v
                ds.flush()
            # The commit: only now does the snapshot count grow.
            step_ds = f[P["step"]]
            step_ds.resize(n + 1, axis=0)
            step_ds[n] = step
            step_ds.flush()
            self._n = n + 1
            f.flush()
        except (OSError, RuntimeError) as exc:
            raise self._failed(exc, f"snapshot at step {step}") from None

    def last(self, entry: str):
        """Value of time-first schema entry ``entry`` at the newest complete snapshot (None if none)."""
        return self._f[P[entry]][self._n - 1] if self._n else None

    def save_resume(self, step: int, tensors: Mapping[str, np.ndarray]) -> None:
        """Store the state needed to continue from ``step`` in the older of the two slots."""
        f = self._f
        slot = int(np.argmin(f[P["resume_step"]][...]))
        unallocated = [ds for _, ds in _links(f[f"{RESUME_GROUP}/slot{slot}"]) if ds.id.get_storage_size() == 0]
        self._within_limit(sum(ds.nbytes for ds in unallocated), f"resume state at step {step}")
        try:
            marks = f[P["resume_step"]]
            held = marks[...]
            slot = int(np.argmin(held))
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
        limit = _file_size_limit()
        if limit is None:
            return
        if int(self._f.id.get_filesize()) + _with_metadata(nbytes) <= limit:
            return
        self.close()
        raise WriteFailed(f"{write_cause(OSError(errno.EFBIG, ''))} while writing {self.path} ({doing}: the "
                          f"file would grow past this process's limit of {limit} bytes); {_snapshots_kept(self._n)}", self._n)

    def _failed(self, exc: BaseException, doing: str) -> WriteFailed:
        """Close the file without another write (see :func:`_abandon`) and say what failed and what is kept."""
        _abandon(self._f, self._vfd)
        return WriteFailed(f"{write_cause(exc)} while writing {self.path} ({doing}); {_snapshots_kept(self._n)}",
                           self._n)

    def close(self) -> None:
        if self._f.id.valid:
            try:
                self._f.flush()   # a full disk fails here, leaving the file whole for _abandon; in close() it would not
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
        writer may have left the rows or slot it was writing unreadable. ``config`` replaces
        the stored configuration (a resume may change the number of steps).
        """
        path = os.fspath(path)
        with Run(path) as run:
            run.check_all(resume_slots=True)
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
            keep = int(np.flatnonzero(steps == step)[0]) + 1
            doing, kept = f"copying it to resume from step {step}", "the file is unchanged"
            limit, size = _file_size_limit(), os.path.getsize(path)
            if limit is not None and _with_metadata(size) > limit:   # the copy is about as big
                raise WriteFailed(f"{write_cause(OSError(errno.EFBIG, ''))} while writing {path} ({doing}: "
                                  f"a copy of its {size} bytes would pass this process's limit of {limit} bytes); {kept}")
            with _new_file(path, doing, kept) as (g, tmp):
                for k, v in f.attrs.items():
                    g.attrs[k] = v
                if config is not None:
                    g.attrs["config"] = json.dumps(dict(config), sort_keys=True)
                if environment is not None:
                    env = dict(environment, resumed_at=step)
                    old = json.loads(f.attrs["environment"]) if "environment" in f.attrs else {}
                    if old:
                        env["before_resume"] = {k: v for k, v in old.items() if k != "before_resume"}
                    g.attrs["environment"] = json.dumps(env, sort_keys=True)
                f.copy(f[RUN_GROUP], g, name=RUN_GROUP)   # written once, at creation
                _copy_rows(f[SNAPSHOTS_GROUP], g, SNAPSHOTS_GROUP, keep)
                if P["step_loss"] in f:   # the losses of the steps before the resumed one
                    log = f[P["step_loss"]]
                    k = min(step, int(log.shape[0]))
                    g.create_dataset(P["step_loss"], data=np.asarray(log[:k]), maxshape=(None,),
                                     chunks=log.chunks)
                _copy_slot(f, g, slot)
                g.flush()
        writer = cls(_open_then_replace(tmp, path, doing, kept, keep), path)
        g = writer._f
        state = {name: np.asarray(ds[...]) for name, ds in named_datasets(g[f"{RESUME_GROUP}/slot{slot}"])}
        params = {name: np.asarray(ds[keep - 1]) for name, ds in writer._params.items()}
        return writer, step, state, params


def _links(group: h5py.Group, prefix: str = ""):
    """(name, dataset) for every link below ``group`` — hard links to one dataset included."""
    for key, obj in group.items():
        if isinstance(obj, h5py.Group):
            yield from _links(obj, f"{prefix}{key}/")
        else:
            yield f"{prefix}{key}", obj


def _copy_rows(src: h5py.Group, g: h5py.File, base: str, keep: int) -> None:
    """The first ``keep`` rows of every time-first dataset under ``src`` into ``g[base]``, one snapshot
    at a time (bounded memory), keeping layout and hard links."""
    made: dict[int, str] = {}
    for name, ds in _links(src):
        full = f"{base}/{name}"
        key = hash(ds.id)
        if key in made:
            g[full] = g[made[key]]
            continue
        new = g.create_dataset(full, shape=(keep, *ds.shape[1:]), maxshape=ds.maxshape, dtype=ds.dtype,
                               chunks=ds.chunks)
        for i in range(keep):
            new[i] = ds[i]
        new.flush()   # a full disk fails here, not silently when `new` is dropped (see _DeallocFaults)
        made[key] = full


def _copy_slot(f: h5py.File, g: h5py.File, slot: int) -> None:
    """The resume state of ``slot``; the other slot is recreated empty and marked invalid."""
    held = np.full(2, -1, dtype=np.int64)
    held[slot] = f[P["resume_step"]][slot]
    g.create_dataset(P["resume_step"], data=held)
    for other in (0, 1):
        for name, ds in _links(f[f"{RESUME_GROUP}/slot{slot}"]):
            path = path_of("resume_tensor", slot=other, name=name)
            if other == slot:
                g.create_dataset(path, data=ds[...])
            else:
                g.create_dataset(path, shape=ds.shape, dtype=ds.dtype)


def named_datasets(group: h5py.Group) -> list[tuple[str, h5py.Dataset]]:
    out = []
    group.visititems(lambda name, obj: out.append((name, obj)) if isinstance(obj, h5py.Dataset) else None)
    return out


def _dataset_names(group: h5py.Group) -> list[str]:
    return [name for name, _ in named_datasets(group)]
