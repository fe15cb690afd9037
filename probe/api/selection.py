"""Which tokens and rows a probe reads: the one parser of the ``tokens`` / ``words`` / ``words_file``
arguments (:func:`select_tokens`), the rows of a tensor at the selected steps (:class:`TokenRows`),
and :func:`token_vectors`, the same for a probe in another package."""
from __future__ import annotations

import numpy as np

from .. import registry
from ..limits import FLOAT64
from ..analyses.base import TokenTexts
from ..docstrings import fill
from ..errors import ProbeError, param
from ..format.tensors import check_fits, read_at
from ..readers.source import open_source
from ..readers.tokens import parse_tokens
from ..readers.words import word_list
from ..source import Source
from .checks import check_enough
from .finite import Finite, finite_tokens


def select_tokens(run: Source, tokens=None, *, words=None, words_file: str | None = None,
                  tensor: str = "token_embedding", probe: str = "similarity") -> tuple[np.ndarray | None, list[str]]:
    """The token ids a selection names, checked against the rows of ``tensor``.

    The one parser of the probes' ``tokens`` / ``words`` / ``words_file`` arguments.

    Parameters
    ----------
    run : Source
        An open [`Source`][probe.source.Source]: what [`open_source`][probe.readers.source.open_source]
        gives for a snapshot file or a checkpoint.
    {tokens}
    {words}
    {words_file}
    {tensor}
    probe : str, default "similarity"
        The probe whose default selection applies when nothing is chosen.

    Returns
    -------
    ids : ndarray of int, shape (k,), or None
        The selected ids, in order of appearance, duplicates dropped; ``None`` when the probe's default
        is every row.
    labels : list of str, length k
        The group each id was chosen by (``""`` for plain ids and words).

    Raises
    ------
    ProbeError
        Both ``tokens`` and ``words``; an unknown group; no word found (a word not found is left out with
        a ``ProbeWarning``); an id outside the rows of ``tensor``; an empty selection.

    Examples
    --------
    >>> from probe.format import Run
    >>> from probe.api import select_tokens
    >>> with Run("run.h5") as run:
    ...     ids, labels = select_tokens(run, "reasoning,3,5")
    """
    rows = run.tensor(tensor).shape[1]
    wl = word_list(words, words_file)
    if wl:
        if tokens is not None:
            raise ProbeError(f"give {param('tokens')} or {param('words')}, not both")
        ids = run.word_ids(wl)
        bad = ids[(ids < 0) | (ids >= rows)]
        if bad.size:
            raise ProbeError(f"word token id(s) {', '.join(map(str, bad[:5]))} outside the rows of {tensor} "
                             f"(0..{rows - 1})")
        return ids, [""] * len(ids)
    if tokens is None:
        tokens = registry.default_tokens(probe)
        if tokens is None:
            return None, []
        missing = [g for g in tokens.split(",") if g not in run.groups]
        if missing:
            known = ", ".join(sorted(run.groups)) or "none"
            raise ProbeError(f"{run.path}: has no token group '{missing[0]}' (the default selection); choose "
                             f"tokens with {param('tokens')} or {param('words')} (groups here: {known})")
    # a selection refused by the memory budget before its ids are made: its rows could not be read
    return parse_tokens(tokens, run.groups, rows, lambda n: check_fits(run.tensor(tensor), 1, range(n)))


select_tokens.__doc__ = fill(select_tokens.__doc__, "", "the default selection of probe ``probe`` (``None`` where "
                             "that is every row)", "", select_tokens)


def group_of(groups: dict, ids: np.ndarray, labels: list[str]) -> list[str]:
    """Group of each id: the group that selected it, else the first of ``groups`` holding it, else ''."""
    return [lab or next((g for g, v in groups.items() if i in v), "") for i, lab in zip(ids, labels)]


class TokenRows:
    """The chosen rows of a tensor at each selected step, read while the source is open: what
    similarity, pca, cohesion and cka analyse, and :func:`token_vectors` gives a probe of another package.

    Selects the tokens (:func:`select_tokens`), checks there are ``need`` of them, reads only their rows
    at the ``step`` selection within the memory budget; :meth:`finite` then gives step k's rows without
    those holding a NaN or inf (an error unless ``allow_nonfinite``), with their ids and labels.

    Attributes
    ----------
    ids : ndarray of int, shape (k,), or None
        The selected token ids (None: every row).
    labels : list of str
        The group each id was chosen by.
    vectors : list of ndarray, each (k, ...)
        The rows at each selected step.
    steps : list of int
        The selected steps.
    check : Finite
        The non-finite check; call ``check.warn()`` once the rows are used.
    texts : TokenTexts
        The ids' texts (a checkpoint's when first asked for).

    Examples
    --------
    >>> from probe.api import TokenRows
    >>> from probe.readers.source import open_source
    >>> with open_source("run.h5") as src:
    ...     rows = TokenRows(src, "reasoning", None, None, "token_embedding", "all", False, "similarity", 2, "similarity")
    >>> X, ids, labels = rows.finite(0, rows.labels)
    """

    def __init__(self, run: Source, tokens, words, words_file, tensor: str, step, allow_nonfinite: bool, probe: str,
                 need: int, what: str, work: float = FLOAT64):
        """``work``: what the math holds besides the rows, in multiples of them (see :func:`read_at`)."""
        self.ids, self.labels = select_tokens(run, tokens, words=words, words_file=words_file, tensor=tensor,
                                              probe=probe)
        check_enough(self.ids, need, what)
        indices = run.step_indices(step)
        self.vectors = read_at(run.tensor(tensor), indices, self.ids, work)
        self.steps = [int(run.steps[i]) for i in indices]
        self.at = [run.step_of(i) for i in indices]
        self.check, self.name = Finite(run.path, allow_nonfinite), run.label(tensor)
        self.texts = TokenTexts(load=run.token_texts(self.ids, later=True))
        self.need, self.what, self._run_groups = need, what, dict(run.groups)

    def group_of(self) -> list[str]:
        """The group of each id: the one that selected it, else the first stored group holding it, else ''."""
        return group_of(self._run_groups, self.ids, self.labels)

    def finite(self, k: int, labels: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(rows (n, d), their ids, their ``labels``) at step ``k``, the non-finite rows left out."""
        return finite_tokens(self.check, self.name, self.vectors[k].reshape(len(self.ids), -1), self.at[k],
                              self.ids, labels, self.need, self.what)

    def texts_of(self, sel: np.ndarray):
        """The texts of the kept ids ``sel`` (lazy for a checkpoint: :class:`~probe.analyses.base.TokenTexts`)."""
        return self.texts.subset(np.isin(self.ids, sel))


def token_vectors(path, tokens=None, *, words=None, words_file: str | None = None, tensor: str = "token_embedding",
                  step: str | int = "latest", groups: str | None = None, mapping: str | None = None,
                  allow_nonfinite: bool = False, probe: str = "") -> list[tuple[int, np.ndarray]]:
    """The selected token vectors at each selected step: what a probe of token vectors starts from (one in
    another package, too; the built-in ones use :class:`TokenRows`, which this reads through).

    Opens ``path`` (any source), selects the tokens as every probe does (``tokens``, ``words``,
    ``words_file``; ``None``: probe ``probe``'s default selection), reads only their rows of ``tensor`` at
    the ``step`` selection, and checks them: a row holding NaN or inf is an error, or with
    ``allow_nonfinite`` left out with a ``ProbeWarning``.

    Returns
    -------
    list of (int, ndarray of shape (k, d))
        (step, the rows) per selected step.
    """
    with open_source(path, groups, mapping) as run:
        rows = TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, probe, 1, "the probe")
    out = [(s, rows.finite(k, rows.labels)[0]) for k, s in enumerate(rows.steps)]
    rows.check.warn()
    return out
