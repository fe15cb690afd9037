"""The ``rank`` probe: effective rank of weights."""
from __future__ import annotations

import os

import numpy as np

from ..limits import DECOMPOSITION, MAX_MEMORY, budgeted
from ..analyses.rank import RankResult, matrix_ranks
from ..api.checks import unconverged, with_warnings
from ..api.finite import Finite, finite_tokens
from ..chart.panel import barh, Panel
from ..format.tensors import as_matrix, natural, read_at
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from ..render import table


@budgeted
def rank(path: str | os.PathLike, *, step: str | int = "latest", groups: str | None = None,
         mapping: str | None = None, skip_damaged: bool = False, allow_nonfinite: bool = False,
         max_memory: int | str | None = MAX_MEMORY) -> list[RankResult]:
    """Effective rank, stable rank and top-k energy of the embedding and of every weight matrix, per selected step.

    For a matrix with singular values σ: the effective rank exp(entropy of σ / Σσ) (1 = one direction),
    the stable rank Σσ² / σ₁², and the top-1 and top-5 energy (Σ of the k largest σ², over Σσ²). The token embedding
    enters with its rows centred on their mean, as ``embedding``; per-head tensors as the full map.

    Parameters
    ----------
    {path}
    {step}
    {groups}
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[RankResult]
        One result per selected step: ``names``, ``numbers`` ({matrix: {metric: value}) and
        ``singular_values`` ({matrix: σ, shape (r,)}, r the matrix's smaller side).

    Raises
    ------
    ProbeError
        An unknown step; NaN or inf (without ``allow_nonfinite``); an eigen-decomposition that does not
        converge.

    Examples
    --------
    >>> import probe
    >>> res = probe.rank("run.h5", step="all")
    >>> [r.numbers["embedding"]["effective_rank"] for r in res]
    """
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        indices = run.step_indices(step)
        names = _rank_names(run)
        emb = read_at(run.tensor("token_embedding"), indices, work=DECOMPOSITION)
        mats = {n: read_at(run.tensor(n), indices, work=DECOMPOSITION) for n in names}
        steps = run.steps
        check, at = Finite(run.path, allow_nonfinite), [run.step_of(i) for i in indices]
        label = {n: run.label(n) for n in [*names, "token_embedding"]}
    out = []
    for k, i in enumerate(indices):
        e = finite_tokens(check, label["token_embedding"], emb[k], at[k], np.arange(len(emb[k])),
                           [""] * len(emb[k]), 2, "the embedding's rank")[0]
        ms = {n: as_matrix(n, m[k]) for n, m in mats.items()
              if check(label[n], m[k], at[k], "left out") is None}
        try:
            out.append(matrix_ranks(ms, e, step=int(steps[i])))
        except np.linalg.LinAlgError as exc:
            raise unconverged(path, f"the eigenvalues of {getattr(exc, 'matrix', 'a matrix')}", at[k], exc) from None
    check.warn()
    return with_warnings(out)
def _rank_names(run) -> list[str]:
    """The canonical matrices a rank probe reads: every 2-D or per-head weight but the embedding (which
    enters centred, as ``embedding``), in natural order."""
    names = [n for n, s in run.weights().items() if len(s) >= 2 and n != "token_embedding"]
    return sorted(names, key=natural)


def detail(r, width) -> None:
    metrics = list(next(iter(r.numbers.values()), {}))
    print(f"step {r.step}")
    table(["matrix"] + metrics, [[n] + [r.numbers[n][m] for m in metrics] for n in r.names], width=width)


def chart(r) -> list[Panel]:
    return [barh(f"step {r.step}", "effective rank (exp entropy of σ)", "matrix", r.names,
                  {"effective rank": [r.numbers[n]["effective_rank"] for n in r.names]})]


PROBE = Probe("rank", WEIGHTS, "Effective rank of weights", function=rank,
              options={"groups": "JSON/YAML file: group name -> token ids or words (checked; the ranks do not "
                                 "depend on groups)"},
              style="detail", result="rank.RankResult", metrics=("effective_rank", "stable_rank", "top{N}_energy"),
              example="probe rank run.h5 --step all", examples=("probe rank model/ --format csv",),
              nonfinite="the embedding rows holding one are left out (the rest centred), and so is a weight matrix "
                        "holding one",
              help="Effective rank, stable rank and top-1/top-5 energy of the centred token embedding and of every "
                   "weight matrix; with --step all a trajectory, with --minima the step where each one bottoms "
                   "out.",
              detail=detail, chart=chart, cheap=True)
