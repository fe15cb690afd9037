"""Token selections: ``reasoning``, ``keys,memory``, ``11:21`` (half-open), ``3,5,7``."""
from __future__ import annotations

import re
from typing import Callable, Mapping

import numpy as np

from ..errors import ProbeError, param

_RANGE = re.compile(r"^(-?\d+):(-?\d+)$")


def parse_tokens(spec, groups: Mapping[str, np.ndarray], vocab: int,
                 fits: Callable[[int], None] | None = None) -> tuple[np.ndarray, list[str]]:
    """Token ids selected by ``spec`` and the group each id came from ("" for plain ids).

    ``spec`` is a comma-separated list of group names, ids and half-open ranges ``A:B``, or a
    sequence of ids and group names. Ids keep their order of appearance; duplicates are dropped.
    ``fits(n)`` may refuse a selection of n ids before any array of them is made (the memory
    budget): a range is only two numbers until then.
    """
    if spec is not None and not isinstance(spec, str):
        spec = ",".join(str(int(x)) if isinstance(x, (int, np.integer)) else str(x) for x in spec)
    spec = (spec or "").strip()
    if not spec:
        raise ProbeError(f"empty {param('tokens')} selection")
    parts: list[tuple[range | np.ndarray, str]] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise ProbeError(f"empty item in {param('tokens', spec)}: remove the extra comma")
        if part in groups:
            parts.append((np.asarray(groups[part], dtype=np.int64), part))
        elif m := _RANGE.match(part):
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi <= lo:
                raise ProbeError(f"empty token range '{part}' (ranges are half-open: 11:21 is 11..20)")
            parts.append((range(lo, hi), ""))
        elif re.fullmatch(r"-?\d+", part):
            parts.append((np.asarray([int(part)], dtype=np.int64), ""))
        else:
            known = ", ".join(sorted(groups)) or "none in this file"
            raise ProbeError(f"unknown token group '{part}'; known groups: {known} (or ids such as 11:21 or 3,5,7)")
    bad = list(dict.fromkeys(i for ids, _ in parts for i in _outside(ids, vocab)))
    if bad:
        raise ProbeError(f"token id(s) {', '.join(map(str, bad[:5]))} outside the vocabulary (0..{vocab - 1})")
    if fits is not None:
        fits(sum(len(ids) for ids, _ in parts))
    arrays = [np.arange(ids.start, ids.stop, dtype=np.int64) if isinstance(ids, range) else ids for ids, _ in parts]
    ids = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    if ids.size == 0:
        raise ProbeError(f"{param('tokens', spec)} selects no tokens")
    part_of = np.repeat(np.arange(len(parts)), [len(a) for a in arrays])
    first = np.sort(np.unique(ids, return_index=True)[1])     # each id where it first appears, in that order
    return ids[first], [parts[j][1] for j in part_of[first].tolist()]


def _outside(ids: range | np.ndarray, vocab: int) -> list[int]:
    """The first few of ``ids`` outside 0..vocab-1, in order (of a range: from its ends, never all of it)."""
    if isinstance(ids, range):
        return [*range(ids.start, min(ids.stop, 0))[:5], *range(max(ids.start, vocab), ids.stop)[:5]]
    return ids[(ids < 0) | (ids >= vocab)][:5].tolist()
