"""The header of a ``.safetensors`` file, checked as strictly as the safetensors library checks it.

The library (the Rust crate ``safetensors``, ``SafeTensors::read_metadata`` and ``Metadata::validate``,
which ``safe_open`` runs before it hands out anything) refuses a file unless:

* the first 8 bytes, a little-endian u64 N, are at most 100,000,000 and 8 + N fits in the file;
* the N header bytes are UTF-8 JSON as ``serde_json`` reads it: no NaN/Infinity, no unpaired
  surrogate escape, no number beyond the float range, nesting shallower than 128 levels;
* the JSON is an object; its ``__metadata__`` entry (at most one) is null or maps strings to strings;
  every other entry is a tensor: an object with ``dtype``, ``shape`` and ``data_offsets`` (each once;
  other fields are ignored) or the array ``[dtype, shape, data_offsets]``;
* a dtype is one of :data:`DTYPE_BITS`' names (or ``{"NAME": null}``); the shape's dimensions and the
  two offsets are integers in [0, 2**64) (not ``2.0``, ``-0``, ``true``);
* sorted by their offsets, the tensors' byte ranges are contiguous from 0 (no gap, no overlap, none
  ending before it starts); each holds exactly its element count times the dtype's size (the count
  computed left to right in u64 without overflow, a whole number of bytes); the last one ends at the
  end of the file.

A tensor name listed twice is not refused by the library: each entry must be a valid tensor and the
last one counts (serde's map). :func:`parse` does the same and reports the names, so that a reader can
warn. Everything else the library refuses, :func:`parse` refuses with a :class:`~probe.errors.ProbeError`
of one line naming the tensor and the fault; the rules were read in the crate's ``tensor.rs`` and
checked against ``safe_open`` on a generated corpus (tests/test_bad_input_readers.py).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import ProbeError

MAX_HEADER = 100_000_000          # the crate's MAX_HEADER_SIZE
SERDE_MAX_DEPTH = 127                   # serde_json's recursion limit: 128 nested arrays/objects are refused
U64 = 2**64 - 1
# every dtype of safetensors 0.8, with its size in bits
DTYPE_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
              "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
              "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}


@dataclass
class Tensor:
    dtype: str                         # a DTYPE_BITS name
    shape: tuple[int, ...]
    start: int                         # byte range in the data section (after the header)
    end: int


class _Obj(list):
    """A JSON object as its (key, value) pairs, duplicates kept."""


class _Num:
    """A JSON number that is not an integer in [0, 2**64): a float, a negative, -0 or a too-large
    integer, all of which serde reads as something other than a u64. Shown as written."""

    def __init__(self, literal: str):
        self.literal = literal


class _Bad(ValueError):
    pass


def _parse_int(s: str):
    if len(s.lstrip("-")) > 320:           # past the float range at any rate (and Python's int() limit)
        raise _Bad(f"number out of range ({s[:20]}...)")
    v = int(s)
    if 0 <= v <= U64 and s != "-0":
        return v
    float(v)                               # OverflowError: serde's "number out of range"
    return _Num(s)


def _parse_float(s: str):
    if abs(float(s)) == float("inf"):
        raise _Bad(f"number out of range ({s[:20]})")
    return _Num(s)


def _constant(s: str):
    raise _Bad(f"{s} is not a JSON number")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _walk(v, depth: int, strings: bool) -> None:
    """Refuse what serde_json refuses and Python's json takes: nesting of 128 levels and (with
    ``strings``) unpaired surrogates, which only a \\u escape can make."""
    if isinstance(v, list):               # _Obj included
        if depth > SERDE_MAX_DEPTH:
            raise _Bad(f"nested more than {SERDE_MAX_DEPTH} levels deep")
        for x in v:
            _walk(x, depth + 1, strings)
    elif isinstance(v, tuple):            # an object's (key, value) pair: same level as the object
        for x in v:
            _walk(x, depth, strings)
    elif strings and isinstance(v, str) and any("\ud800" <= c <= "\udfff" for c in v):
        raise _Bad("an unpaired UTF-16 surrogate escape (\\ud800-\\udfff)")


def _json(text: str):
    try:
        doc = json.loads(text, object_pairs_hook=_Obj, parse_int=_parse_int, parse_float=_parse_float,
                         parse_constant=_constant)
    except RecursionError:
        raise _Bad(f"nested more than {SERDE_MAX_DEPTH} levels deep") from None
    except (_Bad, OverflowError, ValueError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise _Bad(f"{exc.msg} (character {exc.pos})") from None
        raise _Bad(str(exc) if isinstance(exc, _Bad) else "number out of range") from None
    strings = bool(_SURROGATE_ESCAPE.search(text))
    if strings or text.count("[") + text.count("{") > SERDE_MAX_DEPTH:     # else neither can be the case
        _walk(doc, 1, strings)
    return doc


def _usize(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)      # the parse hooks keep only [0, 2**64) as int


def _show(v) -> str:
    if isinstance(v, _Obj):
        return "{" + ", ".join(f"{json.dumps(k)}: {_show(x)}" for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    if isinstance(v, _Num):
        return v.literal
    return json.dumps(v)


def _dtype(v, name: str) -> str:
    if isinstance(v, _Obj):               # serde's externally tagged form of a unit variant: {"F32": null}
        if len(v) != 1:
            raise _Bad(f"tensor '{name}' has dtype {_show(v)}: a dtype object holds exactly one name")
        key, unit = v[0]
        if key in DTYPE_BITS and unit is not None:
            raise _Bad(f"tensor '{name}' has dtype {_show(v)}: the value after the dtype name must be null")
        v = key
    if not isinstance(v, str):
        raise _Bad(f"tensor '{name}' has dtype {_show(v)}, not a dtype name")
    if v not in DTYPE_BITS:
        raise _Bad(f"tensor '{name}' has unknown dtype {json.dumps(v)} (safetensors dtypes are upper-case "
                   "names: F32, F16, BF16, I64, U8, BOOL, F8_E4M3, ...)")
    return v


def _tensor(name: str, v) -> Tensor:
    if isinstance(v, _Obj):
        fields: dict = {}
        for k, x in v:
            if k in ("dtype", "shape", "data_offsets"):
                if k in fields:
                    raise _Bad(f"tensor '{name}' lists '{k}' twice")
                fields[k] = x
        for k in ("dtype", "shape", "data_offsets"):
            if k not in fields:
                raise _Bad(f"tensor '{name}' has no '{k}'")
        dtype, shape, offsets = fields["dtype"], fields["shape"], fields["data_offsets"]
    elif isinstance(v, list):             # serde also reads a struct from [dtype, shape, data_offsets]
        if len(v) != 3:
            raise _Bad(f"tensor '{name}' is an array of {len(v)} items, not [dtype, shape, data_offsets]")
        dtype, shape, offsets = v
    else:
        raise _Bad(f"tensor '{name}' is {_show(v)[:40]}, not an object with dtype, shape and data_offsets")
    dtype = _dtype(dtype, name)
    if not isinstance(shape, list) or isinstance(shape, _Obj):
        raise _Bad(f"tensor '{name}' has shape {_show(shape)[:40]}, not a list of dimensions")
    if not all(_usize(d) for d in shape):
        raise _Bad(f"tensor '{name}' has shape {_show(shape)[:80]}: dimensions must be non-negative integers")
    if not isinstance(offsets, list) or isinstance(offsets, _Obj) or len(offsets) != 2:
        raise _Bad(f"tensor '{name}' has data_offsets {_show(offsets)[:40]}, not [start, end]")
    if not all(_usize(o) for o in offsets):
        raise _Bad(f"tensor '{name}' has data_offsets {_show(offsets)[:80]}: offsets must be non-negative "
                   "integers")
    return Tensor(dtype, tuple(shape), offsets[0], offsets[1])


def _check_ranges(tensors: dict[str, Tensor], data_size: int) -> None:
    """The crate's Metadata::validate, then the data section's length."""
    pos, prev = 0, None
    for name, t in sorted(tensors.items(), key=lambda kv: (kv[1].start, kv[1].end, kv[0])):
        if t.end < t.start:
            raise _Bad(f"tensor '{name}' has data_offsets [{t.start}, {t.end}]: it ends before it starts")
        if t.start != pos:
            if prev is None:
                raise _Bad(f"tensor '{name}' starts at byte {t.start} of the data, not at 0: the ranges must "
                           "cover the data from its start")
            if t.start < pos:
                raise _Bad(f"tensor '{name}' starts at byte {t.start} of the data, inside tensor '{prev}' "
                           f"(which ends at {pos}): overlapping byte ranges")
            raise _Bad(f"tensor '{name}' starts at byte {t.start} of the data but tensor '{prev}' ends at {pos}: "
                       f"a gap of {t.start - pos} bytes")
        pos, prev = t.end, name
        count = 1
        for d in t.shape:                  # left to right, as the crate's checked fold
            count *= d
            if count > U64:
                raise _Bad(f"tensor '{name}' has shape {list(t.shape)}, whose element count overflows 64 bits")
        bits = count * DTYPE_BITS[t.dtype]
        if bits > U64:
            raise _Bad(f"tensor '{name}' has shape {list(t.shape)}, whose size in bits overflows 64 bits")
        if bits % 8:
            raise _Bad(f"tensor '{name}': shape {list(t.shape)} of {t.dtype} is {bits} bits, not a whole "
                       "number of bytes")
        if t.end - t.start != bits // 8:
            raise _Bad(f"tensor '{name}': shape {list(t.shape)} of {t.dtype} is {bits // 8} bytes but its "
                       f"data_offsets [{t.start}, {t.end}] hold {t.end - t.start}")
    if pos != data_size:
        if pos > data_size:
            last = f"tensor '{prev}' ends" if prev else "the tensors end"
            raise _Bad(f"{last} at byte {pos} of the data, past the end of the file ({data_size} bytes of data: "
                       "a truncated file or offsets past its end)")
        raise _Bad(f"the tensors end at byte {pos} of the data but the file holds {data_size}: "
                   f"{data_size - pos} bytes belong to no tensor")


def header_length(first8: bytes, file_size: int, where: str) -> int:
    """N, the length of the JSON header, from the file's first 8 bytes; refused when the library
    would refuse it (too short a file, over 100,000,000, past the end of the file)."""
    if len(first8) < 8:
        raise ProbeError(f"{where}: not a valid safetensors file: {file_size} bytes, shorter than the 8-byte "
                         "header length")
    n = int.from_bytes(first8[:8], "little")
    if n > MAX_HEADER:
        raise ProbeError(f"{where}: not a valid safetensors file: header length {n} is over the format's limit "
                         f"of {MAX_HEADER} bytes")
    if 8 + n > file_size:
        raise ProbeError(f"{where}: not a valid safetensors file: header length {n} runs past the end of the "
                         f"file ({file_size} bytes)")
    return n


def parse(raw: bytes, file_size: int, where: str) -> tuple[dict[str, Tensor], list[str]]:
    """The header ``raw`` (the N bytes after the length) of a file of ``file_size`` bytes, checked
    as the safetensors library checks it: (its tensors, in the order names first appear; the names listed
    more than once, whose last entry counts). A one-line ProbeError naming ``where``, the tensor and the
    fault for anything the library refuses; the ``__metadata__`` entry (null or strings) is checked, not kept."""
    try:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad("its header is not UTF-8 text") from None
        try:
            doc = _json(text)
        except _Bad as exc:
            raise _Bad(f"its header is not valid JSON ({exc})") from None
        if not isinstance(doc, _Obj):
            kind = {list: "an array", type(None): "null", str: "a string", bool: "a boolean"}.get(type(doc), "a number")
            raise _Bad(f"its header is {kind}, not a JSON object")
        tensors: dict[str, Tensor] = {}
        seen: dict[str, int] = {}
        for key, value in doc:
            seen[key] = seen.get(key, 0) + 1
            if key != "__metadata__":
                tensors[key] = _tensor(key, value)     # a repeated name: the last entry counts, as in serde
            elif seen[key] > 1:
                raise _Bad("__metadata__ appears twice")
            elif value is not None and not isinstance(value, _Obj):
                raise _Bad(f"__metadata__ is {_show(value)[:40]}, not an object of strings")
            else:
                for k, x in value or ():
                    if not isinstance(x, str):
                        raise _Bad(f"__metadata__ entry '{k}' is {_show(x)[:40]}, not a string")
        _check_ranges(tensors, file_size - 8 - len(raw))
    except _Bad as exc:
        raise ProbeError(f"{where}: not a valid safetensors file: {exc}") from None
    return tensors, [k for k, c in seen.items() if c > 1 and k != "__metadata__"]
