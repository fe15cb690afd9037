"""The checks of a snapshot file against the schema; every rule comes from ``schemas/snapshot-v1.json``.

One set of checks serves two callers. :func:`~.validate.validate` lists every finding.
:class:`ReadCheck` is what :class:`~.run.Run` runs: at open, the links of the whole file, the
``config`` / ``task`` / ``dims`` attributes and ``snapshots/step``; then each dataset before its first
read (its storage, its checksum from schema 1.4, dtype, rank, axes against ``dims``, one row per
committed step). A reader refuses the file with the first finding, in validate's words, before any
number is read from it. A reader reads link info, dataset metadata, ``snapshots/step`` and the token
groups, never a weight, and HDF5 verifies the checksum of each chunk it reads; validate also reads
every chunk once (in bounded blocks) to verify them all.
"""
from __future__ import annotations

import re
from functools import lru_cache

import h5py
import numpy as np

from probe_schemas import snapshot_schema, version_tuple

from ..errors import ProbeError
from ._h5 import P, PARAMS_GROUP, SNAPSHOTS_GROUP, damaged_file_error


PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Soft links followed in a row before the chain counts as a loop (HDF5's own limit, H5L_NUM_LINKS).
_MAX_SOFT_HOPS = 16
# The dims symbols every file's ``dims`` attribute holds as integers.
_DIMS = ("vocab", "d_model", "seq", "probe", "layers", "heads", "d_head", "d_hidden")
RESUME_SLOTS = tuple(P["resume_tensor"].split("{slot}")[0] + str(slot) for slot in (0, 1))

# Links and storage: nothing may lead out of the file
class LinkScan:
    """What :func:`link_findings` found: its findings, the flagged link names (nothing at or below
    them may be touched) and, on demand, every hard-linked name with nothing below it (datasets,
    empty groups)."""

    def __init__(self, links: list[tuple[bytes, int, int]]):
        self.links = links
        self.findings: list[str] = []
        self.paths: set[str] = set()

    def objects(self) -> dict[int, list[str]]:
        """The leaves by object (address in the file): a dataset with several hard links, once."""
        parents = {name.rpartition(b"/")[0] for name, _, _ in self.links}
        out: dict[int, list[str]] = {}
        for name, kind, addr in self.links:
            if kind == h5py.h5l.TYPE_HARD and name not in parents:
                out.setdefault(addr, []).append(_s(name))
        return out


def link_findings(f: h5py.File, prune: tuple[str, ...] = ()) -> LinkScan:
    """Every link that would make a reader open another file, or block: external links, soft links
    that dangle or leave the file (through an external link), other link classes.

    Walks the link table (HDF5's H5Lvisit, which descends hard links only) and resolves nothing, so
    an external link to a FIFO cannot block; a soft link's target is followed one link at a time and
    only through hard and soft links. ``prune``: groups whose links are left out (their own link is
    checked). Datasets that keep their data in other files are found where they are opened
    (:func:`storage_problem`): that needs each dataset opened, which this walk avoids.
    """
    links: list[tuple[bytes, int, int]] = []
    _walk(f["/"].id, b"", tuple(_b(p) for p in prune), links)
    scan = LinkScan(links)
    root = f["/"].id
    for raw, kind, _ in links:
        if kind != h5py.h5l.TYPE_HARD:
            prefix = _s(raw.rpartition(b"/")[0] + b"/") if b"/" in raw else ""
            problem = _link_problem(root, raw, kind, prefix)
            if problem is not None:
                scan.findings.append(f"'{_s(raw)}' {problem}")
                scan.paths.add(_s(raw))
    return scan


def _walk(gid, prefix: bytes, prune: tuple[bytes, ...], out: list[tuple[bytes, int, int]]) -> None:
    """(path, link class, object address for a hard link) of every link below group ``gid`` (at
    ``prefix``), without those below a group in ``prune``: one H5Lvisit where nothing is pruned (and
    no object header is damaged), else child by child."""
    if not any(p.startswith(prefix) for p in prune):
        found: list[tuple[bytes, int, int]] = []
        try:
            gid.links.visit(lambda name, info: found.append((prefix + name, info.type, info.u)), info=True)
            out += found
            return
        except (KeyError, OSError, RuntimeError):
            pass   # an object header below is damaged (HDF5 opens each, to descend): child by child instead
    children: list[tuple[bytes, int, int]] = []
    gid.links.iterate(lambda name, info: children.append((name, info.type, info.u)), info=True)
    for name, kind, addr in children:
        out.append((prefix + name, kind, addr))
        if kind == h5py.h5l.TYPE_HARD and prefix + name not in prune:
            try:
                obj = h5py.h5o.open(gid, name)
            except (KeyError, OSError, RuntimeError):
                continue   # a damaged object header: a leaf here, which its reader (or validate) reports
            if isinstance(obj, h5py.h5g.GroupID):
                _walk(obj, prefix + name + b"/", prune, out)


def _b(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _s(name) -> str:
    return name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else str(name)


def _link_problem(root, raw: bytes, kind: int, prefix: str) -> str | None:
    """Why the link ``raw`` (a path from the root, of class ``kind``, not hard) must not be followed;
    None for a soft link whose target resolves inside the file."""
    if kind == h5py.h5l.TYPE_SOFT:
        target = _s(root.links.get_val(raw))
        problem = _resolve(root, _join(prefix, target), 1)
        return None if problem is None else f"is a soft link to '{target}', which {problem}"
    if kind == h5py.h5l.TYPE_EXTERNAL:
        filename, obj = root.links.get_val(raw)
        return f"is an external link to '{_s(obj)}' in {_s(filename)}; links to other files are never followed"
    return f"is a user-defined link (class {int(kind)}); only links inside the file are followed"


def _join(prefix: str, target: str) -> str:
    """A soft link's target as a path from the root (relative targets start at the link's group)."""
    return target if target.startswith("/") else "/" + prefix + target


def _resolve(root, path: str, hops: int) -> str | None:
    """Follow ``path`` (from the root group ``root``) one link at a time without leaving the file:
    None when it reaches an object, else what goes wrong ("does not exist", "leaves the file ...")."""
    if hops > _MAX_SOFT_HOPS:
        return f"is part of a loop of more than {_MAX_SOFT_HOPS} soft links"
    parts = [p for p in path.split("/") if p and p != "."]
    node = root
    done = ""
    for i, part in enumerate(parts):
        if not isinstance(node, h5py.h5g.GroupID) or not node.links.exists(_b(part)):
            return "does not exist"
        kind = node.links.get_info(_b(part)).type
        if kind == h5py.h5l.TYPE_SOFT:
            target = _s(node.links.get_val(_b(part)))
            rest = "/".join(parts[i + 1:])
            return _resolve(root, _join(done, target).rstrip("/") + ("/" + rest if rest else ""), hops + 1)
        if kind != h5py.h5l.TYPE_HARD:
            return f"leaves the file through the link '{done}{part}'"
        node = h5py.h5o.open(node, _b(part))
        done += part + "/"
    return None


def storage_problem(ds: h5py.Dataset | h5py.h5d.DatasetID) -> str | None:
    """Why the data of ``ds`` lives in another file (None: it is stored in this one). Reads the
    creation properties only: the extent of a virtual dataset may itself open its source files."""
    if isinstance(ds, h5py.Dataset):   # its creation properties, which h5py holds already
        if not ds.external and not ds.is_virtual:
            return None
        ds = ds.id
    dcpl = ds.get_create_plist()
    n_ext = dcpl.get_external_count()
    if n_ext:
        files = sorted({_s(dcpl.get_external(i)[0]) for i in range(n_ext)})
        return f"stores its data in another file ({', '.join(files)}); external storage is never read"
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        files = sorted({_s(dcpl.get_virtual_filename(i)) for i in range(dcpl.get_virtual_count())} - {"."})
        if files:
            return (f"is a virtual dataset with data in other files ({', '.join(files)}); "
                    "virtual datasets are never read")
    return None

# Data: what is stored, what carries a checksum, reads in bounded blocks
# At most this many bytes are read at once wherever a whole dataset is read: a file may declare any
# extent (a 10^9-token vocabulary costs it a few bytes of header), so no read is sized by one.
BLOCK_BYTES = 16 << 20
CHECKSUMS_SINCE = version_tuple(snapshot_schema()["checksums"]["since"])


def blocks(ds: h5py.Dataset, stop: int | None = None):
    """``(start, ds[start:end])`` over axis 0 up to ``stop`` (default: all rows), each block at most
    :data:`BLOCK_BYTES` (but at least one row: a caller whose rows may be larger reads columns too)."""
    stop = ds.shape[0] if stop is None else min(stop, ds.shape[0])
    row = ds.dtype.itemsize * int(np.prod(ds.shape[1:], dtype=np.int64))
    step = max(1, BLOCK_BYTES // max(row, 1))
    for start in range(0, stop, step):
        yield start, np.asarray(ds[start:min(start + step, stop)])


def stored_chunks(ds: h5py.Dataset) -> list[tuple[int, ...]]:
    """The offsets of the chunks of ``ds`` that hold data, in order, found in its chunk index without
    reading them (a chunk never written reads as the fill value and is stored nowhere)."""
    out: list[tuple[int, ...]] = []
    try:
        ds.id.chunk_iter(lambda info: out.append(tuple(info.chunk_offset)))
    except (AttributeError, NotImplementedError):   # h5py or HDF5 before H5Dchunk_iter (1.14)
        out = [tuple(ds.id.get_chunk_info(i).chunk_offset) for i in range(ds.id.get_num_chunks())]
    return sorted(out)


def unwritten_finding(path: str, ds: h5py.Dataset, rows: int | None = None,
                      stored: list[tuple[int, ...]] | None = None) -> str | None:
    """Whether part of ``ds`` (its first ``rows`` rows; default: all) was never written: the writer
    writes every row it commits and every other dataset whole, so such a part is an extent the file
    declares but holds no data for (it would read as zeros). Metadata only: the chunk index (or
    ``stored``, the :func:`stored_chunks` the caller has)."""
    if not ds.size:
        return None
    if ds.ndim:
        rows = ds.shape[0] if rows is None else min(rows, ds.shape[0])
        if not rows:
            return None
    layout = ds.id.get_create_plist().get_layout()
    if layout == h5py.h5d.CHUNKED:
        chunks = ds.chunks
        want = -(-rows // chunks[0]) * int(np.prod([-(-s // c) for s, c in zip(ds.shape[1:], chunks[1:])]))
        have = sum(1 for c in (stored_chunks(ds) if stored is None else stored) if c[0] < rows)
        if have < want:
            part = f"first {rows} rows" if rows < ds.shape[0] else f"shape {ds.shape}"
            return f"'{path}' holds data in {have} of the {want} chunks of its {part}; the rest was never written"
    elif layout == h5py.h5d.CONTIGUOUS and ds.id.get_storage_size() < ds.nbytes:
        return f"'{path}' holds no data for its shape {ds.shape}; it was never written"
    return None


def checksum_finding(path: str, ds: h5py.Dataset, version: tuple[int, int]) -> str | None:
    """From schema 1.4 (the schema's ``checksums``) every dataset that holds data carries a checksum:
    the Fletcher-32 filter, or a compact layout (data inside the checksummed object header). Not
    variable-length strings, which HDF5 cannot filter."""
    if (version < CHECKSUMS_SINCE or not ds.size or ds.dtype.kind == "O" or ds.fletcher32
            or ds.id.get_create_plist().get_layout() == h5py.h5d.COMPACT):
        return None
    return (f"'{path}' carries no checksum (from schema {CHECKSUMS_SINCE[0]}.{CHECKSUMS_SINCE[1]} every "
            "dataset that holds data carries one; one added by hand needs h5py's fletcher32=True)")


# The checks both callers share
def meta_findings(meta: dict) -> tuple[list[str], dict, dict]:
    """Findings about the parsed ``config`` / ``task`` / ``dims`` attributes, and (dims, task) as
    the dataset checks use them: dims keeps its integers, with kv_heads = heads where absent (the
    schema's dims_doc)."""
    findings = []
    for key in ("config", "task", "dims"):
        if key in meta and not isinstance(meta[key], dict):
            findings.append(f"root attribute '{key}' is not a JSON object")
    dims = meta.get("dims") if isinstance(meta.get("dims"), dict) else {}
    task = meta.get("task") if isinstance(meta.get("task"), dict) else {}
    for sym in _DIMS:
        if not _is_int(dims.get(sym)):
            findings.append(f"dims attribute lacks integer '{sym}'")
    splits = task.get("splits")
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
        findings.append("task attribute lists no splits")
    dims = {k: v for k, v in dims.items() if _is_int(v)}
    if "kv_heads" not in dims and "heads" in dims:
        dims["kv_heads"] = dims["heads"]
    return findings, dims, task


def step_findings(steps: np.ndarray, first: int = 0) -> list[str]:
    """``snapshots/step`` must increase strictly: a repeat or a step back labels snapshots wrongly.
    ``steps``: the steps of snapshots ``first``, ``first + 1``, ... (a block of them)."""
    drops = np.flatnonzero(np.diff(steps) <= 0)
    if not drops.size:
        return []
    i = int(drops[0]) + 1
    return [f"'{P['step']}' is not strictly increasing (snapshot {first + i} has step {steps[i]:g} after "
            f"{steps[i - 1]:g})"]


def dataset_findings(path: str, dtype: np.dtype, got: tuple[int, ...] | None, spec: dict, dims: dict,
                     n: int | None) -> list[str]:
    """Dtype and shape ``got`` of the dataset at ``path`` against its schema entry ``spec``: each named
    axis equal to its ``dims`` value, the time axis ("n") at least the ``n`` committed steps (rows
    past them are an unfinished snapshot; ``n`` None: not checked). Metadata only."""
    out = []
    want = spec.get("dtype", "any")
    string = want == "utf-8 string"
    if want != "any" and (h5py.check_string_dtype(dtype) is None if string else dtype != np.dtype(want)):
        out.append(f"'{path}' has dtype {dtype}, expected {want}")
    shape = spec.get("shape", ["..."])
    if got is None:   # an empty (null) dataspace: no shape at all
        return out + [f"'{path}' has no shape (an empty dataspace), expected {tuple(shape)}"]
    fixed = shape[:shape.index("...")] if "..." in shape else shape
    if len(got) < len(fixed) or ("..." not in shape and len(got) != len(shape)):
        return out + [f"'{path}' has shape {got}, expected {tuple(shape)}"]
    for axis, sym in enumerate(fixed):
        if sym == "n":
            if n is not None and got[axis] < n:
                out.append(f"'{path}' has {got[axis]} snapshots, fewer than the {n} committed steps")
        elif isinstance(sym, int):
            if got[axis] != sym:
                out.append(f"'{path}' axis {axis} is {got[axis]}, expected {sym}")
        elif sym in dims and got[axis] != dims[sym]:
            out.append(f"'{path}' axis {axis} is {got[axis]}, expected {sym}={dims[sym]}")
    return out


def group_findings(groups: dict[str, np.ndarray], dims: dict) -> list[str]:
    """Token groups must hold ids of the vocabulary."""
    vocab = dims.get("vocab")
    if not isinstance(vocab, int):
        return []
    return [f"token group '{name}' has ids outside 0..{vocab - 1}" for name, ids in groups.items()
            if ids.size and (ids.min() < 0 or ids.max() >= vocab)]


@lru_cache(maxsize=None)
def _entries() -> tuple[dict[str, tuple[str, dict]], list[tuple[list[str], str, dict]]]:
    """The schema's dataset paths: fixed ones by path, templated ones split into components."""
    fixed, templated = {}, []
    for entry, spec in snapshot_schema()["datasets"].items():
        if "{" in spec["path"]:
            templated.append((spec["path"].split("/"), entry, spec))
        else:
            fixed[spec["path"]] = (entry, spec)
    return fixed, templated


def _fits(parts: list[str], template: list[str]) -> bool:
    """Whether path components ``parts`` fit a templated path: ``{name}`` (last) takes one or more
    components, ``{field}`` one, ``layer{layer}`` / ``slot{slot}`` the prefix and digits."""
    for i, t in enumerate(template):
        if t == "{name}":
            return i < len(parts) and all(parts[i:])
        if i >= len(parts) or not _component_fits(parts[i], t):
            return False
    return len(parts) == len(template)


def _component_fits(part: str, t: str) -> bool:
    """Whether one path component fits one template component (``{name}`` aside: see :func:`_fits`)."""
    if "{" not in t:
        return part == t
    prefix = t.split("{")[0]
    return part.startswith(prefix) and part[len(prefix):].isdigit() if prefix else bool(part)


def schema_entry(path: str, version: tuple[int, int]) -> tuple[str, dict] | None:
    """(entry, spec) of the schema entry that describes ``path`` in a file of schema ``version``
    (string matching, no regular expressions: compiling one for every entry costs ~2 ms at start-up)."""
    fixed, templated = _entries()
    found = fixed.get(path)
    if found is None:
        parts = path.split("/")
        found = next(((e, s) for t, e, s in templated if _fits(parts, t)), None)
    if found is None or version_tuple(found[1].get("since", "1.0")) > version:
        return None
    return found


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def refuse(path: str, findings: list[str]) -> None:
    """Refuse the file where there are ``findings``, in one line: the first, and where to see the others."""
    more = len(findings) - 1
    if findings:
        raise ProbeError(f"{path}: {findings[0]}" + (f" (and {more} more: probe validate lists them)" if more else ""))

def unfinished_slots(get, n: int) -> tuple[str, ...]:
    """The resume slots no resume reads: marked as being rewritten (a negative step in
    ``resume/slot_step``) or holding a step that is no committed snapshot. A writer killed while
    filling one leaves datasets whose data lie past the end of file its superblock records, which
    HDF5 refuses to open ("invalid dataset size"): a killed run is valid, and only its finished slot
    counts. ``get(path)``: the dataset there, its links and storage checked, or None; ``n``: the
    committed steps the caller trusts (the first ``n`` of ``snapshots/step``, read in blocks). Marks
    that cannot be read leave both slots unread (the dataset checks report them)."""
    try:
        marks, steps = get(P["resume_step"]), get(P["step"])
        if not (isinstance(marks, h5py.Dataset) and isinstance(steps, h5py.Dataset)
                and marks.shape == (2,) and steps.ndim == 1 and marks.dtype.kind in "iu"):
            return RESUME_SLOTS
        held = np.asarray(marks[...]).tolist()
        committed = {s for _, block in blocks(steps, n) for s in np.intersect1d(block, held).tolist()}
        return tuple(slot for slot, mark in zip(RESUME_SLOTS, held) if mark < 0 or mark not in committed)
    except (OSError, RuntimeError, KeyError, ValueError):
        return RESUME_SLOTS


# A reader's side: checked at open, then each dataset before its first read
class ReadCheck:
    """The checks :class:`~.run.Run` makes; each raises through :func:`refuse` (a ProbeError).

    At construction, before anything behind them is read: the links of the file (but those inside
    the resume slots, which only a resume reads: :meth:`everything`), the attributes (``meta``:
    parsed config, task and dims) and ``snapshots/step`` (strictly increasing; ``n`` is its length).
    Then each dataset before its first read (:meth:`dataset`: where its data lives, its dtype, rank,
    axes and rows) and the token groups' ids where they are read (:meth:`groups`). Checking every
    dataset at open costs ~40-90 µs each on a freshly opened file (measured: +6 ms CPU a tiny run's
    open, which costs 0.7 ms, against +1 ms for the checks at open), so a probe pays only for what it
    reads; a dataset it does not read is never opened.
    """

    def __init__(self, f: h5py.File, path: str, version: tuple[int, int], meta: dict):
        self.f, self.path, self.version = f, path, version
        self.swmr = f.swmr_mode
        # The resume slots (most of a file's links) are read by a resume only, which walks them too
        # (everything); the walk takes ~0.6 ms CPU for a tiny run's 411 links, ~0.3 ms without them.
        refuse(path, link_findings(f, prune=RESUME_SLOTS).findings)
        findings, self.dims, _ = meta_findings(meta)
        refuse(path, findings)
        self._done: set[str] = set()
        self._names: dict[int, list[str]] | None = None
        self._ids: dict[int, h5py.h5d.DatasetID] = {}   # by object address: see one()
        step = self._checked(P["step"])
        if step is None:
            raise ProbeError(f"{path}: '{P['step']}' is a group, not a dataset" if P["step"] in f
                             else f"{path}: missing dataset '{P['step']}'")
        unwritten = unwritten_finding(P["step"], step)   # (its rows would be read whole, however many it declares)
        refuse(path, [unwritten] if unwritten else [])
        try:
            self.steps(np.asarray(step[...], dtype=np.int64))
        except (OSError, RuntimeError) as exc:
            raise damaged_file_error(exc, path, P["step"]) from None
        self.n = int(step.shape[0])

    def _schema(self, names: list[str], ds: h5py.Dataset, n: int | None) -> list[str]:
        """Findings of ``ds`` against the schema entry of each of its ``names``, and its checksum."""
        findings = []
        for name in names:
            entry = schema_entry(name, self.version)
            if entry is not None:
                findings += dataset_findings(name, ds.dtype, ds.shape, entry[1], self.dims, n)
        missing = checksum_finding(names[0], ds, self.version)
        return findings + ([missing] if missing else [])

    def steps(self, steps: np.ndarray) -> np.ndarray:
        """``steps`` if they increase strictly (the live writer appends more: checked at each read)."""
        refuse(self.path, step_findings(steps))
        return steps

    def dataset(self, path: str, ds: h5py.Dataset, n: int | None = -1) -> None:
        """Refuse ``ds`` (at ``path``) unless its data is in this file and it matches its schema entry;
        ``n``: the committed steps its time axis must cover (-1: those seen at open). Checked once per
        path; under SWMR its extent is refreshed each time (after the storage check: the extent of a
        virtual dataset may open its source files)."""
        if path not in self._done:
            problem = storage_problem(ds)
            refuse(self.path, [f"'{path}' {problem}"] if problem else [])
        if self.swmr:
            ds.refresh()
        if path in self._done:
            return
        # A parameter is also its canonical weight (a hard link: params/W_E is weights/token_embedding),
        # whose schema entry says more of its shape; a probe may read it by either name.
        names = [path]
        if path.startswith(PARAMS_GROUP + "/"):
            names += [a for a in self._aliases(ds) if a != path and a not in self._done]
        refuse(self.path, self._schema(names, ds, self.n if n == -1 else n))
        self._done.update(names)

    def _aliases(self, ds: h5py.Dataset) -> list[str]:
        """Every name of ``ds`` under ``snapshots/`` (its hard links; the links are walked once)."""
        if self._names is None:   # (its links were checked at open: walked here for addresses only)
            links: list[tuple[bytes, int, int]] = []
            _walk(self.f[SNAPSHOTS_GROUP].id, _b(SNAPSHOTS_GROUP + "/"), (), links)
            self._names = LinkScan(links).objects()
        return self._names.get(h5py.h5o.get_info(ds.id).addr, [])

    def groups(self, groups: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        refuse(self.path, group_findings(groups, self.dims))
        return groups

    def _checked(self, path: str) -> h5py.Dataset | None:
        """The dataset at ``path`` (its link checked at open), refused unless it matches the schema."""
        ds = self.f.get(path)
        if not isinstance(ds, h5py.Dataset):
            return None
        ds = self.one(ds)
        self.dataset(path, ds, None)
        return ds

    def one(self, ds: h5py.Dataset) -> h5py.Dataset:
        """``ds`` on the one HDF5 id this reader holds for its object (the caller drops ``ds`` itself).
        Under SWMR a dataset is refreshed before it is read, and HDF5 (2.0) refreshing an object that
        two ids hold leaves both reading wrong chunks: measured on a killed run, snapshot 8 of a weight
        read as snapshot 3, checksums and all. So every name of an object, and every later request for
        it, shares one id."""
        kept = self._ids.setdefault(h5py.h5o.get_info(ds.id).addr, ds.id)
        return ds if kept is ds.id else h5py.Dataset(kept, readonly=True)

    def everything(self, resume_slots: bool) -> None:
        """Every dataset of the file now, not each before its first read (``resume_slots``: their links
        and datasets too, what a resume reads and copies): each dataset the link scan finds, by object,
        storage first (the extent of a virtual dataset may open its source files), then each of its
        names against its schema entry."""
        scan = link_findings(self.f, prune=unfinished_slots(self._checked, self.n) if resume_slots else RESUME_SLOTS)
        refuse(self.path, scan.findings)
        root, findings = self.f["/"].id, []
        for addr, names in scan.objects().items():
            try:
                ds = self._ids.get(addr) or h5py.h5o.open(root, _b(names[0]))
            except (KeyError, OSError, RuntimeError) as exc:   # its object header: damaged
                raise damaged_file_error(exc, self.path, names[0]) from None
            if not isinstance(ds, h5py.h5d.DatasetID):
                continue
            self._ids[addr] = ds
            problem = storage_problem(ds)
            if problem is not None:
                findings.append(f"'{names[0]}' {problem}")
                continue
            if self.swmr:
                ds.refresh()   # its extent as of now, after 'step' was read
            findings += self._schema(names, h5py.Dataset(ds), self.n)
            self._done.update(names)
        refuse(self.path, findings)
