"""The page as HTML: data for the templates in ``templates/`` (autoescaped: everything from a run
is plain text in these dicts, escaped in exactly one place)."""
from __future__ import annotations

import functools
import os
import re

import jinja2
import numpy as np
from markupsafe import Markup

from .._text import markup_text
from .charts import family, plain_number
from .sources import Section, RunSource

REFRESH_S = 3


# --- the page: data for the templates in probe/report/templates -----------------------------------
# Everything from a run (file names, config keys and values, task fields, group names, token texts,
# tensor and metric names, error and warning messages) reaches the page as plain text in these
# dicts and is escaped in exactly one place: the templates' autoescape (after _shown_text below).

def _shown_text(value):
    """Every value a template prints, before autoescape: text from a run made valid in HTML and XML
    (undecodable bytes of a file name and control characters as \\xNN: :func:`probe._text.markup_text`)."""
    if type(value) is str:
        # most values are plain ASCII (numbers, names, base64): skip the search for characters to spell
        return value if value.isascii() and value.isprintable() else markup_text(value)
    if isinstance(value, Markup):       # a macro's own output, already escaped
        return value
    return markup_text(str(value))


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")),
        autoescape=True, finalize=_shown_text, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_page(template: str, **values) -> str:
    return _env().get_template(template).render(**values)


def note_html(text: str, cls: str = "note") -> dict:
    return {"kind": "note", "text": text, "cls": cls}


def section_html(anchor: str, title: str, srcs: list[RunSource], cells: list[list[dict]]) -> dict:
    """A section with a column per run; a cell is a list of parts (notes, tables, figures, a slider)."""
    return {"anchor": anchor, "title": title, "compare": None,
            "runs": [{"label": s.label, "cell": c} for s, c in zip(srcs, cells)]}


def _fmt(v) -> str:
    if v is None or (isinstance(v, (float, np.floating)) and not np.isfinite(v)):
        return "–"
    return f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v)


def row_html(cells: list, diff: bool = False) -> dict:
    return {"cells": cells, "diff": diff}


def table_html(head: list, rows: list[dict], name: str, classes: tuple = ()) -> dict:
    """A table with a copy button; ``classes``: a CSS class per column (None: none)."""
    return {"kind": "table", "head": head, "rows": rows, "name": name,
            "classes": list(classes) + [None] * (len(head) - len(classes))}


def numbers_table(sec: Section, name: str) -> dict:
    steps = sec.table_steps or sorted(sec.results)
    keys = list(dict.fromkeys(k for s in steps for k in sec.results[s].summary()))
    return table_html(["number"] + [f"step {s}" for s in steps],
                  [row_html([k] + [_fmt(sec.results[s].summary().get(k)) for s in steps]) for k in keys], name)


DIFF_FACTOR = 2.0   # the comparison highlights numbers of runs that differ by more than this factor, or in sign,
FLOOR = 0.1         # by more than this share of the largest number of their kind (by_distance[1..9]: one kind)


def _differs(vals: list, floor: float = 1e-6) -> bool:
    """Whether runs' numbers differ enough to say so: by more than ``floor``, and by a factor of
    DIFF_FACTOR or more between the largest and the smallest magnitude, or in sign."""
    nums = _finite(vals)
    if len(nums) < 2:
        return False
    lo, hi = min(nums), max(nums)
    if hi - lo <= max(floor, 1e-6):
        return False
    if lo < 0 < hi:
        return True
    small, big = sorted((abs(lo), abs(hi)))
    return big >= DIFF_FACTOR * small


def compare_table(probe: str, srcs: list[RunSource], secs: list[Section]) -> dict | None:
    finals = [sec.results[max(sec.results)] if sec.results else None for sec in secs]
    keys = list(dict.fromkeys(k for r in finals if r is not None for k in r.summary()))
    if not keys:
        return None
    head = ["at the last step"] + [f"{s.label} (step {r.step if r is not None else '–'})" for s, r in zip(srcs, finals)]
    values = {k: [r.summary().get(k) if r is not None else None for r in finals] for k in keys}
    # a kind of number (by_distance[1..9]) sets its own scale: differences under FLOOR of its largest are noise
    scale: dict[str, float] = {}
    for k, vals in values.items():
        scale[family(k)] = max([scale.get(family(k), 0.0)] + [abs(v) for v in _finite(vals)])
    body = [row_html([k] + [_fmt(v) for v in vals], diff=_differs(vals, FLOOR * scale[family(k)]))
            for k, vals in values.items()]
    return table_html(head, body, f"{probe}-compare")


def _finite(vals) -> list[float]:
    return [x for x in map(plain_number, vals) if x is not None and np.isfinite(x)]


def chart_html(svg: str, filename: str, caption: str, step: int | None = None) -> dict:
    """An inline SVG chart (its points carry hover titles) with a download link that the page's script
    fills with the chart's own markup when clicked (not a second copy of it in the page: a data: URI
    would double the page's size)."""
    # svg.py escaped every value from a run as it built the chart: it is safe for the template
    return {"kind": "chart", "step": step, "caption": caption, "svg": Markup(svg),
            "filename": _download_name(filename)}


def _download_name(name: str) -> str:
    """A file name for a download link: letters, digits, '.', '-' and '_' only (a browser saves it
    as given: no folders, no quotes, nothing a shell or a file system reads specially)."""
    return re.sub(r"[^\w.-]", "_", markup_text(name), flags=re.ASCII)


def slider_html(figures: dict, name: str, marked: list | None = None) -> dict:
    """One figure per step behind a slider that reaches every step; ``marked``: the steps of the numbers
    table, listed beside the slider as links. The slider starts at the last step."""
    steps = sorted(figures)
    shown = [chart_html(figures[s], f"{name}-step{s}.svg", f"step {s}", s) for s in steps]
    return {"kind": "slider", "name": name, "figures": shown,
            "marks": [{"i": steps.index(s), "step": s} for s in (marked or []) if s in figures]}


def groups_html(src: RunSource) -> list[dict]:
    if not src.groups:
        return [note_html("no token groups")]
    body = []
    for name, (ids, texts) in src.groups.items():
        shown = texts if texts is not None else [str(int(i)) for i in ids]
        more = f" … (+{len(shown) - 40})" if len(shown) > 40 else ""
        body.append(row_html([name, len(ids), " ".join(repr(t) if texts is not None else t for t in shown[:40]) + more]))
    kind = "text" if any(t is not None for _, t in src.groups.values()) else "ids"
    return [table_html(["group", "tokens", kind], body, f"{src.label}-groups", (None, None, "tokens"))]
