"""Check a snapshot file against the schema; every rule comes from ``schemas/snapshot-v1.json``."""
from __future__ import annotations

import itertools
import json
import os
import re

import h5py
import numpy as np

from probe_schemas import snapshot_schema, version_tuple

from .snapshot import METRICS, P, RESUME_GROUP, check_header, damaged_file_error, named_datasets, open_h5

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def validate(path: str | os.PathLike) -> list[str]:
    """Findings (empty: the file matches the schema).

    Raises :class:`~probe.errors.ProbeError` for a file that is not a readable
    snapshot file at all (missing, not HDF5, truncated, newer schema major).
    """
    path = os.fspath(path)
    with open_h5(path) as f:
        try:
            version = check_header(f, path)
            return _Checker(f, version).run()
        except Exception as exc:
            damaged = damaged_file_error(exc, path)
            if damaged is None:
                raise
            raise damaged from None


class _Checker:
    def __init__(self, f: h5py.File, version: tuple[int, int]):
        self.f = f
        self.version = version
        self.findings: list[str] = []
        self.schema = snapshot_schema()

    def bad(self, msg: str) -> None:
        self.findings.append(msg)

    def run(self) -> list[str]:
        f = self.f
        meta = {}
        for key in self.schema["root_attrs"]:
            if key not in f.attrs:
                self.bad(f"missing root attribute '{key}'")
            elif key in ("config", "task", "dims"):
                try:
                    meta[key] = json.loads(f.attrs[key])
                except (TypeError, ValueError):
                    self.bad(f"root attribute '{key}' is not valid JSON")
        for key in self.schema.get("optional_root_attrs", {}):
            if key in f.attrs:
                try:
                    json.loads(f.attrs[key])
                except (TypeError, ValueError):
                    self.bad(f"root attribute '{key}' is not valid JSON")
        dims = meta.get("dims", {})
        task = meta.get("task", {})
        self.model = meta.get("config", {}).get("model") if isinstance(meta.get("config"), dict) else None
        for sym in ("vocab", "d_model", "seq", "probe", "layers", "heads", "d_head", "d_hidden"):
            if not isinstance(dims.get(sym), int):
                self.bad(f"dims attribute lacks integer '{sym}'")
        n = self._committed()
        for entry, spec in self.schema["datasets"].items():
            if version_tuple(spec.get("since", "1.0")) > self.version:
                continue  # added after this file was written
            for path in self._expand(entry, spec, dims, task):
                self._check(entry, spec, path, dims, n)
        self._semantic(dims, n)
        return self.findings

    def _committed(self) -> int:
        step = self.f.get(P["step"])
        if not isinstance(step, h5py.Dataset):
            return 0  # reported as missing by the dataset checks
        steps = np.asarray(step[...])
        if steps.size > 1 and np.any(np.diff(steps) <= 0):
            self.bad(f"'{P['step']}' is not strictly increasing")
        return int(steps.shape[0])

    def _expand(self, entry: str, spec: dict, dims: dict, task: dict) -> list[str]:
        path = spec["path"]
        fields = _PLACEHOLDER.findall(path)
        if not fields:
            layers = dims.get("layers", 0) if isinstance(dims.get("layers"), int) else 0
            required = (spec.get("required") or (spec.get("required_with_layers") and layers > 0)
                        or task.get("kind") in spec.get("required_for_tasks", ()))
            if self.model in spec.get("not_for_models", ()):
                required = False
            if required or path in self.f:
                return [path]
            return []
        choices: dict[str, list] = {}
        for fld in fields:
            if fld == "layer":
                choices[fld] = list(range(dims.get("layers", 0) if isinstance(dims.get("layers"), int) else 0))
            elif fld == "split":
                choices[fld] = list(task.get("splits", []))
                if not choices[fld]:
                    self.bad("task attribute lists no splits")
            elif fld == "metric":
                choices[fld] = list(METRICS)
            elif fld == "slot":
                choices[fld] = [0, 1] if P["resume_step"] in self.f else []
            elif fld in ("name", "group"):
                choices[fld] = None  # discovered below
        if "name" in fields or "group" in fields:
            base = path.split("{")[0].rstrip("/")
            found = self._leaf_names(base)
            if not found and spec.get("required"):
                self.bad(f"no datasets under '{base}'")
            if entry == "resume_tensor":
                return [p for p in found if re.fullmatch(r"resume/slot[01]/.+", p)]
            names = task.get(spec.get("names_from_task", ""), None)
            if isinstance(names, list):  # the task says which names must exist (its token groups)
                found += [path.format(group=n, name=n) for n in names
                          if path.format(group=n, name=n) not in found]
            return found
        paths = [path.format(**dict(zip(fields, combo)))
                 for combo in itertools.product(*(choices[fld] for fld in fields))]
        return paths if spec.get("required") else [p for p in paths if p in self.f]

    def _leaf_names(self, base: str) -> list[str]:
        grp = self.f.get(base)
        if not isinstance(grp, h5py.Group):
            return []
        return [f"{base}/{name}" for name, _ in named_datasets(grp)]

    def _check(self, entry: str, spec: dict, path: str, dims: dict, n: int) -> None:
        obj = self.f.get(path)
        if obj is None:
            needed = spec.get("needed_by")
            self.bad(f"missing dataset '{path}' ({entry})" + (f"; needed by {', '.join(needed)}" if needed else ""))
            return
        if not isinstance(obj, h5py.Dataset):
            self.bad(f"'{path}' should be a dataset")
            return
        want = spec.get("dtype", "any")
        if want == "utf-8 string":
            if h5py.check_string_dtype(obj.dtype) is None:
                self.bad(f"'{path}' has dtype {obj.dtype}, expected {want}")
        elif want != "any" and obj.dtype != np.dtype(want):
            self.bad(f"'{path}' has dtype {obj.dtype}, expected {want}")
        shape = spec.get("shape", ["..."])
        got = obj.shape
        if "..." not in shape and len(got) != len(shape):
            self.bad(f"'{path}' has shape {got}, expected {tuple(shape)}")
            return
        for axis, sym in enumerate(shape):
            if sym == "...":
                break
            if axis >= len(got):
                self.bad(f"'{path}' has shape {got}, expected {tuple(shape)}")
                return
            if sym == "n":
                if got[axis] < n:
                    self.bad(f"'{path}' has {got[axis]} snapshots, fewer than the {n} committed steps")
            elif isinstance(sym, int):
                if got[axis] != sym:
                    self.bad(f"'{path}' axis {axis} is {got[axis]}, expected {sym}")
            elif sym in dims and got[axis] != dims[sym]:
                self.bad(f"'{path}' axis {axis} is {got[axis]}, expected {sym}={dims[sym]}")

    def _semantic(self, dims: dict, n: int) -> None:
        vocab = dims.get("vocab")
        grp = self.f.get(P["token_group"].rsplit("/", 1)[0])
        if isinstance(grp, h5py.Group) and isinstance(vocab, int):
            for name, ds in grp.items():
                ids = np.asarray(ds[...])
                if ids.size and (ids.min() < 0 or ids.max() >= vocab):
                    self.bad(f"token group '{name}' has ids outside 0..{vocab - 1}")
        ld = self.f.get(P["label_dist"])
        if isinstance(ld, h5py.Dataset) and ld.ndim == 2:
            sums = np.asarray(ld[...]).sum(axis=1)
            if not np.all((np.abs(sums - 1) < 1e-6) | (np.abs(sums) < 1e-12)):
                self.bad(f"'{P['label_dist']}' has rows that sum to neither 1 nor 0")
        marks = self.f.get(P["resume_step"])
        if isinstance(marks, h5py.Dataset) and n:
            steps = np.asarray(self.f[P["step"]][:n])
            held = [int(s) for s in marks[...] if s >= 0]
            if held and not any(s in steps for s in held):
                self.bad(f"resume slots hold steps {held}, none of them a complete snapshot")
        if RESUME_GROUP in self.f and P["resume_step"] not in self.f:
            self.bad(f"'{RESUME_GROUP}' group without '{P['resume_step']}'")
