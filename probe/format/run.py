"""Reading a run: :class:`Run`, the one reader of snapshot files (lazy: only the bytes a probe
asks for are read, each dataset checked before its first read)."""
from __future__ import annotations

import difflib
import os
import warnings
from typing import Sequence

import h5py
import numpy as np

from probe_schemas import path_of

from ..limits import check, parse_json
from ..errors import ProbeError, ProbeWarning, param, warn
from ._h5 import (
    METRICS, P, PARAMS_GROUP, SNAPSHOTS_GROUP, WEIGHTS_GROUP, json_attr, check_header, damaged_file_error, open_h5
)
from .steps import step_indices
from .tensors import as_matrix, check_fits, natural, read_rows


# What the Recorder adds to a recorded run's config (the rest is the user's own, Recorder config=)
RECORDER_KEYS = ("recorded_by", "model", "layout", "every", "model_config", "tied")

class Dataset(h5py.Dataset):
    """A dataset of a :class:`Run`: an h5py dataset whose failed reads name it. HDF5 verifies a chunk's
    Fletcher-32 checksum as it reads it (files of schema 1.4 on); a mismatch, or any other error
    HDF5 meets reading it, becomes one :class:`~probe.errors.ProbeError` naming the file, the dataset
    and, for a time-first one, the snapshot that is damaged (``run.h5: damaged HDF5 file: checksum
    mismatch in 'snapshots/weights/token_embedding' (snapshot at step 500)``). Every view of it
    (``asstr()``, ``astype()``, ``np.asarray``) reads through it."""

    def __init__(self, ds: h5py.Dataset, run: "Run", path: str):
        super().__init__(ds.id, readonly=True)   # (a Run opens its file read-only)
        self._in_run = (run, path)

    def __getitem__(self, args, new_dtype=None):
        try:
            return super().__getitem__(args, new_dtype=new_dtype)
        except (OSError, RuntimeError) as exc:
            raise self._damaged(exc, args) from None

    def read_direct(self, dest, source_sel=None, dest_sel=None):
        try:
            return super().read_direct(dest, source_sel, dest_sel)
        except (OSError, RuntimeError) as exc:
            raise self._damaged(exc, source_sel) from None

    def _damaged(self, exc: BaseException, args) -> BaseException:
        run, path = self._in_run
        where = ""
        if path.startswith(SNAPSHOTS_GROUP + "/") and self.ndim:
            i = self._first_failing(args)
            if i is not None:
                where = _snapshot(run.h5, i)
        return damaged_file_error(exc, run.path, path, where) or exc

    def _first_failing(self, args) -> int | None:
        """The first snapshot (row of axis 0) of the selection ``args`` that fails to read on its own
        (a failed read is read again row by row: only on the way to an error)."""
        first, rest = (args[0], args[1:]) if isinstance(args, tuple) and args else (args, ())
        if first is None or first is Ellipsis or isinstance(first, tuple):
            first, rest = slice(None), ()
        if isinstance(first, slice):
            rows = range(*first.indices(self.shape[0]))
        else:
            try:
                rows = [int(i) for i in np.ravel(first)]
            except (TypeError, ValueError):
                return None
        for i in rows:
            try:
                super().__getitem__((i, *rest))
            except (OSError, RuntimeError):
                return i
        return None


def _snapshot(f: h5py.File, index: int) -> str:
    """`` (snapshot at step S)`` for snapshot ``index``; `` (snapshot I)`` where its step cannot be read."""
    try:
        return f" (snapshot at step {int(f[P['step']][index])})"
    except (OSError, RuntimeError, KeyError, IndexError, ValueError):
        return f" (snapshot {index})"


class Run:
    """Read access to one snapshot file, also while the trainer still writes it: a
    [`Source`][probe.source.Source], as an external checkpoint is.

    Lazy: opening reads the header (configuration, task, dimensions) and checks the links, attributes and
    steps; each dataset is checked before its first read, and only the bytes asked for are read (rows
    as hyperslabs of the chunks that hold them). Use it as a context manager, or call
    [`close`][probe.format.run.Run.close].

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``.

    Attributes
    ----------
    path : str
        The file.
    schema_version : tuple of (int, int)
        The file's schema version, (major, minor).
    config : dict
        The run's configuration: the fields of ``probe_train.config.RunConfig``.
    task : dict
        What the task stored about itself: its ``kind``, ``splits``, ...
    dims : dict
        The model's dimensions: ``vocab``, ``d_model``, ``layers``, ``heads``, ...
    package_version : str
        The version of the package that wrote the file.
    environment : dict
        Where it was written: library versions, device, threads.

    Raises
    ------
    ProbeError
        A missing, damaged or truncated file; a file that is not a snapshot file; a newer schema major
        version. Later, a read that meets a damaged chunk (from schema 1.4 each carries a checksum
        that HDF5 verifies), naming the dataset and the snapshot: every dataset a Run hands out is a
        ``Dataset`` (this module's h5py dataset), whose reads say so.

    Examples
    --------
    >>> from probe.format import Run
    >>> with Run("run.h5") as run:
    ...     last = run.step_indices("latest")[0]
    ...     emb = run.read("token_embedding", last, rows=[11, 12, 13])    # (3, d_model)
    ...     acc = run.metrics()["rsn_test"]["acc"]                        # (n_snapshots,)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._f = open_h5(self.path)
        try:
            self.schema_version = check_header(self._f, self.path)
            meta = {key: json_attr(self._f, key, self.path) for key in ("config", "task", "dims")}
            self.config, self.task, self.dims = meta["config"], meta["task"], meta["dims"]
            # what wrote it: probe-train, or (1.5) the Recorder of a user's own loop, as its config says
            self.written_by = str(self.config.get("recorded_by") or "probe-train")
            # the user's own settings of a recorded run: its config less what the Recorder adds to it
            self.own_config = {k: v for k, v in self.config.items() if k not in RECORDER_KEYS} \
                if "recorded_by" in self.config else {}
            # What the probes rely on, in the words of `probe validate`: links, attributes and steps now,
            # each dataset before its first read (self.at).
            from ._checks import ReadCheck

            self._check = ReadCheck(self._f, self.path, self.schema_version, meta)
        except BaseException as exc:
            self._f.close()
            damaged = damaged_file_error(exc, self.path)
            if damaged is not None:
                raise damaged from None
            raise
        self.package_version = str(self._f.attrs.get("package_version", "?"))

        try:
            self.environment = parse_json(self._f.attrs.get("environment", "{}"), self.path, "environment")
        except (TypeError, ValueError, ProbeError):   # shown by info only: not worth refusing the run
            self.environment = {}
        self.extra_groups: dict[str, np.ndarray] = {}

    def check_all(self, resume_slots: bool = False) -> None:
        """Check every dataset now, not each before its first read: for a reader of everything (the
        report; a resume, which also reads and copies the ``resume_slots``)."""
        self._check.everything(resume_slots)

    # context manager -------------------------------------------------------
    def close(self) -> None:
        """Close the file (a ``with`` block does it on leaving)."""
        self._f.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, _type, exc, _tb) -> None:
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
        return self.at(path_of(entry, **fields))

    def at(self, path: str) -> Dataset:
        """The dataset at HDF5 ``path``, checked against the schema (once), its reads naming it."""
        try:
            obj = self._f[path]
        except (KeyError, OSError, RuntimeError) as exc:
            if isinstance(exc, KeyError) and "doesn't exist" in str(exc):
                raise ProbeError(f"{self.path}: missing dataset '{path}'") from None
            raise damaged_file_error(exc, self.path, path) from None   # its object header: damaged
        if not isinstance(obj, h5py.Dataset):
            raise ProbeError(f"{self.path}: '{path}' is a group, not a dataset")
        obj = Dataset(self._check.one(obj), self, path)   # (rebinding obj closes the id it opened: see one())
        self._check.dataset(path, obj)   # (and, under SWMR, its refresh)
        return obj

    @property
    def steps(self) -> np.ndarray:
        """The steps of the complete snapshots, in order: int64 array, shape (n_snapshots,).

        Strictly increasing, or a [`ProbeError`][probe.errors.ProbeError]. A run being written gains
        snapshots while it is open; a Run shows those committed when it was opened or last
        refreshed (`refresh()`), so a count, a step list and the tensors read between agree.
        """
        return self._check.steps(np.asarray(self.dataset("step")[: self.n_snapshots], dtype=np.int64))

    @property
    def n_snapshots(self) -> int:
        """The number of complete snapshots when the file was opened or last refreshed (see :attr:`steps`)."""
        return self._check.n

    def refresh(self) -> int:
        """Take in the snapshots a live writer committed since the file was opened or last refreshed.

        Returns
        -------
        int
            The number of complete snapshots now.
        """
        steps = self._check.steps(np.asarray(self.dataset("step")[...], dtype=np.int64))   # refreshed under SWMR
        self._check.n = len(steps)
        return self._check.n

    @property
    def groups(self) -> dict[str, np.ndarray]:
        """The token groups: name -> token ids (int64 array), the stored ones and any added to ``extra_groups``."""
        grp_path = P["token_group"].rsplit("/", 1)[0]
        grp = self._f.get(grp_path)
        stored = {} if grp is None else {name: np.asarray(self.at(f"{grp_path}/{name}")[...], dtype=np.int64)
                                         for name in grp}
        return {**self._check.groups(stored), **self.extra_groups}

    def token_strings(self) -> list[str] | None:
        """The text of every token (index = token id) of a text run; ``None`` when not stored (synthetic tasks)."""
        return self.strings("vocab_strings") if self.has("vocab_strings") else None

    @property
    def splits(self) -> list[str]:
        """The task's data splits (``mem``, ``rsn_train``, ``rsn_test``, ...), in their stored order."""
        return list(self.task.get("splits", []))

    def tensors(self) -> dict[str, tuple[int, ...]]:
        """Every time-first tensor (canonical names, then parameter names) and its per-snapshot shape.

        Returns
        -------
        dict of str to tuple of int
            Name -> shape of one snapshot's tensor.
        """
        out: dict[str, tuple[int, ...]] = {}

        def visit(prefix: str, group: h5py.Group, base: str) -> None:
            for key in group:   # by name: each dataset through at(), on its one id (see ReadCheck.one)
                name = f"{prefix}{key}"
                if group.get(key, getclass=True) is h5py.Group:
                    visit(name + "/", group[key], base)
                else:   # (at() checks it: info shows its shape, which must be right)
                    out[name] = tuple(self.at(f"{base}/{name}").shape[1:])

        for grp in (WEIGHTS_GROUP, PARAMS_GROUP):
            if grp in self._f:
                visit("", self._f[grp], grp)
        return out

    def weights(self) -> dict[str, tuple[int, ...]]:
        """The canonical tensors (``token_embedding``, ``layer0/W_V``, ...) and their per-snapshot shapes.

        Returns
        -------
        dict of str to tuple of int
            Canonical name -> shape of one snapshot's tensor.
        """
        grp = self._f.get(WEIGHTS_GROUP)
        return {n: tuple(self.at(f"{WEIGHTS_GROUP}/{n}").shape[1:]) for n in _dataset_names(grp)}

    def tensor(self, name: str) -> h5py.Dataset:
        """A weight tensor by canonical name (``token_embedding``, ``layer0/W_V``) or parameter name.

        Parameters
        ----------
        name : str
            The tensor's name.

        Returns
        -------
        h5py.Dataset
            The dataset, shape (n_snapshots, ...): axis 0 is the snapshot.

        Raises
        ------
        ProbeError
            No such tensor (the message lists the known ones).
        """
        for grp in (WEIGHTS_GROUP, PARAMS_GROUP):
            full = f"{grp}/{name}"
            if full in self._f:
                return self.at(full)
        if name in (self.task.get("left_out") or ()):   # (1.7: a Recorder told to keep only some tensors)
            raise ProbeError(f"{self.path}: '{name}' was not kept when this run was recorded (Recorder keep=); "
                             "record it with a keep= that names it")
        known = sorted(self.tensors())
        near = difflib.get_close_matches(name, known, n=3, cutoff=0.6) or known[:3]
        rest = f", and {len(known) - len(near)} more (probe info {self.path} lists them)" if len(known) > len(near) else ""
        raise ProbeError(f"{self.path}: no tensor '{name}'; "
                         + (f"the nearest: {', '.join(near)}{rest}" if known else "it holds none"))

    def weight_matrices(self) -> list[str]:
        """Parameter names of the weight matrices (2-D or per-head 3-D, named W...)."""
        params = self._f.get(PARAMS_GROUP)
        return [n for n in _dataset_names(params)
                if self.at(f"{PARAMS_GROUP}/{n}").ndim >= 3 and n.rsplit(".", 1)[-1].startswith("W")]

    def has(self, entry: str, **fields) -> bool:
        """Whether the file holds schema entry ``entry`` (optional datasets of newer minor versions)."""
        return path_of(entry, **fields) in self._f

    def strings(self, entry: str) -> list[str]:
        """A string dataset (``norm_sites``) as a list."""
        return [str(x) for x in self.dataset(entry).asstr()[...]]

    def step_losses(self) -> np.ndarray:
        """Training-batch loss of every step up to the newest complete snapshot (row t: step t).

        Returns
        -------
        ndarray
            Shape (S,), S the step of the newest complete snapshot.

        Raises
        ------
        ProbeError
            A file without the per-step loss log (written before schema 1.3).
        """
        n = self._log_rows()
        ds = self.dataset("step_loss")
        check(self.path, P["step_loss"], (n,), str(ds.dtype), ds.dtype.itemsize)   # a step may say 10^11
        return np.asarray(ds[:n])

    def step_logged(self) -> np.ndarray:
        """Which rows of :meth:`step_losses` the training loop gave: all of them, but in a file whose loop
        logged its loss every few steps (a :class:`probe.Recorder`'s, schema 1.6), where a step not
        given is NaN in the log.

        Returns
        -------
        ndarray of bool
            Shape (S,), as :meth:`step_losses`.
        """
        n = self._log_rows()
        if not self.has("step_logged"):
            return np.ones(n, dtype=bool)
        ds = self.dataset("step_logged")
        if ds.ndim != 1 or ds.shape[0] < n or ds.dtype.kind not in "iub":
            raise ProbeError(f"{self.path}: '{P['step_logged']}' is {ds.dtype} of shape {ds.shape}, not one mark "
                             f"per step of the loss log ({n}): the file is damaged")
        check(self.path, P["step_logged"], (n,), str(ds.dtype), ds.dtype.itemsize)
        return np.asarray(ds[:n]) != 0

    def _log_rows(self) -> int:
        """The rows of the step log up to the newest complete snapshot's step."""
        if not self.has("step_loss"):
            raise ProbeError(f"{self.path}: holds no per-step loss log (written from schema 1.3)")
        return min(int(self.steps[-1]) if self.n_snapshots else 0, self.dataset("step_loss").shape[0])

    def metrics(self) -> dict[str, dict[str, np.ndarray]]:
        """The logged metrics at every snapshot.

        Returns
        -------
        dict of str to dict of str to ndarray
            Split -> ``loss`` / ``acc`` -> values, shape (n_snapshots,).
        """
        n = self.n_snapshots
        out: dict[str, dict[str, np.ndarray]] = {}
        for split in self.splits:
            paths = {metric: path_of("metric", split=split, metric=metric) for metric in METRICS}
            out[split] = {metric: np.asarray(self.at(p)[:n]) for metric, p in paths.items() if p in self._f}
        return out

    # what any source offers (probe.source.Source) -----------------------------
    def step_of(self, index: int) -> int:
        """The step of snapshot ``index``, as messages name it."""
        return int(self.steps[index])

    def label(self, name: str) -> str:
        """Tensor ``name`` as messages name it: its own name (a checkpoint adds the raw names)."""
        return name

    def describe(self) -> dict:
        """The file as plain data (``probe info``; the keys: :func:`probe.api.info`)."""
        groups, strings = self.groups, self.token_strings()
        return {
            "file": self.path,
            "schema_version": "%d.%d" % self.schema_version,
            "package_version": self.package_version,
            "written_by": self.written_by,
            "created": str(self._f.attrs.get("created", "")),
            "snapshots": self.n_snapshots,
            "steps": [int(s) for s in self.steps],
            "config": self.config,
            "own_config": self.own_config,
            "environment": self.environment,
            "task": self.task,
            "dims": self.dims,
            "groups": {k: [int(i) for i in v] for k, v in groups.items()},
            "group_strings": {} if strings is None else {k: [strings[i] for i in v] for k, v in groups.items()},
            "tensors": {k: list(v) for k, v in self.tensors().items()},
            "canonical": list(self.weights()),
            "metrics": {s: {m: float(v[-1]) for m, v in ms.items() if len(v)} for s, ms in self.metrics().items()},
        }

    @property
    def provenance(self) -> dict:
        """What wrote the file: ``written_by``, ``package_version``, ``schema_version``, ``config``, ``environment``."""
        return {"written_by": self.written_by, "package_version": self.package_version,
                "schema_version": "%d.%d" % self.schema_version, "config": self.config,
                "environment": self.environment}

    def matrices(self) -> list[str]:
        """The weight matrices (2-D, or per-head 3-D) by the names every probe uses: the canonical ones
        of ``weights/`` (``layer0/W_K``, ``token_embedding``; links to the parameters), and the parameter
        name only for a matrix with no canonical name (the Emb-MLP's ``W_1``); in natural order (layer 2
        before layer 10)."""
        canonical = [n for n, shape in self.weights().items() if len(shape) >= 2]
        linked = {self.tensor(n).id for n in canonical}    # a canonical name is a hard link: the same object
        own = [n for n in self.weight_matrices() + [n for n in ("W_E", "W_pos", "W_U") if n in self.tensors()]
               if self.tensor(n).id not in linked]
        return sorted(dict.fromkeys(canonical + own), key=natural)

    def linear_maps(self, spec: str | int, work: float = 0):
        """Every weight matrix as one linear map (a spectrum's input): :meth:`matrices`, per-head ones whole.

        Returns (indices, names, read): the snapshot indices ``spec`` selects, the names (each checked
        against the memory budget with ``work`` more, before any is read) and ``read(name, index)``, the
        2-D matrix at a snapshot.
        """
        indices = self.step_indices(spec)
        names = self.matrices()
        for n in names:              # every matrix against the budget before the first is read
            check_fits(self.tensor(n), 1, work=work)
        return indices, names, lambda n, i: as_matrix(n, self.read(n, i))

    def word_ids(self, words: list[str]) -> np.ndarray:
        """Ids of ``words`` in the stored vocabulary, each matched as it appears inside running text (with
        its leading space) or else as it is; absent words are left out with a warning."""
        strings = self.token_strings()
        if strings is None:
            raise ProbeError(f"{self.path}: stores no vocabulary (a synthetic task), so {param('words')} cannot "
                             f"be looked up; select ids with {param('tokens')}")
        index: dict[str, int] = {}
        for i, s in enumerate(strings):
            index.setdefault(s, i)
        ids = []
        for w in (w.strip() for w in words):
            hit = index.get(" " + w, index.get(w))
            if hit is None:
                warn(f"'{w}' is not a token of this run's vocabulary; left out")
            else:
                ids.append(hit)
        if not ids:
            raise ProbeError(f"none of the {param('words')} is a token of this run's vocabulary")
        return np.asarray(ids, dtype=np.int64)

    def token_texts(self, ids, later: bool = False):
        """Text of each token id from the stored vocabulary; ``None`` for a synthetic run. ``later``: a
        function giving them, callable after the file is closed (read now: the file holds them)."""
        strings = self.token_strings()
        texts = None if strings is None else [strings[int(i)] for i in ids]
        return (lambda: texts) if later else texts

    stores_activations = True   # the probe batch's attention maps, norm statistics, token losses: see forward

    def forward(self, text: str | None, what: str, step, *, window: int, max_tokens: int, attention: bool = False):
        """None: a snapshot file stores the activations the probes read (``text``, a checkpoint's, is
        ignored with a warning)."""
        if text is not None:
            # at the caller's line: past this method, the probe and its budgeted wrapper (probe.limits.budgeted)
            warnings.warn(f"{self.path}: {param('text')} is for external checkpoints; a snapshot file stores what it "
                          "needs (ignored)", ProbeWarning, stacklevel=4)
        return None

    # steps -----------------------------------------------------------------
    def step_indices(self, spec: str | int) -> list[int]:
        """The snapshot indices a step selection names.

        Parameters
        ----------
        spec : str or int
            ``"latest"``, ``"all"``, a step number, a half-open step range ``"A:B"``, or a comma list of these
            (``"100,500,latest"``).

        Returns
        -------
        list of int
            Indices into the snapshots (each once, in step order).

        Raises
        ------
        ProbeError
            A step the file does not hold, or a selection that does not parse.
        """
        return step_indices(spec, self.steps, self.path)

    # reading ---------------------------------------------------------------
    def read(self, name: str, index: int, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Tensor ``name`` at snapshot ``index``; with ``rows``, only those rows of its first axis.

        Rows are read as contiguous hyperslabs, so only the chunks holding them are touched.

        Parameters
        ----------
        name : str
            The tensor, as for [`tensor`][probe.format.run.Run.tensor].
        index : int
            The snapshot index (see [`step_indices`][probe.format.run.Run.step_indices]).
        rows : sequence of int or ndarray, optional
            Rows of the tensor's first axis (token ids of an embedding), in the order wanted.

        Returns
        -------
        ndarray
            The tensor at that snapshot, its per-snapshot shape; with ``rows``, shape (len(rows), ...).

        Raises
        ------
        ProbeError
            An unknown tensor or an index out of range; a damaged chunk (its checksum does not match),
            naming the dataset and the snapshot.
        """
        ds = self.tensor(name)
        if not 0 <= index < self.n_snapshots:
            raise ProbeError(f"{self.path}: snapshot index {index} out of range")
        return np.asarray(ds[index]) if rows is None else read_rows(ds, index, rows)

    def read_many(self, name: str, indices: Sequence[int]) -> np.ndarray:
        """Tensor ``name`` at several snapshots, stacked on a new first axis in the order given.

        One read of the snapshots they span: a trajectory costs one HDF5 call per tensor, not one per step.

        Parameters
        ----------
        name : str
            The tensor, as for [`tensor`][probe.format.run.Run.tensor].
        indices : sequence of int
            Snapshot indices.

        Returns
        -------
        ndarray
            Shape (len(indices), ...) after the per-snapshot shape.

        Raises
        ------
        ProbeError
            An unknown tensor or an index out of range; a damaged chunk, naming the dataset and the first
            damaged snapshot.
        """
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


def _dataset_names(group: h5py.Group | None) -> list[str]:
    """The datasets below ``group`` (each once, depth first by name), none of them left open: a Run
    reads each through its one id (see ReadCheck.one), and _h5.datasets() holds every one it opened
    until the garbage collector frees its recursion's closure."""
    names: list[str] = []
    if group is not None:
        group.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


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
