"""What a probe reads, whatever the path: :func:`open_source` returns a :class:`~probe.format.Run`
for this toolkit's snapshot files and a :class:`CheckpointRun` — canonical tensor names, a snapshot
per checkpoint — for any checkpoint :mod:`.checkpoints` can read, or a folder of one training's
checkpoints (steps by their names). Both are a :class:`probe.source.Source`: the probes call its
methods and never ask which kind of file it is.
"""
from __future__ import annotations

import math
import os
import re

import numpy as np

from ..files import regular_file
from ..limits import WHY, check, parse_json, parse_yaml
from ..errors import ProbeError, param, warn
from ..params import check_number
from ..format import Run, is_snapshot_file
from ..format.steps import listed, step_indices
from .checkpoints import open_checkpoint
from .hub import expand, is_hub, parse
from .layouts import CanonicalReader
from .names import model_folder, series, step_from_name
from .words import TOKENIZER_FILES, ids_to_text, read_text, words_to_ids


def load_groups(path: str, checkpoint: str | None = None) -> dict[str, np.ndarray]:
    """A groups file: JSON (or YAML) mapping group name -> list of token ids or of words
    (words are turned into ids with ``checkpoint``'s tokenizer files)."""
    text = read_text(path, "groups file")
    try:
        data = parse_json(text, path, "groups file")
    except ValueError:
        try:
            data = parse_yaml(text, path, "groups file")
        except ProbeError:
            raise
        except Exception:   # PyYAML's errors, and its constructors' (a date that is no date)
            raise ProbeError(f"{path}: groups file is neither JSON nor YAML") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ProbeError(f"{path}: groups file must map group names to lists of token ids or words")
    out = {}
    for k, v in data.items():
        if all(isinstance(i, str) for i in v) and v:
            if checkpoint is None:
                raise ProbeError(f"{path}: group '{k}' lists words, which need a checkpoint's tokenizer")
            out[str(k)] = words_to_ids(checkpoint, v)
        elif all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            out[str(k)] = np.asarray(v, dtype=np.int64)
        else:
            raise ProbeError(f"{path}: group '{k}' must list only token ids or only words")
    return out


class _Tensor:
    """A canonical tensor seen as an h5py-like dataset whose axis 0 is the checkpoint (one per step): its
    shape comes from the newest checkpoint's header, and ``t[i, lo:hi]`` opens checkpoint ``i`` only then
    and reads only those rows where it can. ``name`` says it with the raw names it is built from, ``path``
    is the run's, and it is read as float32: what the memory budget's check of a read needs
    (:func:`probe.format.tensors.read_at`)."""

    dtype = np.dtype(np.float32)

    def __init__(self, run: "CheckpointRun", name: str):
        self._run, self._name, self._shape = run, name, None
        self._last: tuple[int, np.ndarray] | None = None   # the last whole tensor read: one, not one per step
        self.name, self.path = run.label(name), run.path

    @property
    def shape(self) -> tuple[int, ...]:
        if self._shape is None:
            self._shape = (self._run.n_snapshots, *self._run.reader.shape(self._name))
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _whole(self, i: int) -> np.ndarray:
        if self._last is None or self._last[0] != i:
            self._last = (i, self._run.reader_at(i).read(self._name))
        return self._last[1]

    def _at(self, i: int, rest: tuple):
        rows = rest[0] if len(rest) == 1 else None
        if isinstance(rows, slice) and rows.step in (None, 1) and (self._last is None or self._last[0] != i):
            lo, hi, _ = rows.indices(self.shape[1])
            return self._run.reader_at(i).read_rows(self._name, lo, hi)
        return self._whole(i)[rest] if rest else self._whole(i)

    def __getitem__(self, key):
        snap, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        at = range(self.shape[0])[snap]     # an index out of range: IndexError, as numpy's
        if isinstance(snap, slice):
            return np.stack([self._at(i, rest) for i in at]) if len(at) else np.zeros((0, *self.shape[1:]))
        return self._at(at, rest)


class CheckpointRun:
    """External checkpoints as a run with canonical tensor names: one checkpoint (a run of one step), or
    the checkpoints of one training (a folder of a Trainer's ``checkpoint-N/`` folders or of numbered
    weight files, :func:`~probe.readers.names.series`; hub revisions named by step,
    ``hf:ORG/NAME@step1000,step2000``), one snapshot each, its step the number in its name: a
    [`Source`][probe.source.Source], as a snapshot file's [`Run`][probe.format.run.Run] is.

    The newest checkpoint is opened first: its layout (the canonical names, an unknown one an error
    before any other; with ``canonical=False`` when first needed: a spectrum and a model run over a text
    read a checkpoint of any layout), configuration and shapes are the run's. Any other is opened only
    when its step is read (a few held open at once) and must match the newest, tensor for tensor, or its
    name is said in one line.

    What a folder holds that is no checkpoint of the run though its name states a step (an empty
    ``checkpoint-N/``, one without weights or without the config the others have) is left out with a
    warning each when the run is opened. A checkpoint that cannot be read (a truncated or damaged file) is
    an :class:`Unreadable` error naming it, or with ``skip_damaged`` its step is left out with a warning
    when the steps are chosen, every chosen checkpoint opened then.
    """

    def __init__(self, path: str, groups: str | None = None, mapping: str | None = None, step: str = "latest",
                 canonical: bool = True, skip_damaged: bool = False):
        self.path, self.skip_damaged = path, skip_damaged
        self.members, self.left_out = _members(path)    # (step, checkpoint) by step; (step, name, why)
        for _, name, why in self.left_out:
            warn(f"{path}: {name} left out of the run: {why}")
        if self.left_out and not self.members:
            raise ProbeError(f"{path}: no checkpoint of the run can be read: "
                             + "; ".join(f"{name}: {why}" for _, name, why in self.left_out))
        self.members = self.members or [(None, path)]
        self._said: set[int] = set()        # the steps left out as damaged, each said once
        while True:   # the newest readable checkpoint: with skip_damaged, a damaged newest is left out
            try:
                self.source = self._open(-1, step)
                break
            except Unreadable:
                if not (skip_damaged and len(self.members) > 1):
                    raise
                self.members.pop()
        self._mapping = mapping
        self._reader = CanonicalReader(self.source, mapping) if canonical else None   # (now: its error first)
        self.config = dict(self.source.config)
        self._held: dict[int, list] = {}     # index -> [raw source, canonical reader or None]: a few at once
        self.groups = load_groups(groups, self._words) if groups else {}
        self._tensors: dict[str, _Tensor] = {}

    @property
    def n_snapshots(self) -> int:
        return len(self.members)

    @property
    def reader(self) -> CanonicalReader:
        """The canonical names (``layer0/W_V``) of the newest checkpoint's raw tensors; an unknown layout's error."""
        if self._reader is None:
            self._reader = CanonicalReader(self.source, self._mapping)
        return self._reader

    def _name(self, i: int) -> str:
        p = self.members[i][1]
        return p if p.startswith("hf:") else os.path.basename(os.path.normpath(p))

    def source_at(self, i: int):
        """Checkpoint ``i``'s raw tensors: opened now if not held (at most :data:`HELD` besides the newest),
        checked against the newest's names and shapes."""
        i = range(self.n_snapshots)[i]
        if i == self.n_snapshots - 1:
            return self.source
        if i not in self._held:
            src = self._open(i)
            self._match(i, src)
            while len(self._held) >= HELD:
                self._held.pop(next(iter(self._held)))
            self._held[i] = [src, None]
        return self._held[i][0]

    def reader_at(self, i: int) -> CanonicalReader:
        """Checkpoint ``i``'s canonical tensors, its layout the newest's (or a ProbeError naming it)."""
        src = self.source_at(i)
        if src is self.source:
            return self.reader
        held = self._held[range(self.n_snapshots)[i]]
        if held[1] is None:
            reader = CanonicalReader(src, self._mapping)
            mine, newest = reader.layout, self.reader.layout
            if (mine.name, mine.layers, mine.heads) != (newest.name, newest.layers, newest.heads):
                self._differs(i, f"it is a {mine.name} model of {mine.layers} layers and {mine.heads} heads, the "
                                 f"newest a {newest.name} model of {newest.layers} layers and {newest.heads} heads")
            held[1] = reader
        return held[1]

    def _open(self, i: int, step="latest"):
        """Checkpoint ``i`` opened: a local file or model folder that cannot be read is :class:`Unreadable`,
        named with its step (with ``skip_damaged``: said once as left out), and in a run of several with
        the option that goes on past it."""
        i = range(len(self.members))[i]
        where, several = self.members[i][1], len(self.members) > 1
        try:
            return open_checkpoint(where, step)
        except ProbeError as exc:
            if not (os.path.isfile(where) or model_folder(where)):   # no checkpoint at all: not damage
                raise
            said, at = exc.args[0] if exc.args else "", self.members[i][0]
            if several and self.skip_damaged:
                if i not in self._said:
                    self._said.add(i)
                    warn(f"{self.path}: step {at} left out ({param('skip_damaged', True)}): {said}")
            elif several:
                said += f"; {param('skip_damaged', True)} leaves step {at} out and reads the others"
            raise Unreadable(said) from None

    def _match(self, i: int, src) -> None:
        mine, newest = src.shapes(), self.source.shapes()
        if set(mine) != set(newest):   # other tensor names: another layout, said as such where both are known
            try:
                kinds = CanonicalReader(src, self._mapping).layout.name, self.reader.layout.name
            except ProbeError:
                kinds = ("", "")
            if kinds[0] != kinds[1]:
                self._differs(i, f"it is a {kinds[0]} checkpoint, the newest a {kinds[1]} one")
        for n in [*newest, *mine]:
            a, b = mine.get(n), newest.get(n)
            if a is None or b is None or tuple(a) != tuple(b):
                shown = [list(x) if x is not None else "missing" for x in (a, b)]
                self._differs(i, f"tensor {n} is {shown[0]} there, {shown[1]} in the newest")

    def _differs(self, i: int, why: str):
        raise ProbeError(f"{self.path}: checkpoint {self._name(i)} does not match the newest, "
                         f"{self._name(-1)}: {why} (one run's checkpoints hold one model)")

    @property
    def dims(self) -> dict:
        """``layers`` and ``heads`` (``None`` where no config gives the head count)."""
        layout = self.reader.layout
        return {"layers": layout.layers, "heads": layout.heads}

    @property
    def steps(self) -> np.ndarray:
        if self.n_snapshots == 1:
            return np.asarray([self.source.step if self.source.step is not None else 0])
        return np.asarray([s for s, _ in self.members])

    def step_indices(self, spec) -> list[int]:
        """The step grammar of snapshot runs (:func:`probe.format.steps.step_indices`) on these steps."""
        try:
            indices = step_indices(spec, self.steps, self.path)
        except ProbeError:
            asked = {int(p) for p in str(spec).split(",") if p.strip().isdigit()}
            for s, name, why in self.left_out:   # a step asked for that is left out: why it is not there
                if s in asked:
                    raise ProbeError(f"{self.path}: no snapshot at step {s}: {name} is left out of the run ({why})") \
                        from None
            if self.n_snapshots > 1:
                raise
            raise ProbeError(f"{self.path}: a checkpoint holds one step ({int(self.steps[0])}); "
                             f"use {param('step', 'latest')}") from None
        if not (self.skip_damaged and self.n_snapshots > 1):
            return indices
        kept = []
        for i in indices:   # each chosen checkpoint opened now, so that a damaged one is left out before any read
            try:
                self.source_at(i)
                kept.append(i)
            except Unreadable:
                pass
        if not kept:
            raise ProbeError(f"{self.path}: every checkpoint of the chosen steps is damaged "
                             f"({listed([self.members[i][0] for i in indices])})")
        return kept

    def step_of(self, index: int) -> int | None:
        """The checkpoint's own step, as messages name it; None for a lone checkpoint without one."""
        return self.source.step if self.n_snapshots == 1 else int(self.members[index][0])

    @property
    def provenance(self) -> dict:
        """What wrote it: ``written_by`` (``"checkpoint"``), ``format``, ``step`` (the newest's), ``layout``
        (None: unknown), ``config``, and for several ``checkpoints``: their number."""
        try:
            layout = self.reader.layout.name
        except ProbeError:
            layout = None
        return {"written_by": "checkpoint", "format": self.source.kind, "step": self.step_of(-1), "layout": layout,
                "config": self.config, **({"checkpoints": self.n_snapshots} if self.n_snapshots > 1 else {})}

    def describe(self) -> dict:
        """The checkpoint as plain data (``probe info``; the keys: :func:`probe.api.info`), its layout
        known or not; the newest one of several, with ``checkpoints`` (step -> its name)."""
        src = self.source
        shapes, dtypes, tied = src.shapes(), src.dtypes(), src.aliases()
        try:
            layout = self.reader.layout
            known = {"layout": layout.name, "layers": layout.layers, "heads": layout.heads,
                     "canonical": {n: list(raw) for n, (raw, _) in layout.rules.items()}}
        except ProbeError as exc:   # info describes what it can read, known layout or not
            known = {"layout": None, "layers": None, "heads": None, "canonical": {}, "layout_error": str(exc)}
        several = {"checkpoints": {int(s): self._name(i) for i, (s, _) in enumerate(self.members)}} \
            if self.n_snapshots > 1 else {}
        return {"file": self.path, "format": src.kind, "step": self.step_of(-1), **known, **several,
                "config": src.config,
                "tensors": {n: {"shape": list(s), "dtype": dtypes.get(n, "?"),
                                **({"tied_to": tied[n]} if n in tied else {})} for n, s in shapes.items()},
                "parameters": int(sum(int(np.prod(s)) for n, s in shapes.items()
                                      if n not in tied and "f" in dtypes.get(n, "f")))}   # floats: not index buffers

    def tensor(self, name: str) -> _Tensor:
        if name not in self.reader.names():
            raise ProbeError(f"{self.path}: no tensor '{name}' in this {self.reader.layout.name} checkpoint; "
                             f"known: {', '.join(self.reader.names()[:10])}, ...")
        return self._tensors.setdefault(name, _Tensor(self, name))

    def tensors(self) -> dict[str, tuple[int, ...]]:
        return {n: self.tensor(n).shape[1:] for n in self.reader.names()}

    def weights(self) -> dict[str, tuple[int, ...]]:
        """The canonical tensors: here every tensor (:meth:`tensors`)."""
        return self.tensors()

    def label(self, name: str) -> str:
        """``name`` with the checkpoint's own tensor name(s) it is built from, where they differ."""
        raw = tuple(self.reader.layout.rules.get(name, ((),))[0])
        return f"{name} ({', '.join(raw)})" if raw and raw != (name,) else name

    def weight_matrices(self) -> list[str]:
        """Per-layer weight matrices (norm gains, which are vectors, left out)."""
        return [n for n in self.reader.names() if n.startswith("layer") and self.tensor(n).ndim >= 3]

    def matrices(self) -> list[str]:
        """The weight matrices by canonical name: :meth:`weight_matrices`."""
        return self.weight_matrices()

    def linear_maps(self, spec, work: float = 0):
        """Every 2-D tensor by its own name, whatever the layout, in natural order, a tensor tied to another
        (the same memory under two names) once: (indices of ``spec``, names, read(name, index)), the names
        checked against the memory budget (the newest's header's shapes and dtypes, read as float32 with
        ``work`` times that more) before any is read; checkpoint ``index`` is opened when first read."""
        from ..format.tensors import natural

        indices = self.step_indices(spec)
        tied = self.source.aliases()   # a tied lm_head is the embedding: one matrix, counted once
        names = sorted((n for n, s in self.source.shapes().items() if len(s) == 2 and min(s) > 1 and n not in tied),
                       key=natural)
        shapes, dtypes = self.source.shapes(), self.source.dtypes()
        for n in names:
            dtype = dtypes.get(n, "float32")
            bits = re.search(r"\d+", dtype)      # f32, bf16, float16, f8_e4m3 (safetensors' and torch's names)
            check(self.path, n, shapes[n], _LONG.get(dtype, dtype), int(bits.group()) // 8 if bits else 1,
                  need=math.prod(shapes[n]) * 4 * (1 + work), why=WHY)
        return indices, names, lambda n, i: self.source_at(i).read(n)

    @property
    def _words(self) -> str:
        """Where the tokenizer files are: the folder of several checkpoints if it holds them, else the newest."""
        if self.n_snapshots > 1 and os.path.isdir(self.path) and \
                any(os.path.exists(os.path.join(self.path, f)) for f in TOKENIZER_FILES):
            return self.path
        return self.members[-1][1]

    def word_ids(self, words: list[str]) -> np.ndarray:
        """Ids of ``words`` from the checkpoint's tokenizer files."""
        return words_to_ids(self._words, words)

    def token_texts(self, ids, later: bool = False):
        """Text of each token id from the tokenizer files; ``None`` without them (or, with a warning, when
        they cannot be read). ``later``: a function giving them when first asked for (the files take
        ~20 ms to load, ten times a small probe)."""
        path, ids = self._words, [int(i) for i in ids]
        return (lambda: ids_to_text(path, ids)) if later else ids_to_text(path, ids)

    def forward(self, text: str | None, what: str, step, *, window: int, max_tokens: int, attention: bool = False):
        """The model of the checkpoint at ``step`` (one step) run over the windows of ``text`` (a
        :class:`~probe.readers.activations.Forward`): the activations a checkpoint does not store."""
        from .activations import run_text   # transformers and torch: only for a probe of activations

        if text is None:
            raise ProbeError(f"{self.path}: {what} on a checkpoint needs activations: pass {param('text')} FILE, a "
                             "text file to run the model on (its tokenizer files are used)")
        if self.n_snapshots == 1 and str(step) not in ("latest", "all"):
            raise ProbeError(f"{self.path}: a checkpoint holds one step; use {param('step', 'latest')}")
        indices = self.step_indices(step)
        if len(indices) > 1:
            raise ProbeError(f"{self.path}: {what} runs one checkpoint's model over the text; choose one step with "
                             f"{param('step')} (steps: {listed(self.steps)})")
        check_number("window", window)
        check_number("max_tokens", max_tokens)
        self.source_at(indices[0])   # (its match with the newest checked first)
        return run_text(self.members[indices[0]][1], text, window=window, max_tokens=max_tokens, attention=attention)

    stores_activations = False   # its model runs over a text instead: forward
    @property
    def splits(self) -> list[str]:
        """No data splits: the toolkit did not train it."""
        return []

    def has(self, entry: str, **fields) -> bool:
        """Whether it stores snapshot entry ``entry``: a checkpoint stores none."""
        return False

    def dataset(self, entry: str, **fields):
        """A stored snapshot entry: a checkpoint has none, a ProbeError."""
        raise ProbeError(f"{self.path}: a checkpoint stores no '{entry}' (a snapshot file of probe-train does)")

    def strings(self, entry: str) -> list[str]:
        """A stored string entry: a checkpoint has none, a ProbeError."""
        return self.dataset(entry)

    def close(self) -> None:
        self._tensors.clear()
        self._held.clear()

    def __enter__(self) -> "CheckpointRun":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


HELD = 2    # checkpoints held open besides the newest: a step's reads, then the next step's


class Unreadable(ProbeError):
    """A checkpoint file or model folder that is there but cannot be read (truncated, damaged, refused):
    what ``skip_damaged`` goes on past, and what batch and the report say they left out."""


def _members(path: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """The checkpoints of a run at ``path``, (step, checkpoint) by step: a folder's numbered ones, or the
    revisions of ``hf:ORG/NAME@REV1,REV2`` (each naming its step); none for one checkpoint. Second, what a
    folder leaves out (:func:`~probe.readers.names.series`)."""
    if not is_hub(path):
        return series(path)
    repo, revs = parse(path)
    if not revs or "," not in revs:
        return [], []
    found = {}
    for spec in expand(f"hf:{repo}", revs):
        step = step_from_name(spec)
        if step is None:
            raise ProbeError(f"{path}: revision '{spec.partition('@')[2]}' states no step; the revisions of one run "
                             "are named by step (step1000,step2000)")
        found.setdefault(step, spec)
    return sorted(found.items()), []


_LONG = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16"}   # safetensors' short names


def open_source(path: str | os.PathLike, groups: str | None = None, mapping: str | None = None, *,
                canonical: bool = True, skip_damaged: bool = False):
    """The [`Source`][probe.source.Source] at ``path``: a :class:`Run` for a snapshot file (its groups, plus
    any from ``groups``), else a :class:`CheckpointRun` of one checkpoint or of a folder of one training's
    checkpoints, a snapshot each (``mapping``: a name-mapping file for its layout;
    ``canonical=False``: its layout found only when its canonical names are first asked for, so that a
    probe of raw tensors or of a model run reads a checkpoint of any layout; ``skip_damaged``: a checkpoint
    of several that cannot be read is left out with a warning, :class:`CheckpointRun`).

    Raises
    ------
    ProbeError
        A path that is no regular file or folder, or no readable snapshot file or checkpoint.

    Examples
    --------
    >>> from probe.readers.source import open_source
    >>> with open_source("model/") as src:
    ...     src.tensor("token_embedding").shape
    >>> with open_source("output_dir/") as src:       # checkpoint-500/, checkpoint-1000/, ...
    ...     list(src.steps)
    """
    path = os.fspath(path)
    # special files are refused before anything is opened (the groups and mapping files are read later)
    if not path.startswith("hf:") and os.path.exists(path) and not os.path.isdir(path):
        regular_file(path, "checkpoint file")
    for option, file in (("groups file", groups), ("name-mapping file", mapping)):
        if file and os.path.exists(file):
            regular_file(file, option)
    if is_snapshot_file(path):
        run = Run(path)
        if groups:
            run.extra_groups = load_groups(groups)
        return run
    return CheckpointRun(path, groups, mapping, canonical=canonical, skip_damaged=skip_damaged)


def open_snapshot(path: str | os.PathLike, what: str, groups: str | None = None) -> Run:
    """The snapshot file at ``path`` for probe ``what``, which reads what only a training run stores (its
    losses, task and probe batch), with any token groups of a ``groups`` file added to its own; a
    checkpoint is refused in one line saying so.

    Raises
    ------
    ProbeError
        A checkpoint, or no readable snapshot file.
    """
    path = os.fspath(path)
    if not is_snapshot_file(path) and (os.path.isdir(path) or path.startswith("hf:") or _is_checkpoint_file(path)):
        raise ProbeError(f"{path}: probe {what} reads what a training run stores (its losses, task and probe "
                         "batch): it needs a snapshot file written by probe-train, not a checkpoint")
    if groups and os.path.exists(groups):
        regular_file(groups, "groups file")
    run = Run(path)
    if groups:
        run.extra_groups = load_groups(groups)
    return run


def _is_checkpoint_file(path: str) -> bool:
    from .checkpoints import sniff

    try:
        return os.path.isfile(path) and sniff(path) in ("safetensors", "zip", "pickle")
    except (OSError, ProbeError):
        return False
