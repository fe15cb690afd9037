"""The ``pca`` probe: PCA of token embeddings."""
from __future__ import annotations

import os

import numpy as np

from ..limits import DECOMPOSITION, MAX_MEMORY, budgeted
from ..analyses.pca import PCAResult
from ..analyses.pca import pca as _pca
from ..api.checks import unconverged, with_warnings
from ..api.selection import TokenRows
from ..chart.panel import id_labels, Panel
from ..params import check_number
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from ..render import table, token_labels


@budgeted
def pca(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
        tensor: str = "token_embedding", step: str | int = "latest", n_components: int = 3,
        groups: str | None = None, mapping: str | None = None, skip_damaged: bool = False,
        allow_nonfinite: bool = False,
        max_memory: int | str | None = MAX_MEMORY) -> list[PCAResult]:
    """PCA of token vectors, and how well each numeric group lines up along it, per selected step.

    The chosen rows of ``tensor`` are centred on their mean (no scaling) and projected on their first
    ``n_components`` principal components. Each group of 3 or more tokens also gets an order score:
    |Spearman(id, coordinate)| along the group's own first component (``order_pc1``: 1 is a number
    line) and along the arc it traces in its own PC1-PC2 plane (``order_arc``). Tokens chosen by
    ``words`` are one group, ``"words"``, whose order is the order the words were given in
    (``words="one,two,three,four"`` asks whether they form a number line).

    Parameters
    ----------
    {path}
    {tokens}
    {words}
    {words_file}
    {tensor}
    {step}
    {n_components}
    {groups}
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[PCAResult]
        One result per selected step: ``ids`` (k,), ``groups`` (k,), ``explained`` (c,), ``coords``
        (k, c), ``order_pc1`` and ``order_arc`` ({group: score}), where k is the number of selected tokens
        and c = min(``n_components``, k, d).

    Raises
    ------
    ProbeError
        An unknown group, id, word, tensor or step; fewer than 2 tokens; a bad ``n_components``; a row
        holding NaN or inf (without ``allow_nonfinite``); an SVD that does not converge.

    Examples
    --------
    >>> import probe
    >>> res = probe.pca("run.h5", tokens="reasoning,memory", n_components=2)
    >>> res[0].explained                          # (2,)
    >>> res[0].order_pc1["reasoning"]
    """
    check_number("n_components", n_components)
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        rows = TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "pca", 2, "PCA",
                          DECOMPOSITION)
    by_words = words is not None or words_file is not None
    groups_of = ["words"] * len(rows.ids) if by_words else rows.group_of()
    # the words' order: their ids come in the order the words were given
    given = {int(i): n for n, i in enumerate(rows.ids)} if by_words else None
    out = []
    for k, s in enumerate(rows.steps):
        v, sel, grp = rows.finite(k, groups_of)
        try:
            out.append(_pca(v, sel, grp, n_components, step=s,
                            order_by=None if given is None else np.array([given[int(i)] for i in sel])))
        except np.linalg.LinAlgError as exc:
            raise unconverged(path, f"the SVD (PCA) of {rows.name}", rows.at[k], exc) from None
        out[-1].texts = rows.texts_of(sel)
    rows.check.warn()
    return with_warnings(out)


def detail(r, width) -> None:
    table(["token", "group"] + [f"PC{i + 1}" for i in range(r.coords.shape[1])],
          [[lab, g] + list(map(float, c)) for lab, g, c in zip(token_labels(r), r.groups, r.coords)],
          width=width, keep=2)
    print()


def chart(r) -> list[Panel]:
    coords = np.asarray(r.coords)
    texts = r.texts.get() if r.texts is not None else None   # the page escapes them (one escaping path)
    labels = texts if texts is not None else id_labels(r.ids)
    series, names = {}, {}
    for g in dict.fromkeys(r.groups):
        m = np.array([x == g for x in r.groups])
        y = coords[m, 1] if coords.shape[1] > 1 else np.zeros(m.sum())
        series[g or "ids"] = (list(map(float, coords[m, 0])), list(map(float, y)))
        names[g or "ids"] = [str(t) for t in np.asarray(labels, dtype=object)[m]]
    ex = list(r.explained) + [0.0, 0.0]
    return [Panel(f"step {r.step}", f"PC1 ({100 * ex[0]:.0f} %)", f"PC2 ({100 * ex[1]:.0f} %)", kind="scatter",
                  series=series, names=names)]


PROBE = Probe("pca", WEIGHTS, "PCA of token embeddings", function=pca, tokens="keys,reasoning,memory",
              result="pca.PCAResult", metrics=("explained_pc{N}", "order_pc1", "order_arc"),
              example="probe pca run.h5 --tokens keys,reasoning,memory --plot pca.png",
              examples=("probe pca run.h5 --n-components 5 --step all",),
              nonfinite="the token rows holding one are left out",
              help="PCA of token vectors (default tokens: keys,reasoning,memory): explained variance, coordinates, "
                   "and how ordered each group lies (the number line).",
              detail=detail, chart=chart, cheap=True)
