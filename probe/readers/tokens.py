"""Token selections: ``reasoning``, ``keys,memory``, ``11:21`` (half-open), ``3,5,7``."""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from ..errors import ProbeError, param

_RANGE = re.compile(r"^(-?\d+):(-?\d+)$")


def parse_tokens(spec, groups: Mapping[str, np.ndarray], vocab: int) -> tuple[np.ndarray, list[str]]:
    """Token ids selected by ``spec`` and the group each id came from ("" for plain ids).

    ``spec`` is a comma-separated list of group names, ids and half-open ranges ``A:B``, or a
    sequence of ids and group names. Ids keep their order of appearance; duplicates are dropped.
    """
    if spec is not None and not isinstance(spec, str):
        spec = ",".join(str(int(x)) if isinstance(x, (int, np.integer)) else str(x) for x in spec)
    spec = (spec or "").strip()
    if not spec:
        raise ProbeError(f"empty {param('tokens')} selection")
    ids: list[int] = []
    labels: list[str] = []
    seen: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise ProbeError(f"empty item in {param('tokens', spec)}: remove the extra comma")
        if part in groups:
            new = [int(i) for i in groups[part]]
            tag = part
        elif m := _RANGE.match(part):
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi <= lo:
                raise ProbeError(f"empty token range '{part}' (ranges are half-open: 11:21 is 11..20)")
            new, tag = list(range(lo, hi)), ""
        elif re.fullmatch(r"-?\d+", part):
            new, tag = [int(part)], ""
        else:
            known = ", ".join(sorted(groups)) or "none in this file"
            raise ProbeError(f"unknown token group '{part}'; known groups: {known} (or ids such as 11:21 or 3,5,7)")
        for i in new:
            if i not in seen:
                seen.add(i)
                ids.append(i)
                labels.append(tag)
    arr = np.asarray(ids, dtype=np.int64)
    bad = arr[(arr < 0) | (arr >= vocab)]
    if bad.size:
        raise ProbeError(f"token id(s) {', '.join(map(str, bad[:5]))} outside the vocabulary (0..{vocab - 1})")
    if arr.size == 0:
        raise ProbeError(f"{param('tokens', spec)} selects no tokens")
    return arr, labels
