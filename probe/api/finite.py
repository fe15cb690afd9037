"""The non-finite policy of every probe: each checks what it read (``np.isfinite`` on the arrays in
hand; nothing is read twice) through one :class:`Finite` per call and file, and by default a NaN or
inf is an error naming the file, the tensor, the step and the counts; with ``allow_nonfinite`` the
probe computes on the finite part, by its own rule (each probe's declaration says which), and one
warning per tensor says what was left out."""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..analyses.stats import finite_rows, nonfinite
from ..errors import ProbeError, ProbeWarning, param
from .checks import at_step


# What each probe leaves out (with allow_nonfinite):
#   token vectors (similarity, pca, theory, condense, align's embedding, rank's embedding): the rows
#     holding a non-finite value;
#   weight matrices in an SVD or eigen-decomposition (spectrum, rank, condense's singular values): the
#     matrix; align's own W_V and W_O: none, their non-finite entries are taken as 0;
#   condense's neuron weights: the neurons holding one;
#   attention maps and residual norms (attention, sinks): the probe sequences holding one;
#   norm statistics (norms): the sites holding one; per-split losses (bias): the steps holding one;
#   the per-step loss log (dynamics): the log is cut before its first non-finite loss;
#   per-token losses and entropies (tokens): the tokens holding one;
#   ood: the weights are used as they are, and the sequences whose logits are not finite are left out
#     of each split's loss and accuracy. Non-finite logits (possible from finite weights: a forward pass
#     that overflows) are an error without ``allow_nonfinite``.

_ALLOW = param("allow_nonfinite", True)


class Finite:
    """The non-finite check of one probe call on one file (see the module). ``check(name, X, step, action)``
    returns None when X is finite, else (with ``allow``) the boolean mask of its finite values and
    remembers the finding; :meth:`warn` then says, once per tensor and action, what was left out."""

    def __init__(self, path, allow: bool):
        self.path, self.allow = os.fspath(path), bool(allow)
        self._found: dict[tuple[str, str], list[tuple]] = {}

    def facts(self, name: str, found: list[tuple]) -> str:
        nan, inf = sum(f[1] for f in found), sum(f[2] for f in found)
        steps = list(dict.fromkeys(f[0] for f in found if f[0] is not None))
        counts = f"{nan + inf} non-finite value{'' if nan + inf == 1 else 's'} (NaN {nan}, inf {inf})"
        if len(steps) <= 1:
            at = f" at step {steps[0]}" if steps else ""
            detail = found[0][3] if len(found) == 1 and len(found[0]) > 3 else ""
            return f"{self.path}: {name}{at} has {counts}{detail}"
        shown = ", ".join(map(str, steps[:6])) + (", ..." if len(steps) > 6 else "")
        return f"{self.path}: {name} has {counts} at {len(steps)} steps ({shown})"

    def found(self) -> str:
        """What was left out so far, one fact per tensor and action (``; ``-joined); empty when nothing."""
        return "; ".join(self.facts(n, f) for (n, _), f in self._found.items())

    def __call__(self, name: str, X, step=None, action: str = "") -> np.ndarray | None:
        ok, nan, inf = nonfinite(X)
        if ok is not None:
            self.report(name, step, nan, inf, action)
        return ok

    def report(self, name: str, step, nan: int, inf: int, action: str, detail: str = "") -> None:
        """A finding (``detail``: words after the counts): the error, or (allowed) remembered for :meth:`warn`."""
        if not self.allow:
            raise ProbeError(f"{self.facts(name, [(step, nan, inf, detail)])}; pass {_ALLOW} to compute on the "
                             "finite part")
        self._found.setdefault((name, action), []).append((step, nan, inf, detail))

    def rows(self, name: str, X: np.ndarray, step, ids=None) -> np.ndarray | None:
        """None when X (k, ...) is finite; else the (k,) mask of its finite rows (the tokens ``ids``, else
        rows 0..k-1, holding a non-finite value are named as left out)."""
        ok, nan, inf = nonfinite(X)
        if ok is None:
            return None
        keep = finite_rows(ok)
        gone = np.flatnonzero(~keep) if ids is None else np.asarray(ids)[~keep]
        shown = ", ".join(str(int(i)) for i in gone[:8]) + (", ..." if gone.size > 8 else "")
        self.report(name, step, nan, inf, f"token(s) {shown} left out")   # one pass over X, not two
        return keep

    def warn(self) -> None:
        for (name, action), found in self._found.items():
            warnings.warn(f"{self.facts(name, found)}; {action}", ProbeWarning, stacklevel=4)   # (as with_warnings's)
        self._found.clear()


def finite_tokens(check: Finite, name: str, X: np.ndarray, step, ids, labels, need: int, what: str):
    """(X, ids, labels) without the rows of X (k, d) that hold a non-finite value (an error unless
    allowed); at least ``need`` rows must remain."""
    keep = check.rows(name, X, step, ids)
    if keep is None:
        return X, ids, labels
    if keep.sum() < need:
        raise ProbeError(f"{check.facts(name, [(step, *nonfinite(X)[1:])])}: {what} needs at least {need} tokens "
                         f"with finite values; {int(keep.sum())} left")
    return X[keep], np.asarray(ids)[keep], [l for l, k in zip(labels, keep) if k]


def finite_sequences(check: Finite, name: str, A: np.ndarray, step, axis: int = 2, also=None) -> np.ndarray | None:
    """None when the maps A (layers, heads, B, T, T) (and ``also``, (blocks, B, T) residual norms, if
    given) are finite; else (allowed) the (B,) mask of the probe sequences finite in both."""
    keep = None
    for n, X, ax in [(name, A, axis)] + ([] if also is None else [(*also, 1)]):
        ok = check(n, X, step, "the probe sequences holding them left out")
        if ok is not None:
            k = np.moveaxis(ok, ax, 0).reshape(ok.shape[ax], -1).all(axis=1)
            keep = k if keep is None else keep & k
    if keep is not None and not keep.any():
        raise ProbeError(f"{check.path}: {at_step(step)}no probe sequence has finite attention maps"
                         f"{' and residual norms' if also is not None else ''}")
    return keep
