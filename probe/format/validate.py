"""``probe validate``: every finding of a snapshot file against the schema (the checks themselves:
:mod:`._checks`, shared with the reader)."""
from __future__ import annotations

import itertools
import json
import os
import re

import h5py
import numpy as np

from probe_schemas import snapshot_schema, version_tuple

from ._h5 import METRICS, P, RESUME_GROUP, check_header, damaged_file_error, open_h5
from ._checks import (
    unfinished_slots, LinkScan, _PLACEHOLDER, _b, dataset_findings, group_findings, link_findings, meta_findings,
    step_findings, storage_problem
)


def validate(path: str | os.PathLike) -> list[str]:
    """Findings (empty: the file matches the schema).

    Raises :class:`~probe.errors.ProbeError` for a file that is not a readable
    snapshot file at all (missing, not HDF5, truncated, newer schema major).
    """
    path = os.fspath(path)
    with open_h5(path) as f:
        try:
            version = check_header(f, path)
            scan = link_findings(f)
            return scan.findings + _Checker(f, version, scan).run()
        except Exception as exc:
            damaged = damaged_file_error(exc, path)
            if damaged is None:
                raise
            raise damaged from None


# ----------------------------------------------------------------------------
# validate: every finding
# ----------------------------------------------------------------------------

class _Checker:
    """Every finding of a file (``scan``: what :func:`link_findings` found; nothing at or below a
    flagged link is touched, nor a dataset whose data lives in another file)."""

    def __init__(self, f: h5py.File, version: tuple[int, int], scan: LinkScan):
        self.f = f
        self.version = version
        self.findings: list[str] = []
        self.storage: list[str] = []           # datasets whose data lives in other files
        self.schema = snapshot_schema()
        self.objects = scan.objects()
        self.leaves = [name for names in self.objects.values() for name in names]
        self.flagged = set(scan.paths)          # names never to open (links, then datasets stored elsewhere)
        self._objs: dict[str, object] = {}
        self._stored_elsewhere: dict[int, bool] = {}

    def bad(self, msg: str) -> None:
        self.findings.append(msg)

    def _safe(self, path: str) -> bool:
        return not any(path == u or path.startswith(u + "/") for u in self.flagged)

    def _get(self, path: str):
        """The object at ``path``; None when it is absent, behind a flagged link, or a dataset whose data
        lives in another file (then a finding, once per dataset). Nothing but its metadata is read."""
        if path in self._objs:
            return self._objs[path]
        obj = self.f.get(path) if self._safe(path) else None
        if isinstance(obj, h5py.Dataset):
            ident = hash(obj.id)   # the object, whichever of its hard links names it
            if ident not in self._stored_elsewhere:
                problem = storage_problem(obj)
                self._stored_elsewhere[ident] = problem is not None
                if problem is not None:
                    self.storage.append(f"'{path}' {problem}")
            if self._stored_elsewhere[ident]:
                self.flagged.add(path)
                obj = None
            elif self.f.swmr_mode:
                obj.refresh()   # its extent as of now: after 'step' was read (see run)
        self._objs[path] = obj
        return obj

    def _has(self, path: str) -> bool:
        return self._get(path) is not None

    def _elsewhere(self) -> None:
        """Every dataset the checks above did not open (the resume state, anything outside the schema):
        its data must be in this file too. Opened once per object, through the low-level API (~25 µs
        each, a third of h5py's Dataset: a file holds hundreds)."""
        root = self.f["/"].id
        unread = tuple(slot + "/" for slot in unfinished_slots(self._get))   # their datasets may not open
        for names in self.objects.values():
            if any(name in self._objs for name in names) or all(n.startswith(unread) for n in names):
                continue
            ds = h5py.h5o.open(root, _b(names[0]))
            if isinstance(ds, h5py.h5d.DatasetID):
                problem = storage_problem(ds)
                if problem is not None:
                    self.storage.append(f"'{names[0]}' {problem}")
                    self.flagged.update(names)

    def _attrs(self) -> dict:
        meta = {}
        for key in self.schema["root_attrs"]:
            if key not in self.f.attrs:
                self.bad(f"missing root attribute '{key}'")
            elif key in ("config", "task", "dims"):
                try:
                    meta[key] = json.loads(self.f.attrs[key])
                except (TypeError, ValueError):
                    self.bad(f"root attribute '{key}' is not valid JSON")
        for key in self.schema.get("optional_root_attrs", {}):
            if key in self.f.attrs:
                try:
                    json.loads(self.f.attrs[key])
                except (TypeError, ValueError):
                    self.bad(f"root attribute '{key}' is not valid JSON")
        return meta

    def run(self) -> list[str]:
        meta = self._attrs()
        findings, dims, task = meta_findings(meta)
        self.findings += findings
        config = meta.get("config")
        self.model = config.get("model") if isinstance(config, dict) else None
        n = self._committed()   # first: under SWMR every other dataset is grown before 'step'
        for entry, spec in self.schema["datasets"].items():
            if version_tuple(spec.get("since", "1.0")) > self.version:
                continue  # added after this file was written
            if spec.get("dtype", "any") == "any" and spec.get("shape", ["..."]) == ["..."]:
                continue  # (the resume state) nothing to check but where its data live: below
            for path in self._expand(entry, spec, dims, task):
                self._check(entry, spec, path, dims, n)
        self._elsewhere()
        self._semantic(dims, n)
        return self.storage + self.findings

    def _committed(self) -> int:
        step = self._get(P["step"])
        if not isinstance(step, h5py.Dataset) or step.ndim != 1 or step.dtype.kind not in "iuf":
            return 0  # reported as missing, or as of the wrong shape or dtype, by the dataset checks
        steps = np.asarray(step[...])
        self.findings += step_findings(steps)
        return int(steps.shape[0])

    def _expand(self, entry: str, spec: dict, dims: dict, task: dict) -> list[str]:
        path = spec["path"]
        fields = _PLACEHOLDER.findall(path)
        if not fields:
            layers = dims.get("layers", 0)
            required = (spec.get("required") or (spec.get("required_with_layers") and layers > 0)
                        or task.get("kind") in spec.get("required_for_tasks", ()))
            if self.model in spec.get("not_for_models", ()):
                required = False
            if required or self._has(path):
                return [path]
            return []
        choices: dict[str, list] = {}
        for fld in fields:
            if fld == "layer":
                choices[fld] = list(range(dims.get("layers", 0)))
            elif fld == "split":
                splits = task.get("splits")
                choices[fld] = [s for s in splits if isinstance(s, str)] if isinstance(splits, list) else []
            elif fld == "metric":
                choices[fld] = list(METRICS)
            elif fld == "slot":
                choices[fld] = [0, 1] if self._has(P["resume_step"]) else []
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
        return paths if spec.get("required") else [p for p in paths if self._has(p)]

    def _leaf_names(self, base: str) -> list[str]:
        """The datasets below ``base`` (by their hard-link names; not those behind a flagged link)."""
        return [p for p in self.leaves if p.startswith(base + "/") and isinstance(self._get(p), h5py.Dataset)]

    def _check(self, entry: str, spec: dict, path: str, dims: dict, n: int) -> None:
        obj = self._get(path)
        if obj is None:
            if self._safe(path):   # (a flagged one is reported as such)
                needed = spec.get("needed_by")
                self.bad(f"missing dataset '{path}' ({entry})" + (f"; needed by {', '.join(needed)}" if needed else ""))
            return
        if not isinstance(obj, h5py.Dataset):
            self.bad(f"'{path}' should be a dataset")
            return
        self.findings += dataset_findings(path, obj.dtype, obj.shape, spec, dims, n)

    def _semantic(self, dims: dict, n: int) -> None:
        grp = self._get(P["token_group"].rsplit("/", 1)[0])
        if isinstance(grp, h5py.Group):
            groups = {}
            for name in grp:
                ds = self._get(f"{grp.name.lstrip('/')}/{name}")
                if isinstance(ds, h5py.Dataset) and ds.dtype.kind in "iu" and ds.ndim == 1:
                    groups[name] = np.asarray(ds[...])   # (any other shape is reported by the dataset checks)
            self.findings += group_findings(groups, dims)
        ld = self._get(P["label_dist"])
        if isinstance(ld, h5py.Dataset) and ld.ndim == 2 and ld.dtype.kind == "f":
            sums = np.asarray(ld[...]).sum(axis=1)
            if not np.all((np.abs(sums - 1) < 1e-6) | (np.abs(sums) < 1e-12)):
                self.bad(f"'{P['label_dist']}' has rows that sum to neither 1 nor 0")
        marks = self._get(P["resume_step"])
        step = self._get(P["step"])
        if isinstance(marks, h5py.Dataset) and isinstance(step, h5py.Dataset) and n and marks.dtype.kind in "iu":
            steps = np.asarray(step[:n])
            held = [int(s) for s in np.ravel(marks[...]) if s >= 0]
            if held and not any(s in steps for s in held):
                self.bad(f"resume slots hold steps {held}, none of them a complete snapshot")
        if self._has(RESUME_GROUP) and not self._has(P["resume_step"]):
            self.bad(f"'{RESUME_GROUP}' group without '{P['resume_step']}'")
