"""``probe validate``: every finding of a snapshot file against the schema (the checks themselves:
:mod:`._checks`, shared with the reader), and every stored chunk read once to verify its checksum."""
from __future__ import annotations

import itertools
import os

import h5py
import numpy as np

from probe_schemas import snapshot_schema, version_tuple

from ..limits import MAX_DEPTH, parse_json
from ..errors import ProbeError

from ._h5 import METRICS, P, RESUME_GROUP, SNAPSHOTS_GROUP, WEIGHTS_GROUP, check_header, damaged_file_error, open_h5
from ._checks import (
    BLOCK_BYTES, CHECKSUMS_SINCE, RESUME_SLOTS, unfinished_slots, LinkScan, PLACEHOLDER, blocks, checksum_finding,
    dataset_findings, group_findings, link_findings, meta_findings, schema_entry, step_findings, storage_problem,
    stored_chunks, unwritten_finding
)

# A chunk is read whole wherever a byte of it is (HDF5 verifies its checksum on the whole chunk): one
# larger than this is reported rather than read. The writer's chunks are at most ~1 MiB.
MAX_CHUNK_BYTES = 64 << 20


class Findings(list):
    """What :func:`validate` found: a list of sentences, empty when the file matches the schema, and
    ``notes``, what holds for the file either way (written before checksums: damage to its data
    cannot be detected)."""

    def __init__(self, findings=(), notes=()):
        super().__init__(findings)
        self.notes = list(notes)


def validate(path: str | os.PathLike) -> Findings:
    """Findings (empty: the file matches the schema), with the file's ``notes``.

    Reads every stored chunk once, in blocks of bounded size, so that HDF5 verifies each checksum
    (schema 1.4 on); the extents a file declares size no read.

    Raises :class:`~probe.errors.ProbeError` for a file that is not a readable
    snapshot file at all (missing, not HDF5, truncated, newer schema major).
    """
    path = os.fspath(path)
    with open_h5(path) as f:
        try:
            version = check_header(f, path)
            scan = link_findings(f)
            checker = _Checker(f, version, scan)
            return Findings(scan.findings + checker.run(), checker.notes)
        except Exception as exc:
            damaged = damaged_file_error(exc, path)
            if damaged is None:
                raise
            raise damaged from None


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
        self._addr = {name: addr for addr, names in self.objects.items() for name in names}
        self._first: dict[int, str] = {}         # the name each dataset was opened by (one id each: see _get)
        self.flagged = set(scan.paths)          # names never to open (links, then datasets stored elsewhere)
        self.data: list[str] = []               # data never written, damaged or unchecked
        self.unsound: set[str] = set()          # datasets whose data is not read for the checks (see data)
        self.notes: list[str] = []
        self.checked: set[str] = set()          # the names the schema's entries were checked at
        self._objs: dict[str, object] = {}
        self._stored_elsewhere: dict[int, bool] = {}

    def _safe(self, path: str) -> bool:
        return not any(path == u or path.startswith(u + "/") for u in self.flagged)

    def _get(self, path: str):
        """The object at ``path``; None when it is absent, behind a flagged link, or a dataset whose data
        lives in another file (then a finding, once per dataset). Nothing but its metadata is read."""
        if path in self._objs:
            return self._objs[path]
        addr = self._addr.get(path)
        if addr in self._first and self._safe(path):   # another name of an open dataset: its id, not a second
            obj = self._objs[path] = self._objs[self._first[addr]]   # one (see ReadCheck.one: SWMR refresh)
            return obj
        try:   # (a name the link scan found exists: one that does not open is damaged, where get() says None)
            obj = (self.f[path] if addr is not None else self.f.get(path)) if self._safe(path) else None
        except (KeyError, OSError, RuntimeError) as exc:   # its object header is damaged: a finding, not the end
            self.data.append(_damage(exc, path))
            self.flagged.add(path)
            obj = None
        if addr is not None and obj is not None:
            self._first[addr] = path
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

    def _data(self, n: int, last: int | None) -> None:
        """Every dataset once (by object), those the checks above did not open too (the resume state,
        anything outside the schema): its data must be in this file, hold what its extent declares and,
        from schema 1.4, carry checksums that match (:meth:`_sound`). Not the resume slots no resume
        reads, nor rows past the committed ones: a killed writer may have left them half-written. A
        live writer rewrites a slot in place: a slot found damaged whose mark has changed since was
        being rewritten as it was read, not damaged."""
        unread = tuple(slot + "/" for slot in unfinished_slots(self._get, n))   # their datasets may not open
        held, in_slots = self._marks(), {}
        for names in self.objects.values():
            if all(x.startswith(unread) for x in names) or P["step"] in names:   # (step: by _committed)
                continue
            ds = self._get(names[0])
            if isinstance(ds, h5py.Dataset) and not self._sound(names, ds, self._rows(names, n, last)):
                slot = next((i for i, s in enumerate(RESUME_SLOTS) if names[0].startswith(s + "/")), None)
                if slot is not None:
                    in_slots.setdefault(slot, []).append(self.data[-1])
        if in_slots and self.f.swmr_mode:
            now = self._marks()
            for slot, found in in_slots.items():
                if held is None or now is None or held[slot] != now[slot]:
                    self.data = [x for x in self.data if x not in found]

    def _marks(self) -> list[int] | None:
        """The resume slots' marks as of now (``resume/slot_step``), None where they cannot be read."""
        marks = self._get(P["resume_step"])
        try:
            if self.f.swmr_mode:
                marks.refresh()
            held = np.asarray(marks[...]).tolist()
            return held if len(held) == len(RESUME_SLOTS) else None
        except (AttributeError, OSError, RuntimeError, ValueError, TypeError):
            return None

    def _rows(self, names: list[str], n: int, last: int | None) -> int | None:
        """The rows of a dataset that hold data: the ``n`` committed of a time-first one, the loss log's
        (and its marks') up to the last snapshot's step, all of any other (None)."""
        for entry in filter(None, (schema_entry(x, self.version) for x in names)):
            if entry[0] in ("step_loss", "step_logged"):
                return 0 if last is None else max(int(last), 0)
            if entry[1].get("shape", [None])[:1] == ["n"]:
                return n
        return None

    def _sound(self, names: list[str], ds: h5py.Dataset, rows: int | None) -> bool:
        """Whether the data of ``ds`` (its first ``rows`` rows) was all written and, where it carries
        checksums, matches them; else a finding, and the checks that read data pass it by."""
        name = next((x for x in names if x.startswith(WEIGHTS_GROUP + "/")), names[0])   # a weight by its role
        missing = checksum_finding(name, ds, self.version)
        if missing:
            self.data.append(missing)
        try:
            stored = stored_chunks(ds) if ds.chunks else None
            problem = unwritten_finding(name, ds, rows, stored) or (
                self._verify(name, ds, rows, stored) if ds.fletcher32 else None)
        except (OSError, RuntimeError) as exc:   # its chunk index is damaged
            problem = _damage(exc, name)
        if problem:
            self.data.append(problem)
            self.unsound.update(names)
        return problem is None

    def _verify(self, name: str, ds: h5py.Dataset, rows: int | None, stored: list[tuple[int, ...]]) -> str | None:
        """Read every ``stored`` chunk of ``ds`` (of its first ``rows`` rows) once, in slabs of at most
        :data:`BLOCK_BYTES`: HDF5 verifies each chunk's checksum as it reads it. A slab that fails is read
        again chunk by chunk, to name the snapshots that are damaged."""
        nbytes = ds.dtype.itemsize * int(np.prod(ds.chunks, dtype=np.int64))
        if nbytes > MAX_CHUNK_BYTES:
            return (f"'{name}' has chunks of {nbytes} bytes, more than validate reads at once ({MAX_CHUNK_BYTES}): "
                    "its checksums are not verified")
        stored = [c for c in stored if rows is None or c[0] < rows]
        failed: dict[tuple, BaseException] = {}
        for slab, members in _slabs(ds.shape, ds.chunks, stored, max(1, BLOCK_BYTES // nbytes)):
            try:
                ds[slab]
            except (OSError, RuntimeError):
                for c in members:
                    try:
                        ds[_slab([c], ds.shape, ds.chunks, 0)]
                    except (OSError, RuntimeError) as exc:
                        failed[c] = exc
        if not failed:
            return None
        return _damage(next(iter(failed.values())), name, self._where(name, sorted({c[0] for c in failed})))

    def _where(self, name: str, rows: list[int]) -> str:
        """`` (snapshot at step S)`` / `` (snapshots at steps S, T)`` for damaged rows of a time-first dataset."""
        if not name.startswith(SNAPSHOTS_GROUP + "/"):
            return ""
        step = self._objs.get(P["step"])
        try:
            if name == P["step"] or P["step"] in self.unsound or not isinstance(step, h5py.Dataset):
                raise ValueError
            shown = [str(int(step[i])) for i in rows[:5]]
            what = "snapshot at step" if len(rows) == 1 else "snapshots at steps"
        except (OSError, RuntimeError, ValueError, IndexError):
            shown, what = [str(i) for i in rows[:5]], "snapshot" if len(rows) == 1 else "snapshots"
        return f" ({what} {', '.join(shown)}{f' and {len(rows) - 5} more' if len(rows) > 5 else ''})"

    def _attrs(self) -> dict:
        meta = {}
        for key in self.schema["root_attrs"]:
            if key not in self.f.attrs:
                self.findings.append(f"missing root attribute '{key}'")
            elif key in ("config", "task", "dims"):
                self._json(key, meta)
        for key in self.schema.get("optional_root_attrs", {}):
            if key in self.f.attrs:
                self._json(key, {})
        return meta

    def _json(self, key: str, into: dict) -> None:
        """Root attribute ``key`` parsed into ``into[key]``; a finding where it is not JSON or nests too deep."""
        try:
            into[key] = parse_json(self.f.attrs[key], self.f.filename, f"root attribute '{key}'")
        except (TypeError, ValueError):
            self.findings.append(f"root attribute '{key}' is not valid JSON")
        except ProbeError:
            self.findings.append(f"root attribute '{key}' is nested deeper than {MAX_DEPTH} levels")

    def run(self) -> list[str]:
        meta = self._attrs()
        findings, dims, task = meta_findings(meta)
        self.findings += findings
        config = meta.get("config")
        self.model = config.get("model") if isinstance(config, dict) else None
        n, last = self._committed()   # first: under SWMR every other dataset is grown before 'step'
        for entry, spec in self.schema["datasets"].items():
            if version_tuple(spec.get("since", "1.0")) > self.version:
                continue  # added after this file was written
            if spec.get("dtype", "any") == "any" and spec.get("shape", ["..."]) == ["..."]:
                continue  # (the resume state) nothing to check but where its data live: below
            for path in self._expand(spec, dims, task):
                self._check(entry, spec, path, dims, n)
        self._data(n, last)
        self._every_name(dims, n)
        self._semantic(dims, n, last)
        if self.version < CHECKSUMS_SINCE:
            since = ".".join(map(str, CHECKSUMS_SINCE))
            self.notes.append(f"carries no checksums (written with schema {'.'.join(map(str, self.version))}, "
                              f"before {since}): damage to its data cannot be detected")
        return self.storage + self.findings + self.data

    def _committed(self) -> tuple[int, int | None]:
        """(committed snapshots, the last one's step) from ``snapshots/step``, read in blocks; (0, None)
        where it is missing, malformed, never written or damaged (each a finding of its own)."""
        step = self._get(P["step"])
        if not isinstance(step, h5py.Dataset) or step.ndim != 1 or step.dtype.kind not in "iuf":
            return 0, None  # reported as missing, or as of the wrong shape or dtype, by the dataset checks
        if not self._sound([P["step"]], step, None):
            return 0, None
        prev = None
        for start, block in blocks(step):
            found = step_findings(block if prev is None else np.concatenate(([prev], block)),
                                  start if prev is None else start - 1)
            if found:
                self.findings += found
                break
            prev = block[-1]
        n = int(step.shape[0])
        return n, (step[n - 1] if n else None)

    def _expand(self, spec: dict, dims: dict, task: dict) -> list[str]:
        path = spec["path"]
        fields = PLACEHOLDER.findall(path)
        if not fields:
            required = (spec.get("required") or (spec.get("required_with_layers") and dims.get("layers", 0) > 0)
                        or task.get("kind") in spec.get("required_for_tasks", ()))
            required = required and self.model not in spec.get("not_for_models", ()) \
                and task.get("kind") not in spec.get("not_for_tasks", ()) \
                and not any(dims.get(sym) == 0 for sym in spec.get("shape", ()))   # (a Recorder's empty probe batch)
            return [path] if required or self._has(path) else []
        if "name" in fields or "group" in fields:   # discovered (the resume state, checked apart, never comes here)
            base = path.split("{")[0].rstrip("/")
            found = self._leaf_names(base)
            names = task.get(spec.get("names_from_task", ""), None)
            if not found and spec.get("required") and not names == []:   # (a task may name none: a Recorder's)
                self.findings.append(f"no datasets under '{base}'")
            if isinstance(names, list):  # the task says which names must exist (its token groups)
                found += [path.format(group=n, name=n) for n in names
                          if path.format(group=n, name=n) not in found]
            return found
        splits = task.get("splits")
        choices = {"layer": range(dims.get("layers", 0)), "metric": METRICS,
                   "split": [s for s in splits if isinstance(s, str)] if isinstance(splits, list) else []}
        paths = [path.format(**dict(zip(fields, combo)))
                 for combo in itertools.product(*(choices[fld] for fld in fields))]
        left = task.get("left_out") if isinstance(task.get("left_out"), list) else []
        left_out = {f"{WEIGHTS_GROUP}/{n}" for n in left}   # (1.7: a Recorder told to keep only some tensors)
        return paths if spec.get("required") and not left_out else \
            [p for p in paths if self._has(p) or (spec.get("required") and p not in left_out)]

    def _leaf_names(self, base: str) -> list[str]:
        """The datasets below ``base`` (by their hard-link names; not those behind a flagged link)."""
        return [p for p in self._addr if p.startswith(base + "/") and isinstance(self._get(p), h5py.Dataset)]

    def _every_name(self, dims: dict, n: int) -> None:
        """Every other dataset, by each of its names, against the schema entry that name falls under, as a
        reader checks what it reads (a layer's weight past the layers ``dims`` counts, a parameter's
        canonical name): whatever a reader refuses is a finding here."""
        unread = tuple(slot + "/" for slot in unfinished_slots(self._get, n))
        for names in self.objects.values():
            names = [x for x in names if x not in self.checked and not x.startswith(unread)]
            ds = self._get(names[0]) if names else None
            if not isinstance(ds, h5py.Dataset):
                continue
            for name in names:
                entry = schema_entry(name, self.version)
                if entry is not None:
                    self.findings += dataset_findings(name, ds.dtype, ds.shape, entry[1], dims, n)

    def _check(self, entry: str, spec: dict, path: str, dims: dict, n: int) -> None:
        self.checked.add(path)
        obj = self._get(path)
        if obj is None:
            if self._safe(path):   # (a flagged one is reported as such)
                needed = f"; needed by {', '.join(spec['needed_by'])}" if spec.get("needed_by") else ""
                self.findings.append(f"missing dataset '{path}' ({entry}){needed}")
            return
        if not isinstance(obj, h5py.Dataset):
            self.findings.append(f"'{path}' should be a dataset")
            return
        self.findings += dataset_findings(path, obj.dtype, obj.shape, spec, dims, n)

    def _semantic(self, dims: dict, n: int, last: int | None) -> None:
        """What the values must say (token ids in the vocabulary, P^s rows summing to 1 or 0, a resume
        slot at a committed step); read in blocks, and only from datasets whose data is sound."""
        def readable(path: str, ok) -> h5py.Dataset | None:
            ds = self._get(path)
            return ds if isinstance(ds, h5py.Dataset) and path not in self.unsound and ok(ds) else None

        grp = self._get(P["token_group"].rsplit("/", 1)[0])
        if isinstance(grp, h5py.Group):
            groups = {}
            for name in grp:   # (any other shape or dtype is reported by the dataset checks)
                ds = readable(f"{grp.name.lstrip('/')}/{name}", lambda d: d.dtype.kind in "iu" and d.ndim == 1)
                if ds is not None:   # the range of its ids is all the check needs
                    groups[name] = np.array([x for _, b in blocks(ds) for x in (b.min(), b.max())])
            self.findings += group_findings(groups, dims)
        ld = readable(P["label_dist"], lambda d: d.ndim == 2 and d.dtype.kind == "f")
        if ld is not None and not all(np.all((np.abs(s - 1) < 1e-6) | (np.abs(s) < 1e-12)) for s in _row_sums(ld)):
            self.findings.append(f"'{P['label_dist']}' has rows that sum to neither 1 nor 0")
        marks = readable(P["resume_step"], lambda d: d.shape == (2,) and d.dtype.kind in "iu")
        step = readable(P["step"], lambda d: d.ndim == 1)
        if marks is not None and step is not None and n:
            held = [int(s) for s in marks[...] if s >= 0]
            if held and not any(np.isin(held, b).any() for _, b in blocks(step, n)):
                self.findings.append(f"resume slots hold steps {held}, none of them a complete snapshot")
        log, given = self._get(P["step_loss"]), self._get(P["step_logged"])
        if isinstance(log, h5py.Dataset) and isinstance(given, h5py.Dataset) and given.ndim == log.ndim == 1:
            rows = min(log.shape[0], max(last or 0, 0))   # (rows past the last snapshot's step are not read)
            if given.shape[0] < rows:
                self.findings.append(f"'{P['step_logged']}' has {given.shape[0]} rows, fewer than the {rows} of "
                                     f"'{P['step_loss']}' up to the last snapshot: one mark per step of the log")
        if self._has(RESUME_GROUP) and not self._has(P["resume_step"]):
            self.findings.append(f"'{RESUME_GROUP}' group without '{P['resume_step']}'")


def _damage(exc: BaseException, name: str, where: str = "") -> str:
    """A finding for an HDF5 error met reading ``name``, in the words of a reader's error line."""
    return str(damaged_file_error(exc, "", name, where) or exc).split("damaged HDF5 file: ", 1)[-1]


def _slabs(shape: tuple, chunks: tuple, stored: list[tuple[int, ...]], per: int):
    """(hyperslab, its chunks) covering the chunk offsets ``stored`` (in order): runs of up to ``per``
    neighbours along the last axis that the chunks divide (so a time-first dataset of whole-row chunks
    is read many snapshots at a time, a large tensor many row blocks at a time); never a chunk that is
    not stored, whose read costs what the file declares, not what it holds."""
    axis = max((a for a, (s, c) in enumerate(zip(shape, chunks)) if s > c), default=0)
    run: list[tuple[int, ...]] = []
    for c in stored:
        if run and (len(run) == per or c[axis] != run[-1][axis] + chunks[axis]
                    or c[:axis] + c[axis + 1:] != run[-1][:axis] + run[-1][axis + 1:]):
            yield _slab(run, shape, chunks, axis), run
            run = []
        run.append(c)
    if run:
        yield _slab(run, shape, chunks, axis), run


def _slab(run: list[tuple[int, ...]], shape: tuple, chunks: tuple, axis: int) -> tuple[slice, ...]:
    """The hyperslab of the chunks ``run`` (neighbours along ``axis``), clipped to the extent."""
    return tuple(slice(run[0][a], min((run[-1][a] if a == axis else run[0][a]) + chunks[a], shape[a]))
                 for a in range(len(shape)))


def _row_sums(ds: h5py.Dataset):
    """The row sums of a 2-D ``ds``, a block of rows at a time, each read at most :data:`BLOCK_BYTES`
    (in column blocks where a row is larger)."""
    rows, cols = ds.shape
    width = max(1, min(cols, BLOCK_BYTES // ds.dtype.itemsize))
    height = max(1, BLOCK_BYTES // (width * ds.dtype.itemsize))
    for a in range(0, rows, height):
        sums = np.zeros(min(height, rows - a))
        for b in range(0, cols, width):
            sums += np.asarray(ds[a:a + height, b:b + width], dtype=np.float64).sum(axis=1)
        yield sums
