"""What a probe reads, whatever the path: :func:`open_source` returns a :class:`~probe.format.Run`
for this toolkit's snapshot files and a :class:`CheckpointRun` — one snapshot, canonical tensor
names — for any checkpoint :mod:`.checkpoints` can read. Both are a :class:`probe.source.Source`:
the probes call its methods and never ask which kind of file it is.
"""
from __future__ import annotations

import math
import os
import re

import numpy as np

from ..files import regular_file
from ..limits import WHY, check, parse_json, parse_yaml
from ..errors import ProbeError, param
from ..params import check_number
from ..format import Run, is_snapshot_file
from ..format.steps import step_indices
from .checkpoints import open_checkpoint
from .layouts import CanonicalReader
from .words import ids_to_text, read_text, words_to_ids


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
    """A canonical tensor seen as a one-snapshot, h5py-like dataset (axis 0 = snapshot): its shape
    comes from the checkpoint's header and ``t[0, lo:hi]`` reads only those rows where it can. ``name``
    says it with the raw names it is built from, ``path`` is the checkpoint's, and it is read as float32:
    what the memory budget's check of a read needs (:func:`probe.format.tensors.read_at`)."""

    dtype = np.dtype(np.float32)

    def __init__(self, reader: CanonicalReader, name: str):
        self._reader, self._name, self._value, self._shape = reader, name, None, None
        raw = tuple(reader.layout.rules[name][0])
        self.name = f"{name} ({', '.join(raw)})" if raw and raw != (name,) else name
        self.path = reader.source.path

    @property
    def value(self) -> np.ndarray:
        if self._value is None:
            self._value = self._reader.read(self._name)
        return self._value

    @property
    def shape(self) -> tuple[int, ...]:
        if self._shape is None:
            self._shape = (1, *self._reader.shape(self._name))
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key):
        if (self._value is None and isinstance(key, tuple) and len(key) == 2 and key[0] in (0, -1)
                and isinstance(key[1], slice) and key[1].step in (None, 1)):
            lo, hi, _ = key[1].indices(self.shape[1])
            return self._reader.read_rows(self._name, lo, hi)
        return self.value[None][key]


class CheckpointRun:
    """An external checkpoint as a one-snapshot run with canonical tensor names: a
    [`Source`][probe.source.Source], as a snapshot file's [`Run`][probe.format.run.Run] is.

    Its layout (the canonical names) is found as it opens, an unknown one an error before any other;
    with ``canonical=False`` when first needed: a spectrum (every matrix by its own name) and a model
    run over a text read a checkpoint of any layout.
    """

    def __init__(self, path: str, groups: str | None = None, mapping: str | None = None, step: str = "latest",
                 canonical: bool = True):
        self.path = path
        self.source = open_checkpoint(path, step)
        self._mapping = mapping
        self._reader = CanonicalReader(self.source, mapping) if canonical else None   # (now: its error first)
        self.config = dict(self.source.config)
        self.groups = load_groups(groups, path) if groups else {}
        self._tensors: dict[str, _Tensor] = {}

    n_snapshots = 1

    @property
    def reader(self) -> CanonicalReader:
        """The canonical names (``layer0/W_V``) of the checkpoint's raw tensors; an unknown layout's error."""
        if self._reader is None:
            self._reader = CanonicalReader(self.source, self._mapping)
        return self._reader

    @property
    def dims(self) -> dict:
        """``layers`` and ``heads`` (``None`` where no config gives the head count)."""
        layout = self.reader.layout
        return {"layers": layout.layers, "heads": layout.heads}

    @property
    def steps(self) -> np.ndarray:
        return np.asarray([self.source.step if self.source.step is not None else 0])

    def step_indices(self, spec) -> list[int]:
        """The step grammar of snapshot runs (:func:`probe.format.steps.step_indices`) on this one step."""
        try:
            return step_indices(spec, self.steps, self.path)
        except ProbeError:
            raise ProbeError(f"{self.path}: a checkpoint holds one step ({int(self.steps[0])}); "
                             f"use {param('step', 'latest')}") from None

    def step_of(self, index: int) -> int | None:
        """The checkpoint's own step, as messages name it; None when it has none."""
        return self.source.step

    @property
    def provenance(self) -> dict:
        """What wrote it: ``written_by`` (``"checkpoint"``), ``format``, ``step``, ``layout`` (None: unknown), ``config``."""
        try:
            layout = self.reader.layout.name
        except ProbeError:
            layout = None
        return {"written_by": "checkpoint", "format": self.source.kind, "step": self.source.step, "layout": layout,
                "config": self.config}

    def describe(self) -> dict:
        """The checkpoint as plain data (``probe info``; the keys: :func:`probe.api.info`), its layout
        known or not."""
        src = self.source
        shapes, dtypes, tied = src.shapes(), src.dtypes(), src.aliases()
        try:
            layout = self.reader.layout
            known = {"layout": layout.name, "layers": layout.layers, "heads": layout.heads,
                     "canonical": {n: list(raw) for n, (raw, _) in layout.rules.items()}}
        except ProbeError as exc:   # info describes what it can read, known layout or not
            known = {"layout": None, "layers": None, "heads": None, "canonical": {}, "layout_error": str(exc)}
        return {"file": self.path, "format": src.kind, "step": src.step, **known, "config": src.config,
                "tensors": {n: {"shape": list(s), "dtype": dtypes.get(n, "?"),
                                **({"tied_to": tied[n]} if n in tied else {})} for n, s in shapes.items()},
                "parameters": int(sum(int(np.prod(s)) for n, s in shapes.items()
                                      if n not in tied and "f" in dtypes.get(n, "f")))}   # floats: not index buffers

    def tensor(self, name: str) -> _Tensor:
        if name not in self.reader.names():
            raise ProbeError(f"{self.path}: no tensor '{name}' in this {self.reader.layout.name} checkpoint; "
                             f"known: {', '.join(self.reader.names()[:10])}, ...")
        return self._tensors.setdefault(name, _Tensor(self.reader, name))

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
        (the same memory under two names) once: (indices, names, read(name, index)), the names checked
        against the memory budget (their header's shapes and dtypes, read as float32 with ``work`` times
        that more) before any is read."""
        from ..format.tensors import natural

        if str(spec) not in ("latest", "all", str(self.source.step)):
            raise ProbeError(f"{self.path}: a checkpoint holds one step; use {param('step', 'latest')}")
        tied = self.source.aliases()   # a tied lm_head is the embedding: one matrix, counted once
        names = sorted((n for n, s in self.source.shapes().items() if len(s) == 2 and min(s) > 1 and n not in tied),
                       key=natural)
        shapes, dtypes = self.source.shapes(), self.source.dtypes()
        for n in names:
            dtype = dtypes.get(n, "float32")
            bits = re.search(r"\d+", dtype)      # f32, bf16, float16, f8_e4m3 (safetensors' and torch's names)
            check(self.path, n, shapes[n], _LONG.get(dtype, dtype), int(bits.group()) // 8 if bits else 1,
                  need=math.prod(shapes[n]) * 4 * (1 + work), why=WHY)
        return [0], names, lambda n, i: self.source.read(n)

    def word_ids(self, words: list[str]) -> np.ndarray:
        """Ids of ``words`` from the checkpoint's tokenizer files."""
        return words_to_ids(self.path, words)

    def token_texts(self, ids, later: bool = False):
        """Text of each token id from the tokenizer files; ``None`` without them (or, with a warning, when
        they cannot be read). ``later``: a function giving them when first asked for (the files take
        ~20 ms to load, ten times a small probe)."""
        path, ids = self.path, [int(i) for i in ids]
        return (lambda: ids_to_text(path, ids)) if later else ids_to_text(path, ids)

    def forward(self, text: str | None, what: str, step, *, window: int, max_tokens: int, attention: bool = False):
        """The checkpoint's model run over the windows of ``text`` (a
        :class:`~probe.readers.activations.Forward`): the activations a checkpoint does not store."""
        from .activations import run_text   # transformers and torch: only for a probe of activations

        if text is None:
            raise ProbeError(f"{self.path}: {what} on a checkpoint needs activations: pass {param('text')} FILE, a "
                             "text file to run the model on (its tokenizer files are used)")
        if str(step) not in ("latest", "all"):
            raise ProbeError(f"{self.path}: a checkpoint holds one step; use {param('step', 'latest')}")
        check_number("window", window)
        check_number("max_tokens", max_tokens)
        return run_text(self.path, text, window=window, max_tokens=max_tokens, attention=attention)

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

    def __enter__(self) -> "CheckpointRun":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_LONG = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16"}   # safetensors' short names


def open_source(path: str | os.PathLike, groups: str | None = None, mapping: str | None = None, *,
                canonical: bool = True):
    """The [`Source`][probe.source.Source] at ``path``: a :class:`Run` for a snapshot file (its groups, plus
    any from ``groups``), else a :class:`CheckpointRun` (``mapping``: a name-mapping file for its layout;
    ``canonical=False``: its layout found only when its canonical names are first asked for, so that a
    probe of raw tensors or of a model run reads a checkpoint of any layout).

    Raises
    ------
    ProbeError
        A path that is no regular file or folder, or no readable snapshot file or checkpoint.

    Examples
    --------
    >>> from probe.readers.source import open_source
    >>> with open_source("model/") as src:
    ...     src.tensor("token_embedding").shape
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
    return CheckpointRun(path, groups, mapping, canonical=canonical)


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
