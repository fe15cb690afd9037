"""The one result contract every probe follows.

``summary()`` gives the scalar numbers of one step (a row of a trajectory table),
``to_dict()`` everything as strict JSON data (non-finite floats become ``None``), and
``rows()`` tidy ``(metric, key, value)`` rows — the CSV shape ``step,metric,key,value``
of every probe (:func:`tidy_rows`, which the CLI's ``--format csv`` writes) and the columns of
``to_frame()``, the same rows as a pandas DataFrame. ``warnings`` says what the numbers hide (zero
vectors, undefined values). Every API function returns its results as :class:`Results`, a list
with ``to_frame()`` for all of them.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields

import numpy as np

# a metric name is a word; its key (a group or tensor name from a file) may hold anything, "[" and newlines too
_KEYED = re.compile(r"([^\[]+)\[(.+)\]", re.DOTALL)
TIDY = ("step", "metric", "key", "value")   # the columns of every probe's CSV and DataFrame


def jsonable(v):
    """``v`` as plain JSON data: arrays to lists (floats rounded to 8 decimals), numpy scalars to
    Python ones, NaN and infinities to None, dict keys to strings."""
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "f":
            v = np.round(v, 8)
            ok = np.isfinite(v)
            if not ok.all():
                return np.where(ok, v, None).tolist()
        return v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return tidy_value(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


class TokenTexts:
    """The text of a result's tokens (one per id), given, or fetched by ``load`` when first asked for:
    a checkpoint's tokenizer files take ~20 ms to load, ten times a small probe on it, and a batch
    never shows the texts. :meth:`get` is the list, or ``None`` where the source has no vocabulary."""

    def __init__(self, texts: list[str] | None = None, load=None):
        self._texts, self._load = texts, load

    def get(self) -> list[str] | None:
        if self._load is not None:
            self._texts, self._load = self._load(), None
        return self._texts

    def subset(self, keep) -> "TokenTexts":
        """The texts of the tokens at positions ``keep`` (a boolean mask or indices), as lazy as these."""
        pick = np.flatnonzero(keep) if np.asarray(keep).dtype == bool else np.asarray(keep, dtype=np.int64)
        if self._load is None:
            return TokenTexts(None if self._texts is None else [self._texts[int(i)] for i in pick])
        load = self._load
        return TokenTexts(load=lambda: (lambda t: None if t is None else [t[int(i)] for i in pick])(load()))


def labels_field():
    """A result's token texts (:class:`TokenTexts`; ``None``: not known): what the tables label rows
    with, so rendering never opens the file again. Not part of ``to_dict()``."""
    return field(default=None, repr=False, compare=False, metadata={"json": False})


def split_key(name: str) -> tuple[str, str]:
    """A summary name ``metric[key]`` as (metric, key); plain names get key ''."""
    m = _KEYED.fullmatch(name)
    return (m.group(1), m.group(2)) if m else (name, "")


@dataclass
class Result:
    """The contract every probe's result follows: one step's numbers as a summary, JSON data and tidy rows.

    Each probe's result class is a dataclass subclassing this one; its attributes are the probe's numbers
    and arrays (each class lists them with their shapes). A result carries its own labels (token texts,
    tensor names), so nothing has to reopen the file to show it.

    Attributes
    ----------
    step : int or None
        The step of the snapshot; ``None`` where there is none (a result over the whole run, some
        checkpoint results).
    warnings : list of str
        What the numbers hide (zero vectors, undefined values, a near-zero denominator); the API passes
        each on as a [`ProbeWarning`][probe.errors.ProbeWarning].

    Examples
    --------
    >>> import probe
    >>> r = probe.similarity("run.h5")[0]
    >>> r.summary()["distance_corr"]
    >>> r.to_dict()["matrix"]
    >>> r.rows()[:3]                              # [("mean_offdiag", "", 0.41), ...]
    >>> r.to_frame()
    """

    step: int | None
    warnings: list[str] = field(default_factory=list, kw_only=True)

    def summary(self) -> dict[str, float]:
        """The scalar numbers of this step: a row of a trajectory table.

        Returns
        -------
        dict of str to float or int
            ``{"metric[key]": value}`` (``"acc[mem]"``, ``"distance_corr"``); NaN where a number is
            undefined. Counts and steps are integers.
        """
        raise NotImplementedError

    def to_dict(self) -> dict:
        """Every attribute as strict JSON data: what ``probe NAME --format json`` writes.

        Returns
        -------
        dict
            Arrays as (nested) lists, floats rounded to 8 decimals, NaN and infinities as ``None``, keys as
            strings. Labels (token texts) are left out, and so are the vocabulary-sized and map-sized arrays
            of some results (``AlignResult.cos``, ``AttentionResult.mean_map``): the Python object keeps
            them.
        """
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self) if f.metadata.get("json", True)}

    def rows(self) -> list[tuple[str, str, float]]:
        """Tidy ``(metric, key, value)`` rows: the CSV of ``probe NAME --format csv`` without its step column.

        ``acc[mem]`` in the summary is metric ``acc``, key ``mem``; a plain name has key ``""``. Some
        results add rows beyond the summary (a similarity result: every matrix cell as metric ``cosine``,
        key ``i,j``).

        Returns
        -------
        list of tuple of (str, str, float)
            One row per number.
        """
        return [(*split_key(k), v) for k, v in self.summary().items()]

    def to_frame(self):
        """This step's tidy rows as a pandas DataFrame: what ``probe NAME --format csv`` prints for it.

        Returns
        -------
        pandas.DataFrame
            Columns ``step`` (nullable integer), ``metric``, ``key`` (``""`` where the metric has none) and
            ``value`` (float, NaN where the CSV cell is empty).

        Raises
        ------
        ProbeError
            pandas is not installed (``pip install 'gamma-probe[notebook]'``).
        """
        return frame(tidy_rows([self]))


class Results(list):
    """The results of one probe call, one per selected step: a list, plus ``to_frame()``.

    Every probe function returns one. Slices and sums of results stay ``Results``; ``Results(a + b)``
    wraps any list of results.

    Examples
    --------
    >>> import probe
    >>> res = probe.similarity("run.h5", step="all")
    >>> res[-1].distance_corr
    >>> res.to_frame()                            # step, metric, key, value
    >>> (res[-1:] + probe.similarity("other.h5")).to_frame()
    """

    def to_frame(self):
        """Every result's tidy rows in one pandas DataFrame: row for row what ``probe NAME --format csv`` prints.

        Returns
        -------
        pandas.DataFrame
            Columns ``step`` (nullable integer), ``metric``, ``key`` and ``value`` (float, NaN where
            undefined).

        Raises
        ------
        ProbeError
            pandas is not installed (``pip install 'gamma-probe[notebook]'``).
        """
        return frame(tidy_rows(self))

    def __getitem__(self, i):
        got = super().__getitem__(i)
        return Results(got) if isinstance(i, slice) else got

    def __add__(self, other):
        return Results(list(self) + list(other))

    def __radd__(self, other):
        return Results(list(other) + list(self))


def tidy_value(v):
    """A value as the tidy table holds it: ``None`` where it is undefined (``None``, NaN, infinite)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return v


def tidy_rows(results) -> list[tuple]:
    """``(step, metric, key, value)`` rows of a list of results, undefined values ``None``: the one
    source of the CLI's CSV and of :meth:`Results.to_frame`, so the two cannot differ."""
    return [(r.step, m, k, tidy_value(v)) for r in results for m, k, v in r.rows()]


def frame(rows: list[tuple]):
    """Tidy rows as a DataFrame: ``step`` a nullable integer (missing: a checkpoint, a whole-run
    result), ``metric`` and ``key`` strings (``key`` '' where the metric has none), ``value`` a float,
    NaN where the CSV cell is empty."""
    try:
        import pandas as pd
    except ImportError:
        from ..errors import ProbeError

        raise ProbeError("to_frame() needs pandas: pip install 'gamma-probe[notebook]'") from None
    return pd.DataFrame({
        "step": pd.array([r[0] for r in rows], dtype="Int64"),
        "metric": [r[1] for r in rows],
        "key": [r[2] for r in rows],
        "value": np.array([np.nan if r[3] is None else r[3] for r in rows], dtype=np.float64),
    }, columns=list(TIDY))
