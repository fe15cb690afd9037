"""The ``condense`` probe: covariance eigenvalues."""
from __future__ import annotations

import os

import numpy as np

from ..limits import DECOMPOSITION, FLOAT64, MAX_MEMORY, OverBudget, budgeted, check
from ..analyses.stats import finite_rows
from ..analyses.condense import CondenseResult
from ..analyses.condense import condense as _condense
from ..api.checks import check_enough, unconverged, with_warnings
from ..api.finite import Finite, finite_tokens
from ..api.selection import select_tokens
from ..chart.panel import indexed, Panel
from ..errors import param, ProbeError
from ..format.tensors import read_at
from ..params import check_number
from ..readers.source import open_source
from ..registry import EVERY_ROW, WEIGHTS, Probe
from ..render import wrapped


@budgeted
def condense(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
             tensor: str = "token_embedding", neurons: str | None = "layer0/W_Q", threshold: float = 0.7,
             step: str | int = "latest", top_shares: tuple[int, ...] = (1, 2, 5), groups: str | None = None,
             mapping: str | None = None, skip_damaged: bool = False, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY) -> list[CondenseResult]:
    """Covariance spectrum of token vectors, neuron groups and the singular values of every weight matrix, per step.

    The covariance eigenvalues of the chosen rows of ``tensor`` (centred, no scaling) give the share of
    the variance in the top 1, 2, 5 directions, the effective rank (exp entropy of the normalised
    eigenvalues) and the stable rank (sum / max). The neurons of ``neurons`` (each one's input weights)
    are grouped by cosine > ``threshold`` (connected components).

    Parameters
    ----------
    {path}
    {tokens}
    {words}
    {words_file}
    {tensor}
    {neurons}
    {threshold}
    {step}
    top_shares : tuple of int, default (1, 2, 5)
        The k of each top-k variance share (positive integers; not offered by the command line).
    {groups}
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[CondenseResult]
        One result per selected step: ``eigenvalues`` (r,) with r = min(k, d) for k vectors of d
        numbers, ``top_share``, ``effective_rank``, ``stable_rank``, ``neuron_group_sizes`` and
        ``layer_singular_values`` ({matrix name: singular values}).

    Raises
    ------
    ProbeError
        An unknown group, id, word, tensor or step; fewer than 2 tokens; a bad ``threshold`` or
        ``top_shares``; NaN or inf (without ``allow_nonfinite``); a decomposition that does not converge.

    Examples
    --------
    >>> import probe
    >>> res = probe.condense("run.h5", step="all")
    >>> [(r.step, r.effective_rank) for r in res]
    >>> res[-1].top_share[1]                      # variance share of the top direction
    """
    check_number("threshold", threshold)
    if not top_shares or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1
                             for k in top_shares):
        raise ProbeError(f"{param('top_shares', top_shares)}: need positive integers")
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        ids = select_tokens(run, tokens, words=words, words_file=words_file, tensor=tensor, probe="condense")[0]
        check_enough(ids if ids is not None else range(run.tensor(tensor).shape[1]), 2, "a covariance spectrum")
        indices = run.step_indices(step)
        vectors = read_at(run.tensor(tensor), indices, ids, work=FLOAT64)
        if neurons == "layer0/W_Q" and int(run.dims.get("layers", 0)) == 0:
            neurons = None  # the default, on a model without attention (the Emb-MLP)
        neuron_w = _neuron_weights(run, neurons, indices) if neurons else [None] * len(indices)
        layer_w, notes = _layer_matrices(run, indices)
        steps = run.steps
        check, at = Finite(run.path, allow_nonfinite), [run.step_of(i) for i in indices]
        label = {n: run.label(n) for n in [tensor, neurons, *layer_w] if n}
    out = []
    for k, i in enumerate(indices):
        v = vectors[k].reshape(vectors[k].shape[0], -1)
        row_ids = ids if ids is not None else np.arange(len(v))
        v = finite_tokens(check, label[tensor], v, at[k], row_ids, [""] * len(v), 2, "a covariance spectrum")[0]
        nw = None if neuron_w[k] is None else neuron_matrix(neuron_w[k])
        if nw is not None:
            ok = check(label[neurons], neuron_w[k], at[k], "the neurons holding them left out")
            if ok is not None:
                nw = nw[finite_rows(neuron_matrix(ok))]
        layers = {n: w[k] for n, w in layer_w.items()
                  if check(label[n], w[k], at[k], "left out of the singular values") is None}
        try:
            out.append(_condense(v, top_shares, nw, neurons or None, threshold, layers, step=int(steps[i])))
            out[-1].warnings += notes
        except np.linalg.LinAlgError as exc:
            raise unconverged(path, f"condense: the decomposition of {getattr(exc, 'matrix', tensor)}", at[k],
                               exc) from None
    check.warn()
    return with_warnings(out)


def neuron_matrix(W: np.ndarray) -> np.ndarray:
    """Neuron input-weight vectors of an x @ W tensor: (in, out) -> (out, in); per head (H, in, e) -> (H*e, in)."""
    if W.ndim == 3:
        return np.concatenate([w.T for w in W])
    if W.ndim == 2:
        return W.T
    raise ProbeError(f"cannot group neurons of a {W.ndim}-D tensor")


def _neuron_weights(run, name: str, indices: list[int]) -> list[np.ndarray]:
    """condense's neuron weights at each step, once the memory budget allows their n x n cosine matrix
    (float64, and the boolean masks made of it: 10 bytes a pair)."""
    ds = run.tensor(name)
    n = ds.shape[1] * ds.shape[3] if ds.ndim == 4 else ds.shape[-1]    # per step (H, in, e): H*e; (in, out): out
    check(getattr(ds, "path", None) or run.path, f"cosines of the neurons of {name}", (n, n), "float64", 8,
          need=10 * n * n)
    return read_at(ds, indices, work=FLOAT64)
def _layer_matrices(run, indices: list[int]) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """condense's weight matrices at each step (a snapshot's by their canonical names, layer0/W_K, as every
    other probe names them) and the notes that say which were left out: a matrix over the memory budget
    (the token selection is what condense is asked about; a vocabulary's singular values are extra), and
    per-head tensors whose head count no config gives."""
    names = run.matrices()
    notes = []
    if run.dims.get("heads", 1) is None:
        per_head = [n for n in names if run.tensor(n).ndim == 4]
        names = [n for n in names if n not in per_head]
        if per_head:
            shown = ", ".join(per_head[:4]) + (", ..." if len(per_head) > 4 else "")
            notes.append(f"{run.path}: no head count (config.json num_attention_heads): the per-head singular "
                         f"values of {len(per_head)} attention matrices ({shown}) left out")
    out = {}
    for n in names:
        try:
            out[n] = read_at(run.tensor(n), indices, work=DECOMPOSITION)
        except OverBudget as exc:
            notes.append(f"{exc.fact}: its singular values left out")
    return out, notes


def detail(r, width) -> None:
    wrapped("covariance eigenvalues:", [f"{v:.3g}" for v in r.eigenvalues[:10]], width)
    if r.neuron_tensor:
        sizes = r.neuron_group_sizes
        wrapped(f"neuron groups of {r.neuron_tensor} (cos > {r.threshold:g}): {len(sizes)}; sizes",
               [str(n) for n in sizes[:10]] + (["…"] if len(sizes) > 10 else []), width)
    print()


def chart(r) -> list[Panel]:
    ev = np.asarray(r.eigenvalues, dtype=float)
    return [Panel(f"step {r.step}: effective rank {r.effective_rank:.1f}", "index", "covariance eigenvalue",
                  series={"eigenvalue": indexed(ev[ev > 0])}, xscale="int", yscale="log")]


PROBE = Probe("condense", WEIGHTS, "Covariance eigenvalues", function=condense, tokens=EVERY_ROW,
              api_only=("top_shares",), result="condense.CondenseResult",
              metrics=("eig1", "eig2", "top{N}_share", "effective_rank", "stable_rank", "largest_neuron_group", "neuron_groups", "sv1"),
              example="probe condense run.h5 --tokens keys --step all",
              examples=("probe condense run.h5 --neurons layer0/W_in --threshold 0.9",),
              nonfinite="the rows and neurons holding one are left out, and so is a weight matrix holding one from the "
                        "singular values",
              help="Condensation: covariance eigenvalues of token vectors (default: every row; centred, unscaled, "
                   "/ (k-1)), effective and stable rank, neuron groups, and the singular values of every weight "
                   "matrix.",
              detail=detail, chart=chart, cheap=True)
