"""The ``similarity`` probe: cosine similarity of token embeddings."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.similarity import BLOCKED_ABOVE, SimilarityResult, cosine_similarity, cosine_similarity_blocked
from ..api.checks import with_warnings
from ..api.selection import TokenRows
from ..chart.panel import id_labels, Panel, spread
from ..errors import param, ProbeError
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from ..render import MORE_HINT, MAX_CELL, cell, cut, note, table, token_labels


@budgeted
def similarity(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
               tensor: str = "token_embedding", step: str | int = "latest", groups: str | None = None,
               mapping: str | None = None, skip_damaged: bool = False, allow_nonfinite: bool = False,
               max_memory: int | str | None = MAX_MEMORY) -> list[SimilarityResult]:
    """Cosine-similarity structure of token vectors, per selected step.

    The chosen rows of ``tensor`` are compared pairwise: the k x k cosine matrix, the mean and spread of
    its off-diagonal entries, the mean cosine at each id distance |i - j|, and the Spearman correlation of
    cosine and distance (strongly negative: a band, similarity falling as ids grow apart). Only the
    requested rows are read. Above 4096 tokens the matrix is not formed: the summaries are accumulated
    block by block and ``distance_corr`` comes from a seeded sample of 200,000 pairs.

    Parameters
    ----------
    {path}
    {tokens}
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
    Results[SimilarityResult]
        One result per selected step: ``ids`` (k,), ``matrix`` (k, k) (``None`` above 4096 tokens),
        ``mean_offdiag``, ``std_offdiag``, ``by_distance`` and ``distance_corr``, where k is the number
        of selected tokens.

    Raises
    ------
    ProbeError
        An unknown group, id, word, tensor or step; fewer than 2 tokens; a row holding NaN or inf
        (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.similarity("run.h5", tokens="reasoning")
    >>> res[0].distance_corr
    >>> res[0].matrix.shape                      # (k, k)
    >>> probe.similarity("model/", words="cat,dog,fish,bird")[0].mean_offdiag
    >>> probe.similarity("run.h5", step="all").to_frame()
    """
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        rows = TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "similarity", 2,
                          "cosine similarity")
    out = []
    for k, s in enumerate(rows.steps):
        v, sel, lab = rows.finite(k, rows.labels)
        fn = cosine_similarity if len(sel) <= BLOCKED_ABOVE else cosine_similarity_blocked
        out.append(fn(v, sel, step=s, groups=lab))
        out[-1].texts = rows.texts_of(sel)
    rows.check.warn()
    return with_warnings(out)


def detail(r, width) -> None:
    if r.matrix is None:
        return
    k = len(r.ids)
    labels = [cut(cell(x), MAX_CELL) for x in token_labels(r)]
    cw = max([5] + [len(str(int(i))) for i in r.ids])       # a cell: -0.47
    lw = max([5] + [len(x) for x in labels])
    show = list(range(k))
    if width is not None and lw + k * (cw + 2) > width:
        # the corner of the symmetric matrix: the first and last h tokens as rows and columns, a … between
        h = max(1, (width - lw - (cw + 2)) // (cw + 2) // 2)
        show = list(range(h)) + [None] + list(range(k - h, k))
    print(f"cosine similarity, step {r.step}")
    head = ["token"] + [str(int(r.ids[i])) if i is not None else "…" for i in show]
    rows = [[labels[i]] + [f"{r.matrix[i, j]:.2f}" if j is not None else "…" for j in show] if i is not None
            else ["…"] + [""] * len(show) for i in show]
    table(head, rows, width=width)
    if len(show) < k:
        note(f"matrix {k}×{k}: its first and last {(len(show) - 1) // 2} tokens shown", MORE_HINT, width)
    print()


def chart(r) -> list[Panel]:
    if r.matrix is None:
        raise ProbeError(f"too many tokens for a heat map (more than {BLOCKED_ABOVE}); choose fewer with "
                         f"{param('tokens')}")
    return [Panel(f"step {r.step}: mean {r.mean_offdiag:.2f}, ρ(|i−j|) {r.distance_corr:.2f}", "token", "token",
                  kind="heat", matrix=np.asarray(r.matrix), rows=id_labels(r.ids), cols=id_labels(r.ids),
                  clabel="cosine similarity")]   # ±1: the papers' scale, the same at every step


def charts(results) -> list[Panel]:
    """A heat map per step, at most ``MAX_PANELS`` of them, spread over the steps (one colour bar)."""
    return spread([panel for r in results for panel in chart(r)])


PROBE = Probe("similarity", WEIGHTS, "Cosine similarity of token embeddings", function=similarity,
              tokens="reasoning", result="similarity.SimilarityResult",
              metrics=("mean_offdiag", "std_offdiag", "distance_corr", "by_distance"),
              example="probe similarity run.h5 --tokens reasoning",
              examples=("probe similarity run.h5 --tokens memory --step all --plot similarity.png",
                        "probe similarity model/ --words cat,dog,fish,bird"),
              nonfinite="the token rows holding one are left out", matrix="cosine",
              help="Cosine-similarity matrix of token vectors (default tokens: reasoning), with its mean and its "
                   "fall-off with |i - j|; above 4096 tokens only the summaries, accumulated in blocks.",
              detail=detail, chart=chart, charts=charts, cheap=True)
