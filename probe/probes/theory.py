"""The ``theory`` probe: theory: P^s reconstruction of the embedding."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.theory import TheoryResult
from ..analyses.theory import theory as _theory
from ..api.checks import check_enough, with_warnings
from ..api.finite import Finite
from ..api.selection import group_of, select_tokens
from ..chart.panel import fitted_range, id_labels, Panel
from ..errors import param, ProbeError
from ..format import P
from ..format.tensors import read_at, read_whole
from ..params import check_number
from ..readers.source import open_snapshot
from ..registry import SNAPSHOT, Probe
from ..render import summary_table, table


@budgeted
def theory(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
           anchor: int | None = None, step: str | int = "latest", dim: int | None = None, seed: int = 0,
           groups: str | None = None, allow_nonfinite: bool = False,
           max_memory: int | str | None = MAX_MEMORY) -> list[TheoryResult]:
    """Measured embedding cosines against paper 1's P^s prediction and eq. 14 reconstruction, per step.

    Proposition 1 predicts the cosine matrix of the token embeddings as cos(P^si - 1/d, P^sj - 1/d),
    from the task's label distribution P^s; theorem 1 (eq. 14) reconstructs the embeddings in closed form
    (with noise of std d_m^-γ). The result compares the measured matrix with the prediction, and the
    cosine profile of one anchor token with the reconstruction's.

    Parameters
    ----------
    {path}
    {tokens}
    {words}
    {words_file}
    {anchor}
    {step}
    {dim}
    {seed}
    {groups}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[TheoryResult]
        One result per selected step: ``ids`` (k,), ``measured`` (k, k), ``predicted`` (k, k),
        ``pearson_r``, ``max_abs_diff``, ``profile_measured`` (k,), ``profile_reconstructed`` (k,) and
        ``profile_r``, where k is the number of chosen tokens.

    Raises
    ------
    ProbeError
        A checkpoint or a file without P^s; an unknown group, id, word or step; fewer than 2 tokens; an
        ``anchor`` that is not among the tokens; NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.theory("run.h5", step="all")
    >>> [(r.step, r.pearson_r) for r in res]
    >>> res[-1].measured.shape                    # (k, k)
    """
    if dim is not None:
        check_number("dim", dim)
    check_number("seed", seed)
    with open_snapshot(path, "theory", groups) as run:
        ids, labels = select_tokens(run, tokens, words=words, words_file=words_file, probe="theory")
        check_enough(ids, 2, "the P^s theory")
        if not run.has("label_dist"):
            raise ProbeError(f"{run.path}: holds no label distribution P^s ('{P['label_dist']}')")
        Pmat = read_whole(run.dataset("label_dist"))
        kinds = ["reasoning" if g == "reasoning" else "key" if g == "keys" else g
                 for g in group_of(run.groups, ids, labels)]
        chosen = anchor
        if anchor is None:
            anchor = int(ids[len(ids) // 2])
        if anchor not in ids:
            raise ProbeError(f"{param('anchor', anchor)} is not among the chosen tokens")
        indices = run.step_indices(step)
        vectors = read_at(run.tensor("token_embedding"), indices, ids)
        d_m = int(run.dims["d_model"])
        gamma = float(run.config.get("gamma", 0.5))
        steps = run.steps
        check = Finite(run.path, allow_nonfinite)
    # P^s is the task's, not a snapshot's: its rows are checked once
    ids = np.asarray(ids)
    p_keep = check.rows("label_dist (P^s)", Pmat[ids], None, ids)
    out = []
    for v, i in zip(vectors, indices):
        s = int(steps[i])
        keep = check.rows("token_embedding", v, s, ids)
        mask = np.ones(len(ids), bool) if p_keep is None else p_keep.copy()
        if keep is not None:
            mask &= keep
        sel, kd, a = ids[mask], [k for k, m in zip(kinds, mask) if m], anchor
        if len(sel) < 2:
            raise ProbeError(f"{run.path}: at step {s} only {len(sel)} of the chosen tokens have finite values; the "
                             "P^s theory needs at least 2")
        if a not in sel:
            if chosen is not None:
                raise ProbeError(f"{param('anchor', a)} is left out at step {s}: its values are not finite")
            a = int(sel[len(sel) // 2])
        out.append(_theory(v[mask], Pmat, sel, kd, a, d_m, gamma, dim, seed, step=s))
    check.warn()
    return with_warnings(out)


#: what the summary's columns compare, said above them (the docs' words: how-to/probes.md, notation.md)
SUMMARY_HEADER = "summary: measured cosines vs P^s theory (pearson_r, max_abs_diff), profile vs eq14 (profile_r)"


def _say(text: str, width) -> None:
    """A block's header line, wrapped at ``width`` (the tables' width; None: not wrapped)."""
    import textwrap

    print("\n".join(textwrap.wrap(text, width or len(text), break_on_hyphens=False)))


def detail(r, width) -> None:
    """The profile of the anchor under a line naming its columns in words, then (above the summary row
    that follows) what the summary compares."""
    _say(f"profile: cosine of anchor {r.anchor}'s embedding with each token's: measured, eq14 (paper 1's "
         "closed-form reconstruction, eq. 14, Theorem 1) and P^s theory (Proposition 1)", width)
    row0 = list(r.ids).index(r.anchor)
    table(["token", "measured", "eq14", "P^s theory"],
          [[int(t), float(a), float(b), float(c)] for t, a, b, c in
           zip(r.ids, r.profile_measured, r.profile_reconstructed, r.predicted[row0])], width=width)
    print()
    _say(SUMMARY_HEADER, width)


def tables(results, width) -> None:
    """Several steps: the summary row of each, under what it compares."""
    _say(SUMMARY_HEADER, width)
    summary_table(results, wide=width is None)


def chart(r) -> list[Panel]:
    heat = []
    for m, t in ((r.measured, "measured cos(w_i, w_j)"), (r.predicted, "theory cos(P^s_i, P^s_j)")):
        lo, hi, cmap = fitted_range(m)   # each its own: the theory's values sit in a narrow band
        heat.append(Panel(t, "token", "token", kind="heat", matrix=np.asarray(m), rows=id_labels(r.ids), cols=id_labels(r.ids),
                          vmin=lo, vmax=hi, cmap=cmap, clabel=f"cosine (colours fitted: {lo:g} to {hi:g})"))
    ids = [float(i) for i in r.ids]
    prof = Panel(f"profile of token {r.anchor}: r {r.profile_r:.2f}", "token s_j", f"cos(w({r.anchor}), w(s_j))",
                 series={"measured": (ids, list(map(float, r.profile_measured))),
                         "eq. 14": (ids, list(map(float, r.profile_reconstructed)))}, xscale="int")
    return heat + [prof]


PROBE = Probe("theory", SNAPSHOT, "Theory: P^s reconstruction of the embedding", function=theory,
              options={"words": "comma-separated words instead of --tokens, looked up in a text run's vocabulary "
                                "(multi-token words are left out with a warning)"},
              tokens="reasoning", result="theory.TheoryResult", metrics=("pearson_r", "max_abs_diff", "profile_r"),
              example="probe theory run.h5 --tokens reasoning --anchor 15",
              examples=("probe theory run.h5 --step all --plot theory.png",),
              nonfinite="the tokens whose embedding row or row of P^s holds one are left out (the default anchor moves to"
                        " the middle of those left)",
              help="Paper 1's theory (default tokens: reasoning): cos of P^s - 1/d_vob against the measured "
                   "embedding cosines, and the eq. 14 reconstruction's cos(w(s0), w(s_j)) profile against the "
                   "measured one.",
              detail=detail, tables=tables, chart=chart, cheap=True)
