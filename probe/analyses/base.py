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

    def __getstate__(self) -> dict:
        """Pickled with the texts themselves (a loader is a closure over an open source)."""
        return {"_texts": self.get(), "_load": None}

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

    def __init_subclass__(cls, **kw):
        """A subclass keeps the short :meth:`__repr__` (``@dataclass`` would write one that prints every
        array) unless it defines its own."""
        super().__init_subclass__(**kw)
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = Result.__repr__

    def __repr__(self) -> str:
        """What it is, in one line: its class, step, first summary numbers and its arrays' shapes, e.g.
        ``SimilarityResult(step=40, mean_offdiag=0.4132, ...; shapes: ids (10,), matrix (10, 10))``;
        no array's values (``r.matrix`` has them)."""
        numbers = _summary(self)
        said = [f"step={self.step}", *(f"{k}={_number(v)}" for k, v in list(numbers.items())[:MAX_SHOWN])]
        if len(numbers) > MAX_SHOWN:
            said.append(f"... ({len(numbers)} numbers: .summary())")
        sizes = [f"{f.name} {_size(getattr(self, f.name))}" for f in fields(self)
                 if f.repr and f.name != "warnings" and _size(getattr(self, f.name))]
        tail = f"; shapes: {', '.join(sizes)}" if sizes else ""
        tail += f"; {len(self.warnings)} warning(s)" if self.warnings else ""
        return f"{type(self).__name__}({', '.join(said)}{tail})"

    def _repr_html_(self) -> str:
        """A notebook's view: the class and step over a table of the summary numbers."""
        rows = "".join(f"<tr><td>{_html(k)}</td><td>{_number(v)}</td></tr>" for k, v in _summary(self).items())
        return (f"<b>{_html(type(self).__name__)}</b>, step {self.step}"
                f"<table><tr><th>metric</th><th>value</th></tr>{rows}</table>")

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

    def __repr__(self) -> str:
        """What the list holds: the kind and steps of its results, then a summary row per step (the first
        :data:`MAX_SHOWN` numbers; a long list's first and last steps), e.g.::

            Results: 9 SimilarityResult, steps 0, 1, 2, 4, ..., 30, 40
            step  mean_offdiag  std_offdiag  distance_corr  ...
        """
        if not self:
            return "Results: empty"
        for columns in range(MAX_SHOWN, 0, -1):   # as many numbers as fit 100 columns
            header, rows = self._table(columns)
            shown = rows if len(rows) <= 12 else [*rows[:6], ["..."] * len(header), *rows[-5:]]
            widths = [max(len(str(r[i])) for r in [header, *shown]) for i in range(len(header))]
            if sum(widths) + 2 * len(widths) <= 100:
                break
        lines = ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *shown]]
        return "\n".join([self._title(), *lines])

    def _repr_html_(self) -> str:
        """A notebook's view: the same as a table, every step."""
        header, rows = self._table()
        if not rows:
            return "Results: empty"
        cells = "".join("<tr>" + "".join(f"<td>{_html(c)}</td>" for c in r) + "</tr>" for r in rows)
        return (f"{_html(self._title())}<table><tr>{''.join(f'<th>{_html(h)}</th>' for h in header)}</tr>"
                f"{cells}</table>")

    def _title(self) -> str:
        kinds = ", ".join(dict.fromkeys(type(r).__name__ for r in self))
        steps = [str(r.step) for r in self]
        listed = ", ".join(steps) if len(steps) <= 8 else f"{', '.join(steps[:4])}, ..., {', '.join(steps[-2:])}"
        return f"Results: {len(self)} {kinds}, step{'s' * (len(steps) > 1)} {listed}"

    def _table(self, columns: int | None = None) -> tuple[list[str], list[list[str]]]:
        """(header, rows): the step and the first ``columns`` summary numbers (None: all) of each result."""
        summaries = [_summary(r) for r in self]
        keys = list(dict.fromkeys(k for s in summaries for k in s))
        shown = keys[:columns]
        more = [f"+{len(keys) - len(shown)} more"] if len(shown) < len(keys) else []
        rows = [[str(r.step), *(_number(s.get(k)) for k in shown), *[""] * len(more)] for r, s in zip(self, summaries)]
        return ["step", *shown, *more], rows

    def __getitem__(self, i):
        got = super().__getitem__(i)
        return Results(got) if isinstance(i, slice) else got

    def __add__(self, other):
        return Results(list(self) + list(other))

    def __radd__(self, other):
        return Results(list(other) + list(self))


MAX_SHOWN = 6   # summary numbers a repr shows (a spectrum result has one per weight matrix)


def _summary(r) -> dict:
    try:
        return r.summary()
    except NotImplementedError:   # a bare Result
        return {}


def _number(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    return str(v)


def _size(v) -> str:
    """An array's shape, a long list's or dict's length; '' for what the repr shows whole or not at all."""
    if isinstance(v, np.ndarray):
        return str(v.shape)
    if isinstance(v, (list, tuple, dict)) and len(v) > 3:
        return f"[{len(v)}]"
    return ""


def _html(text) -> str:
    import html

    return html.escape(str(text))


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
