"""Render results to stdout as an aligned table, JSON or CSV (data only; logs go to stderr)."""
from __future__ import annotations

import csv
import json
import math
import sys
from typing import Iterable, Sequence

FORMATS = ("table", "json", "csv")


def _cell(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4f}"
    return str(v)


def table(header: Sequence[str], rows: Iterable[Sequence], out=None) -> None:
    out = out or sys.stdout
    rows = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    out.write("  ".join(h.rjust(w) for h, w in zip(header, widths)).rstrip() + "\n")
    for r in rows:
        out.write("  ".join(c.rjust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def write_json(obj, out=None) -> None:
    out = out or sys.stdout
    json.dump(obj, out, indent=2, default=_jsonable, allow_nan=True)
    out.write("\n")


def _jsonable(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def write_csv(header: Sequence[str], rows: Iterable[Sequence], out=None) -> None:
    w = csv.writer(out or sys.stdout, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
