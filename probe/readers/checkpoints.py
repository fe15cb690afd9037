"""Checkpoint readers: one interface over the raw tensors of every checkpoint format a probe can read.

A :class:`RawSource` lists its raw tensors (name -> shape) without reading them and
reads one tensor on demand, so a probe touches only the bytes it asks for:

* a Hugging Face model folder (``config.json`` with ``model.safetensors``, sharded
  ``model.safetensors.index.json``, or ``pytorch_model.bin``);
* a ``.safetensors`` file (lazy: header first, one tensor at a time);
* a PyTorch state dict (``.pt``, ``.pth``, ``.bin``) loaded with ``weights_only=True``;
  a file that needs arbitrary code to unpickle is refused, never executed;
* a nanoGPT ``ckpt.pt`` (``model`` + ``model_args``; torch.compile's ``_orig_mod.``
  prefix stripped);
* this toolkit's own snapshot files (a chosen step).

:mod:`.layouts` maps the raw names to canonical ones (``layer3/W_V``...).
"""
from __future__ import annotations

import math
import os
import re

import numpy as np

from ..files import open_regular, regular_file
from ..limits import check, load_json
from ..errors import ProbeError, warn
from .names import FOLDER_FILES, step_from_name   # (also imported from here)
from .safetensors_header import MAX_HEADER, header_length, parse

_SIGNATURES = {"hdf5": b"\x89HDF\r\n\x1a\n", "zip": b"PK\x03\x04"}


def sniff(path: str) -> str:
    """What a file is by its first bytes: 'hdf5', 'safetensors', 'zip' (torch.save), 'pickle'
    (legacy torch.save), 'json', 'empty' or 'unknown' — no torch imported. The extension is trusted
    only for a ``.safetensors`` file that is nothing else, so that its header's faults are named.
    Only a regular file is opened (a FIFO would block)."""
    with open_regular(path, "rb", what="checkpoint file") as fh:
        head = fh.read(16)
    if not head:
        return "empty"
    for kind, sig in _SIGNATURES.items():
        if head.startswith(sig):
            return kind
    # a header length the library takes, then the JSON object (serde allows whitespace before it)
    if len(head) >= 9 and 0 < int.from_bytes(head[:8], "little") <= MAX_HEADER and head[8:9] in b"{ \t\n\r":
        return "safetensors"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if head.lstrip()[:1] == b"{":
        return "json"
    return "safetensors" if path.endswith(".safetensors") else "unknown"


def _to_numpy(t) -> np.ndarray:
    import torch

    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.detach().cpu().numpy()


class RawSource:
    """Raw tensors of one checkpoint (its ``path``, ``config``, ``step`` and ``kind``), listed by
    ``shapes()`` and ``dtypes()`` without reading them and read one at a time. Each reader defines
    ``read`` or ``read_rows``; the defaults: rows by reading the whole tensor, the whole tensor as
    rows 0:None, no tensor shared by two names."""

    path: str
    config: dict
    step: int | None
    kind: str

    def read(self, name: str) -> np.ndarray:
        return self.read_rows(name, 0, None)

    def read_rows(self, name: str, lo: int, hi: int | None) -> np.ndarray:
        return self.read(name)[lo:hi]

    def aliases(self) -> dict[str, str]:
        return {}

    def _entry(self, table: dict, name: str):
        """``table[name]``, or the error that the checkpoint holds no tensor ``name``."""
        if name not in table:
            raise ProbeError(f"{self.path}: no tensor '{name}'")
        return table[name]


# safetensors dtypes numpy reads as they are; BF16 is read as its 16 raw bits
_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
              "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


class SafetensorsSource(RawSource):
    """One .safetensors file: names, shapes, dtypes and byte ranges from the JSON header; a tensor (or
    a block of its rows) is read with numpy from exactly its bytes, no torch and no safetensors library
    (bf16 and fp16 become float32); dtypes numpy cannot hold (fp8) go through torch.

    The header is checked first, as strictly as the safetensors library checks it
    (:mod:`.safetensors_header`): a file the library refuses is refused here, before any name,
    shape or number is reported, and every tensor's byte range is its own."""

    kind = "safetensors"

    def __init__(self, path: str, config: dict | None = None, step: int | None = None, reader=None):
        """``reader``: where the bytes come from instead of the file ``path`` (an object with
        ``read(offset, size) -> bytes``, ``size() -> int`` and a ``label``: a hub file read by HTTP
        ranges)."""
        self.path, self.config, self.step, self._reader = path, config or {}, step, reader
        where = reader.label if reader is not None else path
        if reader is None:
            regular_file(path, "checkpoint file")
        try:
            first = self._bytes(0, 8)
            size = reader.size() if reader is not None else os.path.getsize(path)
            n = header_length(first, size, where)
            raw = self._bytes(8, n)
        except OSError as exc:
            raise ProbeError(f"{where}: cannot read ({exc.strerror or exc})") from None
        if len(raw) != n:
            raise ProbeError(f"{where}: not a valid safetensors file: the file ended inside its header (it is "
                             "being written or was cut short)")
        self._tensors, duplicates = parse(raw, size, where)
        for name in duplicates:
            warn(f"{where}: tensor '{name}' is listed more than once in the header; the last entry is read, "
                 "as the safetensors library reads it")
        self._base = 8 + n

    def _bytes(self, offset: int, size: int) -> bytes:
        if self._reader is not None:
            return self._reader.read(offset, size)
        with open_regular(self.path, "rb", what="checkpoint file") as fh:
            fh.seek(offset)
            return fh.read(size)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {k: t.shape for k, t in self._tensors.items()}

    def dtypes(self) -> dict[str, str]:
        return {k: t.dtype.lower() for k, t in self._tensors.items()}

    def read_rows(self, name: str, lo: int, hi: int | None) -> np.ndarray:
        """Rows lo:hi along the first axis (the whole tensor for lo, hi = 0, None)."""
        t = self._entry(self._tensors, name)
        raw, shape = t.dtype, t.shape
        if any(d > np.iinfo(np.intp).max for d in shape):
            raise ProbeError(f"{self.path}: tensor '{name}' has shape {list(shape)}, larger than numpy can hold")
        lo, hi, _ = slice(lo, hi).indices(shape[0]) if shape else (0, 1, 1)
        hi = max(hi, lo)
        rows_shape = (hi - lo, *shape[1:]) if shape else ()
        if raw not in _ST_DTYPES:
            return self._read_torch(name, lo, hi, rows_shape)
        dt = np.dtype(_ST_DTYPES[raw])
        wide = raw in ("F16", "BF16")                      # read as float32
        row = math.prod(shape[1:])                         # Python ints: no overflow
        count = math.prod(rows_shape)
        offset = self._base + t.start + lo * row * dt.itemsize
        # the header check made every range exactly its tensor's; this guards the arithmetic above
        if offset < self._base + t.start or offset + count * dt.itemsize > self._base + t.end:
            raise ProbeError(f"{self.path}: tensor '{name}' runs past its byte range (a damaged file)")
        check(self.path, name, rows_shape, "bfloat16" if raw == "BF16" else dt.name, dt.itemsize,
              need=count * 4 if wide else 0, why="as float32")
        try:
            if count == 0:
                return np.zeros(rows_shape, dtype=np.float32 if wide else dt)
            if self._reader is not None:
                arr = np.frombuffer(bytearray(self._reader.read(offset, count * dt.itemsize)), dtype=dt)
            else:
                with open_regular(self.path, "rb", what="checkpoint file") as fh:
                    arr = np.fromfile(fh, dtype=dt, count=count, offset=offset)
        except (OSError, ValueError) as exc:   # ValueError: a shape numpy cannot hold, even empty
            raise ProbeError(f"{self.path}: cannot read tensor '{name}' ({exc})") from None
        if arr.size != count:
            raise ProbeError(f"{self.path}: tensor '{name}' is cut short (a truncated file)")
        arr = arr.reshape(rows_shape)
        if raw == "BF16":     # raw bits -> float32: the same sign, exponent and leading mantissa, 16 zero bits below
            return (arr.astype(np.uint32) << 16).view(np.float32)
        return arr.astype(np.float32) if wide else arr

    def _read_torch(self, name: str, lo: int, hi: int, rows: tuple[int, ...]) -> np.ndarray:
        import warnings

        from safetensors import safe_open

        raw = self._tensors[name].dtype
        if raw == "C64":
            raise ProbeError(f"{self.path}: tensor '{name}' is complex (C64); the probes read real-valued weights")
        # fp8 holds a byte an element (F4 and F6 less: a byte counted), read as float32
        check(self.path, name, rows, raw, 1, need=4 * math.prod(rows), why="as float32")
        path = self.path if self._reader is None else (self._reader.local or self._reader.download())
        regular_file(path, "checkpoint file")
        try:
            with safe_open(path, framework="pt") as f, warnings.catch_warnings():
                warnings.simplefilter("ignore")     # torch's own warnings must not precede our answer
                t = f.get_slice(name)[lo:hi] if rows else f.get_tensor(name)
                return _to_numpy(t.float())
        except Exception as exc:   # a dtype this torch cannot hold or convert (F4, F6, C64...)
            raise ProbeError(f"{self.path}: cannot read tensor '{name}' of dtype {raw} "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})") \
                from None


class StateDictSource(RawSource):
    """A PyTorch state dict, or a nanoGPT checkpoint (``model`` + ``model_args``), loaded with
    ``weights_only=True`` (memory-mapped when the file allows): a pickle that would run code is refused."""

    kind = "pytorch"

    def __init__(self, path: str, config: dict | None = None, step: int | None = None):
        import pickle
        import warnings

        import torch

        self.path, self.config, self.step = path, dict(config or {}), step
        regular_file(path, "checkpoint file")    # torch.load opens it itself: a FIFO would block
        try:
            with warnings.catch_warnings():   # torch's own warnings must not precede our one-line answer
                warnings.simplefilter("ignore")
                try:
                    obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
                except RuntimeError:  # old (non-zip) checkpoints cannot be memory-mapped
                    obj = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            # torch names the callable a pickle asks for ("unsupported GLOBAL posix.system"; torch 2.3:
            # "Unsupported class posix.system"); any other failure of the weights-only unpickler means
            # the bytes are not a checkpoint
            why = [ln.strip() for ln in str(exc).splitlines() if "GLOBAL" in ln] or \
                re.findall(r"Unsupported class [\w.]+", str(exc))
            if not why:
                raise ProbeError(f"{path}: not a PyTorch checkpoint (unreadable pickle)") from None
            raise ProbeError(f"{path}: refused: unpickling it would run code or build objects other than "
                             f"tensors ({why[0][:120]}); only plain state dicts are read") from None
        except Exception as exc:
            raise ProbeError(f"{path}: not a PyTorch checkpoint ({type(exc).__name__}: {str(exc)[:100]})") from None
        if isinstance(obj, dict) and "model" in obj and "model_args" in obj:  # nanoGPT
            self.config.setdefault("nanogpt", dict(obj["model_args"]))
            if self.step is None and isinstance(obj.get("iter_num"), int):
                self.step = obj["iter_num"]
            obj = obj["model"]
        if not isinstance(obj, dict) or not all(hasattr(v, "shape") for v in obj.values()):
            raise ProbeError(f"{path}: holds no state dict of tensors")
        self._tensors = {k.removeprefix("_orig_mod."): v for k, v in obj.items()}

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {k: tuple(v.shape) for k, v in self._tensors.items()}

    def dtypes(self) -> dict[str, str]:
        return {k: str(v.dtype).removeprefix("torch.") for k, v in self._tensors.items()}

    def read_rows(self, name: str, lo: int, hi: int | None) -> np.ndarray:
        t = self._entry(self._tensors, name)
        t = t[lo:hi] if t.ndim else t
        # memory-mapped: the bytes are read (and bf16 / fp16 widened to float32) only when converted
        check(self.path, name, t.shape, str(t.dtype).removeprefix("torch."), t.element_size(),
              need=4 * t.numel() if t.is_floating_point() else 0, why="as float32")
        return _to_numpy(t)

    def aliases(self) -> dict[str, str]:
        """Names whose tensor is the same memory as an earlier name's (tied weights: nanoGPT's
        ``lm_head`` and ``wte``), mapped to that name."""
        first: dict[tuple, str] = {}
        out = {}
        for name, t in self._tensors.items():
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
            if first.setdefault(key, name) != name:
                out[name] = first[key]
        return out


class ShardedSource(RawSource):
    """A model split over several files by an index (``model.safetensors.index.json`` or
    ``pytorch_model.bin.index.json``): each shard is opened when one of its tensors is asked for."""

    def __init__(self, index_path: str, config: dict | None = None, step: int | None = None,
                 remote: dict | None = None):
        """``remote``: shard file name -> reader, for shards read over HTTP (see SafetensorsSource)."""
        self.path, self.config, self.step, self._remote = index_path, config or {}, step, remote or {}
        try:
            with open_regular(index_path, what="checkpoint index") as fh:
                weight_map = load_json(fh, index_path, "checkpoint index")["weight_map"]
            if not isinstance(weight_map, dict):
                raise ValueError
        except (OSError, ValueError, KeyError, TypeError):
            raise ProbeError(f"{index_path}: not a checkpoint index (no weight_map)") from None
        self._folder = os.path.dirname(os.path.abspath(index_path))
        self._weight_map = {str(k): str(v) for k, v in weight_map.items()}
        missing = sorted({s for s in self._weight_map.values()
                          if s not in self._remote and not os.path.exists(os.path.join(self._folder, s))})
        if missing:
            raise ProbeError(f"{index_path}: shard {missing[0]} is missing"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
        safetensors = all(s.endswith(".safetensors") for s in self._weight_map.values())
        self.kind = "sharded " + ("safetensors" if safetensors else "pytorch")
        self._shards: dict[str, RawSource] = {}

    def _shard(self, name: str) -> RawSource:
        file = self._entry(self._weight_map, name)
        if file not in self._shards:
            full = os.path.join(self._folder, file)
            if file in self._remote:
                self._shards[file] = SafetensorsSource(full, reader=self._remote[file])
            else:
                cls = SafetensorsSource if sniff(full) == "safetensors" else StateDictSource
                self._shards[file] = cls(full)
        return self._shards[file]

    def _all(self) -> list[RawSource]:
        return [self._shard(n) for n in dict((f, n) for n, f in self._weight_map.items()).values()]

    def shapes(self) -> dict[str, tuple[int, ...]]:
        shapes = {k: v for src in self._all() for k, v in src.shapes().items()}
        one = {file: n for n, file in self._weight_map.items()}   # a tensor of each shard opens it
        held = {file: set(self._shard(n).shapes()) for file, n in one.items()}
        for n, file in self._weight_map.items():   # a tensor the index lists and its shard lacks: never left out unsaid
            if n not in held[file]:
                raise ProbeError(f"{self.path}: lists tensor {n} in {file}, which does not hold it (a shard of "
                                 "another save, or an index of another model)")
        return {n: shapes[n] for n in self._weight_map}

    def dtypes(self) -> dict[str, str]:
        return {k: v for src in self._all() for k, v in src.dtypes().items() if k in self._weight_map}

    def read_rows(self, name: str, lo: int, hi: int | None) -> np.ndarray:
        return self._shard(name).read_rows(name, lo, hi)

    def aliases(self) -> dict[str, str]:
        return {k: v for src in self._all() for k, v in src.aliases().items()}


class SnapshotSource(RawSource):
    """This toolkit's snapshot file at one step, by the canonical names its trainer stored
    (the ``weights/`` links): the file itself says which parameter is which."""

    def __init__(self, path: str, step: str | int = "latest"):
        from ..format import Run

        self.path = path
        self._run = Run(path)
        self._index = self._run.step_indices(step)[0]
        self.step = int(self._run.steps[self._index])
        self.config = dict(self._run.config, layout="gamma-probe", dims=self._run.dims)

    kind = "gamma-probe snapshot"

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return self._run.weights()

    def dtypes(self) -> dict[str, str]:
        return {n: "float32" for n in self.shapes()}

    def read(self, name: str) -> np.ndarray:
        ds = self._run.tensor(name)
        check(self.path, name, ds.shape[1:], ds.dtype.name, ds.dtype.itemsize)
        return self._run.read(name, self._index)


def open_checkpoint(path: str | os.PathLike, step: str | int = "latest") -> RawSource:
    """The right reader for ``path``: a model folder, or a file recognised by its content (a
    snapshot, .safetensors, a torch.save file, an index), whatever its extension."""
    path = os.fspath(path)
    name_step = step_from_name(path)
    remote: dict = {}
    if path.startswith("hf:"):
        from .hub import fetch

        path, remote = fetch(path)     # safetensors weights not in the cache: read by HTTP ranges
    if not os.path.exists(path):
        raise ProbeError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        config = _config(path, strict=True)
        for fname in FOLDER_FILES:
            full = os.path.join(path, fname)
            if fname in remote:
                return SafetensorsSource(full, config, name_step, reader=remote[fname])
            if os.path.exists(full):
                if fname.endswith(".index.json") and remote:
                    return ShardedSource(full, config, name_step, remote)
                return _open_file(full, config, name_step, step)
        raise ProbeError(f"{path}: a folder without {', '.join(FOLDER_FILES[:-1])} or {FOLDER_FILES[-1]}, nor "
                         "checkpoints whose names state a step (checkpoint-500/, ckpt_1000.pt: a run)")
    regular_file(path, "checkpoint file")
    return _open_file(path, _config(os.path.dirname(os.path.abspath(path)), strict=False), name_step, step)


def _config(folder: str, strict: bool) -> dict:
    """The config.json in ``folder``, if any; one that is not a regular file is refused, as every file the
    reader opens. ``strict`` (a model folder's own): unreadable JSON, or JSON that is not an object, is an
    error; else (the config.json beside a checkpoint file) it is no config, with a warning saying so."""
    path = os.path.join(folder, "config.json")
    config = {}
    if os.path.exists(path):
        try:
            with open_regular(path, what="checkpoint config") as fh:
                config = load_json(fh, path, "checkpoint config")
        except ValueError:
            if strict:
                raise ProbeError(f"{path}: not valid JSON") from None
            # taken as no config, but said: a head count's error would otherwise ask for the file that is there
            warn(f"{path}: not valid JSON; the weights beside it are read without a config")
        if strict and not isinstance(config, dict):
            raise ProbeError(f"{path}: not a JSON object")
        if not isinstance(config, dict):
            warn(f"{path}: not a JSON object; the weights beside it are read without a config")
    return config if isinstance(config, dict) else {}


def _open_file(path: str, config: dict, name_step: int | None, step) -> RawSource:
    kind = sniff(path)
    if kind == "hdf5":
        return SnapshotSource(path, step)
    cls = {"safetensors": SafetensorsSource, "zip": StateDictSource, "pickle": StateDictSource, "json": ShardedSource}
    if kind in cls:
        return cls[kind](path, config, name_step)
    if kind == "empty":
        raise ProbeError(f"{path}: empty file (0 bytes)")
    what = "an HDF5 file" if path.endswith((".h5", ".hdf5")) else "a snapshot or checkpoint"
    raise ProbeError(f"{path}: not {what}: its content is neither HDF5, safetensors, a torch.save file "
                     "nor a JSON index")
