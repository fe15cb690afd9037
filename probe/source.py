"""What a probe reads: the one protocol every source of weights and activations follows.

A snapshot file ([`Run`][probe.format.run.Run]) and external checkpoints
([`CheckpointRun`][probe.readers.source.CheckpointRun]: one checkpoint, or a folder of one training's
checkpoints, a snapshot each) are both a :class:`Source`;
[`open_source`][probe.readers.source.open_source] gives the right one for a path. A probe calls
these methods and never asks which kind of file it has: where a kind cannot answer, its method
says so (a checkpoint's ``forward`` runs its model over a text where a snapshot file stores the
activations; a lone weights file's ``dims["heads"]`` is ``None``). A new kind of source implements
these members and every probe of weights reads it.

Nothing of the package is imported here: the protocol is a description, checked structurally
(``isinstance(run, Source)``).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Source(Protocol):
    """An open source of weights: steps, tensors by canonical name, token groups, texts, provenance.

    Attributes
    ----------
    path : str
        The file or folder, as messages name it.
    config : dict
        The configuration it came with (a run's ``RunConfig`` fields; a checkpoint's ``config.json``).
    dims : dict
        ``layers`` and ``heads`` at least (``heads`` None where no config gives it), a run's more.
    n_snapshots : int
        The snapshots it holds (a checkpoint: 1; a folder of checkpoints: one each).
    steps : ndarray of int, shape (n_snapshots,)
        The step of each snapshot, ascending (a folder's checkpoints: the numbers in their names; a lone
        checkpoint without one: 0).
    groups : dict of str to ndarray of int
        The token groups, name -> token ids (a checkpoint: those of a ``--groups`` file).
    stores_activations : bool
        Whether it stores the activations of its probe batch (attention maps, norm statistics, token
        losses: a snapshot file's schema entries, :meth:`has` and :meth:`dataset`); else :meth:`forward`
        gives them.
    splits : list of str
        The data splits its stored metrics and probe batch are by (a checkpoint: none).
    provenance : dict
        What wrote it: ``written_by`` (``"probe-train"`` or ``"checkpoint"``) and the configuration, with a
        run's package and schema versions and environment, a checkpoint's format, step and layout.

    Examples
    --------
    >>> from probe.readers.source import open_source
    >>> from probe.source import Source
    >>> with open_source("run.h5") as src:
    ...     assert isinstance(src, Source)
    ...     i = src.step_indices("latest")[0]
    ...     emb = src.tensor("token_embedding")[i]        # (vocab, d_model)
    """

    path: str
    config: dict
    n_snapshots: int
    stores_activations: bool
    splits: list[str]

    @property
    def dims(self) -> dict: ...

    @property
    def steps(self) -> np.ndarray: ...

    @property
    def groups(self) -> dict[str, np.ndarray]: ...

    @property
    def provenance(self) -> dict: ...

    def describe(self) -> dict:
        """All of it as plain data: what ``probe info`` shows (:func:`probe.api.info`)."""

    def step_indices(self, spec: str | int) -> list[int]:
        """The snapshot indices a ``--step`` selection names (``latest``, ``all``, ``A:B``, a list); a
        ProbeError for a step it does not hold."""

    def step_of(self, index: int) -> int | None:
        """The step of snapshot ``index`` as messages name it (a checkpoint without a step: None)."""

    def tensor(self, name: str) -> Any:
        """Tensor ``name`` (canonical: ``token_embedding``, ``layer0/W_V``) as an h5py-like dataset: axis 0
        the snapshot, ``shape``, ``ndim``, ``dtype``, ``name``, and ``t[i, lo:hi]`` reading only those rows
        (:func:`probe.format.tensors.read_at` reads it within the memory budget); a ProbeError naming the
        known tensors for an unknown one."""

    def tensors(self) -> dict[str, tuple[int, ...]]:
        """Every tensor and its per-snapshot shape."""

    def weights(self) -> dict[str, tuple[int, ...]]:
        """The tensors with a canonical name and their per-snapshot shapes."""

    def label(self, name: str) -> str:
        """Tensor ``name`` as messages and results name it (a checkpoint adds the raw names it is built from)."""

    def matrices(self) -> list[str]:
        """The weight matrices (2-D, or per-head 3-D) by canonical name."""

    def linear_maps(self, spec: str | int, work: float = 0) -> tuple[list[int], list[str], Callable]:
        """Every weight matrix as one linear map (a spectrum's input): (snapshot indices of ``spec``, names
        checked against the memory budget with ``work`` times more, ``read(name, index)`` -> 2-D array)."""

    def word_ids(self, words: list[str]) -> np.ndarray:
        """Token ids of ``words`` (a stored vocabulary, or tokenizer files); absent words left out with a
        warning; a ProbeError when none is found or there is nothing to look them up in."""

    def token_texts(self, ids, later: bool = False) -> Any:
        """Text of each token id (None: no vocabulary); ``later``: a function giving them, callable after
        the source is closed."""

    def forward(self, text: str | None, what: str, step, *, window: int, max_tokens: int,
                attention: bool = False) -> Any:
        """Activations of the model over ``text`` (a ``probe.readers.activations.Forward``) for a source
        that does not store them; None for one that does (a snapshot file: ``text`` ignored with a warning).
        ``what`` names the probe in its errors."""

    def has(self, entry: str, **fields) -> bool:
        """Whether it stores schema entry ``entry`` (``attention``, ``norm_ms``, ``token_loss``; the names of
        ``schemas/``): only a source that stores activations holds any."""

    def dataset(self, entry: str, **fields) -> Any:
        """Stored schema entry ``entry`` as an h5py-like dataset (axis 0 the snapshot where it has one); a
        ProbeError for one it does not store."""

    def strings(self, entry: str) -> list[str]:
        """A stored string entry (``norm_sites``) as a list; a ProbeError for one it does not store."""

    def close(self) -> None:
        """Close it (a ``with`` block does it on leaving)."""

    def __enter__(self) -> "Source": ...

    def __exit__(self, *exc) -> Any: ...
