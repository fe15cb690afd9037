"""The small protocol every probe result follows.

``summary()`` gives the scalar numbers of one step (a row of a trajectory table),
``to_dict()`` everything, JSON-ready, and ``rows()`` tidy (metric, key, value) rows for CSV.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np


def jsonable(v):
    if isinstance(v, np.ndarray):
        return np.round(v, 8).tolist() if v.dtype.kind == "f" else v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


@dataclass
class Result:
    step: int | None

    def summary(self) -> dict[str, float]:
        raise NotImplementedError

    def to_dict(self) -> dict:
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}

    def rows(self) -> list[tuple[str, str, float]]:
        """Tidy rows: (metric, key, value); key is '' for plain scalars."""
        return [(k, "", v) for k, v in self.summary().items()]
