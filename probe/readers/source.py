"""One reading interface over snapshot files and external checkpoints.

:func:`open_source` returns a :class:`~probe.format.Run` for this toolkit's snapshot
files and a :class:`CheckpointRun` — one snapshot, canonical tensor names — for any
checkpoint :mod:`.checkpoints` can read, so the weight probes (similarity, pca, align,
condense) run unchanged on both. :func:`word_ids` looks words up in either.
"""
from __future__ import annotations

import os

import numpy as np

from .._files import regular_file
from .._limits import parse_json, parse_yaml
from ..errors import ProbeError, param
from ..format import Run, is_snapshot_file
from ..format.steps import step_indices
from .checkpoints import open_checkpoint
from .layouts import CanonicalReader
from .words import ids_to_text, read_text, words_in_vocabulary, words_to_ids


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
    what the memory budget's check of a read needs (:func:`probe.api._common.read_at`)."""

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
    """An external checkpoint as a one-snapshot run with canonical tensor names."""

    def __init__(self, path: str, groups: str | None = None, mapping: str | None = None, step: str = "latest"):
        self.path = path
        self.source = open_checkpoint(path, step)
        self.reader = CanonicalReader(self.source, mapping)
        self.config = dict(self.source.config)
        layout = self.reader.layout
        self.dims = {"layers": layout.layers, "heads": layout.heads}
        self.groups = load_groups(groups, path) if groups else {}
        self._tensors: dict[str, _Tensor] = {}

    n_snapshots = 1

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

    def tensor(self, name: str) -> _Tensor:
        if name not in self.reader.names():
            raise ProbeError(f"{self.path}: no tensor '{name}' in this {self.reader.layout.name} checkpoint; "
                             f"known: {', '.join(self.reader.names()[:10])}, ...")
        return self._tensors.setdefault(name, _Tensor(self.reader, name))

    def tensors(self) -> dict[str, tuple[int, ...]]:
        return {n: self.tensor(n).shape[1:] for n in self.reader.names()}

    def weight_matrices(self) -> list[str]:
        """Per-layer weight matrices (norm gains, which are vectors, left out)."""
        return [n for n in self.reader.names() if n.startswith("layer") and self.tensor(n).ndim >= 3]

    def close(self) -> None:
        self._tensors.clear()

    def __enter__(self) -> "CheckpointRun":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_source(path: str | os.PathLike, groups: str | None = None, mapping: str | None = None):
    """A :class:`Run` for a snapshot file (its groups, plus any from ``groups``), else a :class:`CheckpointRun`."""
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
    return CheckpointRun(path, groups, mapping)


def word_ids(run, words: list[str]) -> np.ndarray:
    """Ids of ``words`` in ``run``: the vocabulary a text run stores, or a checkpoint's tokenizer files."""
    if isinstance(run, Run):
        strings = run.token_strings()
        if strings is None:
            raise ProbeError(f"{run.path}: stores no vocabulary (a synthetic task), so {param('words')} cannot "
                             f"be looked up; select ids with {param('tokens')}")
        return words_in_vocabulary(strings, words)
    return words_to_ids(run.path, words)


def token_texts(run, ids) -> list[str] | None:
    """Text of each token id in ``run``: the vocabulary a text run stores, or a checkpoint's tokenizer
    files; ``None`` for a synthetic run, or a checkpoint without (or with unreadable: a warning)
    tokenizer files."""
    if isinstance(run, Run):
        strings = run.token_strings()
        return None if strings is None else [strings[int(i)] for i in ids]
    return ids_to_text(run.path, ids)
