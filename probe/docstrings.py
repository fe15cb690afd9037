"""The API docstrings' entries of the shared parameters, written from their declarations (:mod:`probe.params`).

A probe function's numpydoc ``Parameters`` section may hold a line ``{name}`` (alone, or followed by more
sentences about this probe) for any parameter of :data:`probe.params.PARAMS`; its declaration
(:class:`probe.registry.Probe`) writes the shared entry there, said about that probe: its type and the
function's own default, what ``path`` may be follows what it reads, the default of ``tokens`` is its own,
``allow_nonfinite`` says what it leaves out, and a range is said as :func:`probe.params.check_number` checks
it. ``help(probe.similarity)``, the API reference and the numpydoc of another package's probe read the result.
"""
from __future__ import annotations

import inspect
import re
import textwrap

from .params import PARAMS, bounds

_PATHS = {"weights": "A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.",
          "snapshot": "A snapshot file written by ``probe-train``.",
          "activations": "A snapshot file written by ``probe-train``, or a checkpoint file or folder (with ``text``), "
                         "or ``hf:ORG/NAME@REV``."}
_LINE = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>\w+)\}(?:[ \t]+(?P<more>\S.*?))?[ \t]*$", re.M)
DOC_WIDTH = 116


def _kind(name: str, function) -> str:
    """The type line of ``name``: its declared type, then the default ``function`` gives it."""
    kind = PARAMS[name].kind
    sig = inspect.signature(function).parameters if function is not None else {}
    if name not in sig or sig[name].default is inspect.Parameter.empty:
        return kind
    d = sig[name].default
    return f"{kind}, optional" if d is None else f'{kind}, default "{d}"' if isinstance(d, str) else f"{kind}, default {d}"


def entry(name: str, indent: str = "", function=None, more: str = "", **fields: str) -> str:
    """Parameter ``name``'s numpydoc entry at ``indent`` (its default: ``function``'s), its ``{...}`` fields
    filled from ``fields``, then ``more`` (what a probe adds), then its range."""
    p = PARAMS[name]
    rng = bounds(p)
    text = " ".join(x for x in (p.doc.format(**fields), more, rng and rng[0].upper() + rng[1:] + ".") if x)
    body = textwrap.fill(text, DOC_WIDTH, initial_indent=indent + "    ", subsequent_indent=indent + "    ")
    return f"{indent}{name} : {_kind(name, function)}\n{body}"


def fill(doc: str | None, reads: str, default: str, nonfinite: str, function=None) -> str | None:
    """``doc`` with every ``{name}`` line of :data:`probe.params.PARAMS` written out for a probe that reads
    ``reads``, selects ``default`` when given no tokens, and goes on past NaN or inf as ``nonfinite`` says;
    the defaults are ``function``'s (None: the type alone)."""
    if not doc:
        return doc
    fields = {"path": _PATHS.get(reads, ""), "default": default, "nonfinite": nonfinite}
    return _LINE.sub(lambda m: entry(m["name"], m["indent"], function, m["more"] or "", **fields)
                     if m["name"] in PARAMS else m[0], doc)
