"""What writing a snapshot file needs below :class:`~.writer.Writer`: datasets whose data carry
checksums (:func:`new_dataset`), a new file under a temporary name, opened for SWMR writing and renamed
into place, and a write the file system refused (a full disk, a quota, a size limit) turned into
:class:`WriteFailed` with the file left as it was."""
from __future__ import annotations

import contextlib
import os
import secrets

import h5py
import numpy as np

from ..files import sync_file, sync_folder
from ..errors import ProbeError, is_write_fault, write_cause
from ._h5 import chunks_for


# Datasets with checksums
def new_dataset(g: h5py.Group, path: str, data: np.ndarray | None = None, *, shape=None, dtype=None, maxshape=None,
             chunks=None, checksums: bool = True) -> h5py.Dataset:
    """A new dataset at ``path`` in ``g`` (filled with ``data``, or of ``shape`` and ``dtype``) whose
    data HDF5 checksums and verifies at every read (schema 1.4): chunked (``chunks``; by default the
    whole array when small, else ~64 KiB row blocks, as the snapshots' rows) with the Fletcher-32
    filter; a scalar compact, inside its object header, which HDF5 checksums as it does all metadata
    of these files. An empty array holds nothing to checksum (nor can HDF5 chunk an empty fixed extent)."""
    if data is not None:
        shape, dtype = data.shape, data.dtype
    shape, dtype = tuple(shape), np.dtype(dtype)
    if checksums and shape == ():
        return _compact(g, path, dtype, data)
    if checksums and (maxshape is not None or all(shape)):
        chunks = chunks or chunks_for(shape, dtype.itemsize)[1:]
        ds = g.create_dataset(path, shape=shape, dtype=dtype, data=data, maxshape=maxshape, chunks=chunks,
                              fletcher32=True)
        ds.flush()   # its chunks leave HDF5's chunk cache now: a full disk fails here, not when `ds` is dropped
        return ds
    return g.create_dataset(path, shape=shape, dtype=dtype, data=data, maxshape=maxshape, chunks=chunks)


def _compact(g: h5py.Group, path: str, dtype: np.dtype, data: np.ndarray | None) -> h5py.Dataset:
    """A scalar dataset stored compact (h5py's create_dataset gives a scalar the default layout), its
    groups made on the way (a file holds one per parameter and slot: h5py's require_group for each
    cost ~0.1 ms, a fifth of creating a tiny run's file)."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    lcpl = h5py.h5p.create(h5py.h5p.LINK_CREATE)
    lcpl.set_create_intermediate_group(True)
    dsid = h5py.h5d.create(g.id, path.encode("utf-8", "surrogateescape"), h5py.h5t.py_create(dtype, logical=True),
                           h5py.h5s.create(h5py.h5s.SCALAR), dcpl=dcpl, lcpl=lcpl)
    if data is not None:
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data, dtype=dtype))
    return h5py.Dataset(dsid)


class WriteFailed(ProbeError):
    """The file system refused a write of the run file (full, read-only, no permission, a size limit);
    the message names the cause and what was kept. ``snapshots``: complete snapshots in the file."""

    def __init__(self, message: str, snapshots: int | None = None):
        super().__init__(message)
        self.snapshots = snapshots


def vfd_name(f: h5py.File) -> tuple[int, os.stat_result] | None:
    """The OS file descriptor under ``f`` (the sec2 driver's) and what it is open on, or None."""
    try:
        fd = f.id.get_vfd_handle()
        return (fd, os.fstat(fd)) if isinstance(fd, int) and fd >= 0 else None
    except Exception:
        return None


def abandon_file(f: h5py.File, vfd: tuple[int, os.stat_result] | None) -> None:
    """Close ``f`` after HDF5 failed to write it, without writing to it again.

    After a failed write (a full disk) HDF5 still holds dirty metadata: closing the file tries to
    write it again, fails again, and leaves a half-closed file that crashes the process when it is
    touched or cleaned up (a segmentation fault; h5py 3.16, HDF5 1.14). So the file's descriptor is
    first pointed elsewhere (:func:`_scratch`): the close writes there and succeeds, and the file on
    disk stays as the failed write left it, like a writer killed at that moment, whose committed
    snapshots (the step dataset grows last) readers, ``validate`` and ``--resume`` handle.

    ``vfd`` is the descriptor, taken from the file while it was sound (:func:`vfd_name`): asking a file
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
        with contextlib.suppress(Exception):
            f.close()
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


def with_metadata(nbytes: int) -> int:
    """``nbytes`` of data and what HDF5 may add beside it (chunk index blocks, object headers): measured
    0-15 KiB per snapshot of the tiny preset (62 KB of data), so 64 KiB and an eighth to spare."""
    return nbytes + nbytes // 8 + (64 << 10)


def file_size_limit() -> int | None:
    """This process's file-size limit in bytes (RLIMIT_FSIZE, ``ulimit -f``), None when there is none."""
    try:
        import resource
    except ImportError:   # not a POSIX system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def temp_names(path: str | os.PathLike) -> str:
    """A glob of the temporary files a writer of ``path`` makes beside it (a killed one leaves them)."""
    folder, base = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(folder, f".{base}.*.new")


@contextlib.contextmanager
def _dealloc_faults():
    """Write faults HDF5 reports while h5py closes an object that was dropped (a Dataset with data
    still in its chunk cache): h5py can only print them ("Exception ignored in __dealloc__") and
    HDF5 goes on, in a state where a later flush crashes the process. Inside this block they are
    recorded instead, in the list it yields, whose first the caller raises. (Writers flush each
    dataset they fill, so this is the net, not the rule.)"""
    import sys

    faults: list[BaseException] = []
    old = sys.unraisablehook

    def hook(unraisable):
        if is_write_fault(unraisable.exc_value):
            faults.append(unraisable.exc_value)
        else:
            old(unraisable)

    sys.unraisablehook = hook
    try:
        yield faults
    finally:
        sys.unraisablehook = old


# The chunk cache of each dataset a writer opens, in bytes: none. Only bench/bench_snapshot_growth.py
# sets it to None (HDF5's default, the writer as before issue 58) to time the old writer beside this one.
CHUNK_CACHE_BYTES: int | None = 0


def writer_fapl():
    """File access of a writer: HDF5 1.10 format, no data sieve buffer and no chunk cache. The sieve
    buffer holds small raw writes back until the dataset is closed, which h5py does when it drops the
    object: a full disk then fails inside that close, where h5py can only print the error, and HDF5 is
    left with a half-closed dataset that crashes the process when the file is closed (measured:
    creation on a 648 KiB tmpfs). Without it every write fails in the call that makes it. The writers
    write whole datasets and rows, which the sieve buffer does not speed up.

    The chunk cache (HDF5 2.0: 8 MiB a dataset) kept every chunk a writer wrote, and each flush of a
    dataset walks its cached chunks: with the flushes every snapshot makes (each dataset, then the
    file), a snapshot cost more the more snapshots came before (2,000 snapshots of a tiny GPT-2 in
    windows of 500: each window slower, the last 4x the first; bench/RESULTS.md, issue 58). A writer
    writes each chunk whole, once (a snapshot's row is its own chunks, never rewritten: a kill cannot
    tear a committed one), and never reads it back, so a cache saves it nothing; without one each
    chunk goes to the file in the write that makes it, and a flush has nothing to walk."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V110, h5py.h5f.LIBVER_V110)
    fapl.set_sieve_buf_size(0)
    if CHUNK_CACHE_BYTES is not None:   # (one slot: HDF5 allocates the slot table even for no bytes)
        fapl.set_cache(0, 1, CHUNK_CACHE_BYTES, 1.0)
    return fapl


@contextlib.contextmanager
def new_file(path: str, doing: str, kept: str):
    """A new HDF5 file under a unique temporary name beside ``path`` (``.run.h5.<pid>.<random>.new``),
    closed and flushed to disk when the block ends; yields ``(file, temporary name)``, the caller
    renames it into place. On any failure the temporary file is removed; a write the file system
    refused becomes :class:`WriteFailed` (``<cause> while writing <path> (<doing>); <kept>``)."""
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.new")
    f = vfd = None
    try:
        with _dealloc_faults() as faults:
            f = h5py.File(h5py.h5f.create(os.fsencode(tmp), h5py.h5f.ACC_EXCL, fapl=writer_fapl()))
            vfd = vfd_name(f)
            yield f, tmp
            if faults:
                raise faults[0]
            f.flush()   # a full disk fails here, leaving the file whole for abandon_file; in close() it would not
            f.close()
        sync_file(tmp)
    except BaseException as exc:
        if f is not None:
            abandon_file(f, vfd)
        _remove(tmp)
        if is_write_fault(exc):
            raise WriteFailed(f"{write_cause(exc)} while writing {path} ({doing}); {kept}") from None
        raise


def open_then_replace(tmp: str, path: str, doing: str, kept: str, snapshots: int) -> h5py.File:
    """Open the finished ``tmp`` as the SWMR writer, then rename it over ``path``: the file appears
    at ``path`` already open for SWMR writing. (Renamed first, a reader that opened it in the moment
    before the writer did held HDF5's file lock, and the writer's open failed "unable to lock file":
    a `probe info` or a report following a starting run killed its trainer.)"""
    try:
        # Opening straight into SWMR-write mode leaves no window in which the file
        # is open for a plain write (that state would not survive a SIGKILL).
        fid = h5py.h5f.open(os.fsencode(tmp), h5py.h5f.ACC_RDWR | h5py.h5f.ACC_SWMR_WRITE, fapl=writer_fapl())
        f = h5py.File(fid)
    except (OSError, RuntimeError) as exc:
        _remove(tmp)
        if is_write_fault(exc):
            raise WriteFailed(f"{write_cause(exc)} while writing {path} (opening it); {kept}", snapshots) from None
        raise
    try:   # (and the rename made durable)
        os.replace(tmp, path)
        sync_folder(path)
    except BaseException as exc:
        f.close()
        _remove(tmp)
        if isinstance(exc, OSError):
            raise WriteFailed(f"{write_cause(exc)} while writing {path} ({doing}); {kept}") from None
        raise
    return f


def snapshots_kept(n: int) -> str:
    return (f"the {n} snapshot{'s' if n != 1 else ''} written before {'are' if n != 1 else 'is'} kept" if n
            else "it holds no complete snapshot yet")
