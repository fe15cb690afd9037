"""The ``cohesion`` probe: cohesion of token groups."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.cohesion import CohesionResult
from ..analyses.cohesion import cohesion as _cohesion
from ..api.checks import with_warnings
from ..api.selection import TokenRows
from ..chart.panel import Panel
from ..errors import ProbeError, param
from ..readers.source import open_source
from ..registry import EVERY_GROUP, WEIGHTS, Probe


@budgeted
def cohesion(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
             tensor: str = "token_embedding", step: str | int = "latest", groups: str | None = None,
             mapping: str | None = None, skip_damaged: bool = False, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY) -> list[CohesionResult]:
    """Mean cosine within each token group and between every pair of groups, per selected step.

    Computed from per-group sums of unit vectors: O(k d) time and memory, never the k x k matrix, so a
    whole vocabulary split into groups costs no more than reading it. ``separation`` is the mean
    within-group cosine minus the mean between-group cosine (large: tight groups, far apart).

    Parameters
    ----------
    {path}
    {tokens} Ids and words go to the stored group holding them, else to a group named ``selected``.
    {words}
    {words_file}
    {tensor}
    {step}
    {groups}
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[CohesionResult]
        One result per selected step: ``groups`` (g,), ``sizes`` (g,), ``matrix`` (g, g) (the diagonal:
        each group's cohesion) and ``separation``, where g is the number of groups.

    Raises
    ------
    ProbeError
        No token groups and no selection; an unknown group, id, word, tensor or step; a row holding NaN
        or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.cohesion("run.h5")
    >>> res[0].separation
    >>> dict(zip(res[0].groups, res[0].matrix.diagonal()))   # each group's cohesion
    """
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        if tokens is None and words is None and words_file is None:
            if not run.groups:
                raise ProbeError(f"{run.path}: has no token groups; choose tokens with {param('tokens')} or "
                                 f"name groups with {param('groups')}")
            tokens = ",".join(run.groups)
        rows = TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "cohesion", 2, "cohesion")
    labels = [g or "selected" for g in rows.group_of()]
    out = []
    for k, s in enumerate(rows.steps):
        v, sel, lab = rows.finite(k, labels)
        out.append(_cohesion(v, lab, step=s, ids=sel))
    rows.check.warn()
    return with_warnings(out)


def chart(r) -> list[Panel]:
    return [Panel(f"step {r.step}: separation {r.separation:.2f}", "group", "group", kind="heat",
                  matrix=np.asarray(r.matrix, dtype=float), rows=list(r.groups), cols=list(r.groups))]


PROBE = Probe("cohesion", WEIGHTS, "Cohesion of token groups", function=cohesion, tokens=EVERY_GROUP,
              result="cohesion.CohesionResult", metrics=("within", "between", "separation"),
              example="probe cohesion run.h5 --step all",
              examples=("probe cohesion run.h5 --tokens reasoning,memory --format json",),
              nonfinite="the token rows holding one are left out",
              help="Mean cosine of token vectors within each token group (default: every stored group) and between "
                   "every pair of groups, and their separation; O(k d), so whole vocabularies split into groups "
                   "are cheap.",
              chart=chart, cheap=True)
