"""Opening a snapshot file and what every other module of the format shares: the schema's names
(:data:`P`: dataset name -> path), the HDF5 settings, the header and damage checks made before
anything is read, and the walk over a group's datasets."""
from __future__ import annotations

import os
from functools import lru_cache
from typing import Sequence

import h5py
import numpy as np

from probe_schemas import snapshot_schema, version_tuple

from ..limits import parse_json
from ..errors import ProbeError


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


def toolkit_version() -> str:
    try:
        from importlib.metadata import version

        return version("gamma-probe")
    except Exception:  # running from a source tree that is not installed
        return "0+unknown"


def chunks_for(row_shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    row_shape = tuple(int(s) for s in row_shape)
    nbytes = itemsize * int(np.prod(row_shape, dtype=np.int64))
    if not row_shape or nbytes <= _WHOLE_CHUNK_BYTES:
        return (1, *row_shape)
    per_row = nbytes // row_shape[0]
    rows = max(1, min(row_shape[0], _ROW_BLOCK_BYTES // max(per_row, 1)))
    return (1, rows, *row_shape[1:])

def is_snapshot_file(path: str | os.PathLike) -> bool:
    """True for an existing file that starts with the HDF5 signature."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as fh:
        return fh.read(8) == _SIGNATURE


def open_h5(path: str | os.PathLike) -> h5py.File:
    """Open an HDF5 file read-only, live or killed runs included; a damaged file fails within a
    second (at most :data:`READ_ATTEMPTS` tries per metadata read)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ProbeError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ProbeError(f"{path}: is a directory, not a snapshot file")
    from ..files import regular_file, writer_alive   # a FIFO or device is refused unopened: opening a FIFO blocks
    regular_file(path, "snapshot file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(48)
    except OSError as exc:
        raise ProbeError(f"{path}: cannot read ({exc.strerror})") from None
    if head[:8] != _SIGNATURE:
        raise ProbeError(f"{path}: not an HDF5 file" + (" (empty: 0 bytes)" if not head else ""))
    # A SWMR writer's flag (a version 3 superblock's byte 11 holds the file consistency flags, bit 2 the
    # SWMR-write one) stays set when it is killed, and in every copy of its file; only a live
    # writer (its lock held) may be ahead of its bytes on disk. Any other file must be whole.
    flagged = len(head) >= 12 and head[8] == 3 and bool(head[11] & 0b100)
    if not (flagged and writer_alive(path)):
        _check_not_truncated(path, head, flagged)
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    if _set_read_attempts() is not None:
        _set_read_attempts()(fapl.id, READ_ATTEMPTS)
    try:
        # A flagged file opens only for a SWMR read (HDF5 refuses a plain one: "already open for write")
        fid = h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDONLY | (h5py.h5f.ACC_SWMR_READ if flagged else 0),
                            fapl=fapl)
        return h5py.File(fid)
    except (OSError, ValueError, RuntimeError) as exc:
        msg = str(exc).split("(", 1)[0].strip() or type(exc).__name__
        raise ProbeError(f"{path}: cannot open HDF5 file, it is truncated or corrupted ({msg})") from None


# Metadata read attempts of a reader. A SWMR reader retries a read whose checksum fails (the writer
# may be mid-write), sleeping 1 ns, 2 ns, 4 ns, ... between tries: HDF5's default of 100 tries makes
# a damaged file sleep for hours, holding the GIL (no signal handler runs). 24 tries sleep 17 ms in
# all (measured on a killed run cut to a third: 24 tries 0.02 s, 28 0.27 s, 32 4.3 s, 100 > 30 min).
READ_ATTEMPTS = 24


@lru_cache(maxsize=None)
def _set_read_attempts():
    """HDF5's ``H5Pset_metadata_read_attempts`` (its public C API; h5py does not wrap it) from the very
    library h5py runs on, or None where it cannot be found. It is looked up through h5py's own extension
    module, whose handle searches the libraries it was linked against: the one inside h5py's wheel, or
    the system or conda HDF5 of a build against one."""
    import ctypes

    try:
        func = ctypes.CDLL(h5py.h5p.__file__).H5Pset_metadata_read_attempts
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int64, ctypes.c_uint]   # hid_t is 64 bits since HDF5 1.10
    return func


def _check_not_truncated(path: str, head: bytes, flagged: bool = False) -> None:
    """Compare the file size with the end-of-file address of a version 2/3 superblock."""
    if len(head) >= 36 and head[8] in (2, 3) and head[9] == 8:
        eof = int.from_bytes(head[28:36], "little")
        size = os.path.getsize(path)
        if size < eof:
            # flagged: a SWMR writer's file that no live writer holds (killed, or copied in part)
            whose = "; no process is writing it" if flagged else ""
            raise ProbeError(f"{path}: truncated HDF5 file ({size} bytes, the superblock says {eof}{whose})")


def damaged_file_error(exc: BaseException | None, path: str, dataset: str | None = None,
                       where: str = "") -> ProbeError | None:
    """The ProbeError to raise for an HDF5 library error met while reading ``path``, else None.

    HDF5 reports damaged metadata deep inside reads, as OSError, RuntimeError or a
    KeyError whose text starts with "Unable to"; all mean the file is corrupted. With ``dataset``
    (the path of the dataset being read; ``where``: which part of it, `` (snapshot at step 500)``)
    the line names it, and a failed checksum says so: a chunk's Fletcher-32 filter ("filter returned
    failure during read") or an object header's ("incorrect metadata checksum").
    """
    if isinstance(exc, (OSError, RuntimeError)) or (isinstance(exc, KeyError) and "Unable to" in str(exc)):
        msg = " ".join(str(exc.args[0] if exc.args else exc).split())
        if dataset is None:
            return ProbeError(f"{path}: damaged HDF5 file ({msg})")
        if "filter returned failure" in msg or "checksum" in msg:
            return ProbeError(f"{path}: damaged HDF5 file: checksum mismatch in '{dataset}'{where}")
        return ProbeError(f"{path}: damaged HDF5 file: '{dataset}'{where} is unreadable ({msg})")
    return None


def json_attr(f: h5py.File, key: str, path: str) -> dict:
    if key not in f.attrs:
        raise ProbeError(f"{path}: missing root attribute '{key}'")
    try:
        return parse_json(f.attrs[key], path, f"root attribute '{key}'")
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

def datasets(group: h5py.Group, *, each_link: bool = False) -> list[tuple[str, h5py.Dataset]]:
    """(path below ``group``, dataset) of every dataset below it through hard links, by name, depth
    first: a dataset that several hard links name comes once, at its first name, or with ``each_link``
    once per link (a copy must recreate every name). The one walk over a trusted file's tree (a file not yet trusted is
    scanned link by link, without opening anything: :func:`._checks.link_findings`)."""
    out: list[tuple[str, h5py.Dataset]] = []
    seen: set = set()

    def visit(g: h5py.Group, prefix: str) -> None:
        for key in g:
            if g.id.links.get_info(key.encode("utf-8", "surrogateescape")).type != h5py.h5l.TYPE_HARD:
                continue   # a soft link is another name, not another dataset (as HDF5's own visit sees it)
            obj = g[key]
            if isinstance(obj, h5py.Group):
                visit(obj, f"{prefix}{key}/")
            elif isinstance(obj, h5py.Dataset) and (each_link or obj.id not in seen):
                seen.add(obj.id)
                out.append((f"{prefix}{key}", obj))

    visit(group, "")
    return out
