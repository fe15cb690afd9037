"""The probes of the weights alone, on a snapshot file or any checkpoint: similarity, pca, align,
condense, spectrum, rank and rank_trajectory."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from ..analyses.similarity import BLOCKED_ABOVE
from ..analyses._stats import finite_rows, nonfinite
from .._limits import DECOMPOSITION, FLOAT64, MAX_MEMORY, OverBudget, budgeted, check, in_context
from ..errors import ProbeError, param
from ..format import Run, is_snapshot_file
from ..readers.source import open_source

from ._common import (
    _as_matrix, _enough, _Finite, _finite_tokens, _fits, _layer_check, _matrix_names, _natural, _neurons, _number,
    _preflight, _read, select_tokens, _step_at, _tensor_name, _TokenRows, _unconverged, _warn
)


__all__ = ["similarity", "cohesion", "pca", "align", "condense", "spectrum", "rank", "rank_trajectory"]   # the probes of this module (probe.registry)

if TYPE_CHECKING:   # the result classes, for annotations; the math is imported where it is used
    from ..analyses.align import AlignResult
    from ..analyses.cohesion import CohesionResult
    from ..analyses.condense import CondenseResult
    from ..analyses.pca import PCAResult
    from ..analyses.rank import RankResult, RankTrajectoryResult
    from ..analyses.similarity import SimilarityResult
    from ..analyses.spectrum import SpectrumResult


@budgeted
def similarity(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
               tensor: str = "token_embedding", step: str | int = "latest", groups: str | None = None,
               mapping: str | None = None, allow_nonfinite: bool = False,
               max_memory: int | str | None = MAX_MEMORY) -> list[SimilarityResult]:
    """Cosine-similarity structure of token vectors, per selected step.

    The chosen rows of ``tensor`` are compared pairwise: the k x k cosine matrix, the mean and spread of
    its off-diagonal entries, the mean cosine at each id distance |i - j|, and the Spearman correlation of
    cosine and distance (strongly negative: a band, similarity falling as ids grow apart). Only the
    requested rows are read. Above 4096 tokens the matrix is not formed: the summaries are accumulated
    block by block and ``distance_corr`` comes from a seeded sample of 200,000 pairs.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    tokens : str or sequence of int or str, optional
        The tokens: group names, ids (``"3,5,7"``), a half-open range (``"11:21"``) or a list of ids and group
        names. ``None`` (and no ``words``): the ``reasoning`` group.
    words : str or list of str, optional
        Words instead of ``tokens`` (comma-separated or a list), looked up in a text run's stored vocabulary or a
        checkpoint's tokenizer files.
    words_file : str, optional
        A text file of words, selected after ``words``.
    tensor : str, default "token_embedding"
        The tensor whose rows are the token vectors, by canonical name (``token_embedding``) or parameter name.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.
    mapping : str, optional
        A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the token rows holding one are left out. A
        ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

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
    from ..analyses.similarity import cosine_similarity, cosine_similarity_blocked

    with open_source(path, groups, mapping) as run:
        rows = _TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "similarity", 2,
                          "cosine similarity")
    out = []
    for k, s in enumerate(rows.steps):
        v, sel, lab = rows.finite(k, rows.labels)
        fn = cosine_similarity if len(sel) <= BLOCKED_ABOVE else cosine_similarity_blocked
        out.append(fn(v, sel, step=s, groups=lab))
        out[-1].texts = rows.texts_of(sel)
    rows.check.warn()
    return _warn(out)


@budgeted
def cohesion(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
             tensor: str = "token_embedding", step: str | int = "latest", groups: str | None = None,
             mapping: str | None = None, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY) -> list[CohesionResult]:
    """Mean cosine within each token group and between every pair of groups, per selected step.

    Computed from per-group sums of unit vectors: O(k d) time and memory, never the k x k matrix, so a
    whole vocabulary split into groups costs no more than reading it. ``separation`` is the mean
    within-group cosine minus the mean between-group cosine (large: tight groups, far apart).

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    tokens : str or sequence of int or str, optional
        The tokens: group names, ids (``"3,5,7"``), a half-open range (``"11:21"``) or a list of ids and group
        names. ``None`` (and no ``words``): every stored group. Ids and words go to the stored group holding them,
        else to a group named ``selected``.
    words : str or list of str, optional
        Words instead of ``tokens`` (comma-separated or a list), looked up in a text run's stored vocabulary or a
        checkpoint's tokenizer files.
    words_file : str, optional
        A text file of words, selected after ``words``.
    tensor : str, default "token_embedding"
        The tensor whose rows are the token vectors, by canonical name (``token_embedding``) or parameter name.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.
    mapping : str, optional
        A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the token rows holding one are left out. A
        ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

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
    from ..analyses.cohesion import cohesion as _cohesion

    with open_source(path, groups, mapping) as run:
        if tokens is None and words is None and words_file is None:
            if not run.groups:
                raise ProbeError(f"{run.path}: has no token groups; choose tokens with {param('tokens')} or "
                                 f"name groups with {param('groups')}")
            tokens = ",".join(run.groups)
        rows = _TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "cohesion", 2, "cohesion")
    labels = [g or "selected" for g in rows.group_of()]
    out = []
    for k, s in enumerate(rows.steps):
        v, sel, lab = rows.finite(k, labels)
        out.append(_cohesion(v, lab, step=s, ids=sel))
    rows.check.warn()
    return _warn(out)


@budgeted
def pca(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
        tensor: str = "token_embedding", step: str | int = "latest", n_components: int = 3,
        groups: str | None = None, mapping: str | None = None, allow_nonfinite: bool = False,
        max_memory: int | str | None = MAX_MEMORY) -> list[PCAResult]:
    """PCA of token vectors, and how well each numeric group lines up along it, per selected step.

    The chosen rows of ``tensor`` are centred on their mean (no scaling) and projected on their first
    ``n_components`` principal components. Each group of 3 or more tokens also gets an order score:
    |Spearman(id, coordinate)| along the group's own first component (``order_pc1``: 1 is a number
    line) and along the arc it traces in its own PC1-PC2 plane (``order_arc``).

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    tokens : str or sequence of int or str, optional
        The tokens: group names, ids (``"3,5,7"``), a half-open range (``"11:21"``) or a list of ids and group
        names. ``None`` (and no ``words``): the groups ``keys,reasoning,memory``.
    words : str or list of str, optional
        Words instead of ``tokens`` (comma-separated or a list), looked up in a text run's stored vocabulary or a
        checkpoint's tokenizer files.
    words_file : str, optional
        A text file of words, selected after ``words``.
    tensor : str, default "token_embedding"
        The tensor whose rows are the token vectors, by canonical name (``token_embedding``) or parameter name.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    n_components : int, default 3
        Principal components kept (at least 1; at most min(k, d) are returned).
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.
    mapping : str, optional
        A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the token rows holding one are left out. A
        ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

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
    from ..analyses.pca import pca as _pca

    _number("n_components", n_components, lo=1, integer=True)
    with open_source(path, groups, mapping) as run:
        rows = _TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "pca", 2, "PCA",
                          DECOMPOSITION)
    groups_of = rows.group_of()
    out = []
    for k, s in enumerate(rows.steps):
        v, sel, grp = rows.finite(k, groups_of)
        try:
            out.append(_pca(v, sel, grp, n_components, step=s))
        except np.linalg.LinAlgError as exc:
            raise _unconverged(path, f"the SVD (PCA) of {rows.name}", rows.at[k], exc) from None
        out[-1].texts = rows.texts_of(sel)
    rows.check.warn()
    return _warn(out)


@budgeted
def align(path: str | os.PathLike, layer: int | None = None, head: int | None = None, *,
          step: str | int = "latest", top_k: int = 3, groups: str | None = None, mapping: str | None = None,
          allow_nonfinite: bool = False,
          max_memory: int | str | None = MAX_MEMORY) -> list[AlignResult]:
    """Singular vectors of one head's value map W_V (and of W_V W_O) against every token embedding.

    The left singular vectors of W_V (d_model x d_head; under grouped-query attention the value head that
    query head ``head`` reads) live in embedding space; for the top ``top_k`` of them the result holds
    the |cos| with every token embedding and its mean over each token group. The singular values of
    W_V W_O come from a factored SVD, without forming the d_model x d_model product.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    layer : int, optional
        The layer (default: 0).
    head : int, optional
        The query head (default: 0).
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    top_k : int, default 3
        Singular vectors compared with the embeddings (at least 1).
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words) for the group means, added to the
        stored ones.
    mapping : str, optional
        A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the non-finite entries of W_V and W_O are
        taken as 0, and the embedding rows holding one are left out of the group means (their cosines are 0). A
        ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[AlignResult]
        One result per selected step: ``singular_values`` (r,), ``ov_singular_values`` (r,),
        ``sv1_share``, ``cos`` (k, V) and ``group_mean`` ({group: k values}), where r = min(d_model,
        d_head), k = min(``top_k``, r) and V is the vocabulary size.

    Raises
    ------
    ProbeError
        A model without attention; ``layer`` or ``head`` out of range; group ids outside the vocabulary;
        output and value heads that do not group evenly; NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.align("run.h5", layer=0, head=0, step="all")
    >>> [r.sv1_share for r in res]
    >>> res[-1].group_mean["reasoning"]          # mean |cos| with singular vectors 1..top_k
    """
    from ..analyses.align import align as _align

    layer = 0 if layer is None else _number("layer", layer, integer=True)
    head = 0 if head is None else _number("head", head, integer=True)
    _number("top_k", top_k, lo=1, integer=True)
    with open_source(path, groups, mapping) as run:
        _layer_check(run, layer, head)
        indices = run.step_indices(step)
        wv = _read(run.tensor(f"layer{layer}/W_V"), indices, work=DECOMPOSITION)
        wo = _read(run.tensor(f"layer{layer}/W_O"), indices, work=DECOMPOSITION)
        emb = _read(run.tensor("token_embedding"), indices, work=FLOAT64)   # its unit rows, in float64
        groups = run.groups
        vocab = emb[0].shape[0]
        for g, ids in groups.items():
            if ids.size and (ids.min() < 0 or ids.max() >= vocab):
                raise ProbeError(f"token group '{g}' has ids outside the vocabulary (0..{vocab - 1})")
        steps = run.steps
        check, at = _Finite(run.path, allow_nonfinite), [_step_at(run, i) for i in indices]
        names = [_tensor_name(run, n) for n in (f"layer{layer}/W_V", f"layer{layer}/W_O", "token_embedding")]
    # grouped-query attention: query head h reads value head h // (heads / kv_heads)
    q_heads, v_heads = wo[0].shape[0], wv[0].shape[0]
    if q_heads % v_heads:
        raise ProbeError(f"{path}: layer {layer} has {q_heads} output heads and {v_heads} value heads, "
                         "which do not group evenly")
    kv = head // (q_heads // v_heads)
    out = []
    for v, o, e, i, s in zip(wv, wo, emb, indices, at):
        v, o, g = v[kv], o[head], groups
        ok = check(f"{names[0]} head {kv}", v, s, "its non-finite entries taken as 0")
        v = v if ok is None else np.where(ok, v, 0)
        ok = check(f"{names[1]} head {head}", o, s, "its non-finite entries taken as 0")
        o = o if ok is None else np.where(ok, o, 0)
        keep = check.rows(names[2], e, s)
        if keep is not None:   # a left-out token: a zero row (|cos| 0), outside every group mean
            e = np.where(keep[:, None], e, 0)
            g = {k: ids[keep[ids]] for k, ids in groups.items()}
        try:
            out.append(_align(v, o, e, g, top_k, layer, head, step=int(steps[i]), value_head=kv))
        except np.linalg.LinAlgError as exc:
            raise _unconverged(path, f"the SVD of {names[0]} head {kv} (and W_V W_O)", s, exc) from None
    check.warn()
    return _warn(out)


@budgeted
def condense(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
             tensor: str = "token_embedding", neurons: str | None = "layer0/W_Q", threshold: float = 0.7,
             step: str | int = "latest", top_shares: tuple[int, ...] = (1, 2, 5), groups: str | None = None,
             mapping: str | None = None, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY) -> list[CondenseResult]:
    """Covariance spectrum of token vectors, neuron groups and the singular values of every weight matrix, per step.

    The covariance eigenvalues of the chosen rows of ``tensor`` (centred, no scaling) give the share of
    the variance in the top 1, 2, 5 directions, the effective rank (exp entropy of the normalised
    eigenvalues) and the stable rank (sum / max). The neurons of ``neurons`` (each one's input weights)
    are grouped by cosine > ``threshold`` (connected components).

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    tokens : str or sequence of int or str, optional
        The tokens: group names, ids (``"3,5,7"``), a half-open range (``"11:21"``) or a list of ids and group
        names. ``None`` (and no ``words``): every row of ``tensor``.
    words : str or list of str, optional
        Words instead of ``tokens`` (comma-separated or a list), looked up in a text run's stored vocabulary or a
        checkpoint's tokenizer files.
    words_file : str, optional
        A text file of words, selected after ``words``.
    tensor : str, default "token_embedding"
        The tensor whose rows are the token vectors, by canonical name (``token_embedding``) or parameter name.
    neurons : str or None, default "layer0/W_Q"
        The weight whose neurons are grouped; ``""`` or ``None``: none (the default is skipped on a model
        without attention).
    threshold : float, default 0.7
        Cosine above which two neurons are linked (between -1 and 1).
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    top_shares : tuple of int, default (1, 2, 5)
        The k of each top-k variance share (positive integers; not offered by the command line).
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.
    mapping : str, optional
        A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the rows and neurons holding one are left
        out, and a weight matrix holding one is left out of the singular values. A ``ProbeWarning`` says what was
        left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

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
    from ..analyses.condense import condense as _condense

    _number("threshold", threshold, lo=-1.0, hi=1.0)
    if not top_shares or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1
                             for k in top_shares):
        raise ProbeError(f"{param('top_shares', top_shares)}: need positive integers")
    with open_source(path, groups, mapping) as run:
        ids = select_tokens(run, tokens, words=words, words_file=words_file, tensor=tensor, probe="condense")[0]
        _enough(ids if ids is not None else range(run.tensor(tensor).shape[1]), 2, "a covariance spectrum")
        indices = run.step_indices(step)
        vectors = _read(run.tensor(tensor), indices, ids, work=FLOAT64)
        if neurons == "layer0/W_Q" and int(run.dims.get("layers", 0)) == 0:
            neurons = None  # the default, on a model without attention (the Emb-MLP)
        neuron_w = _neuron_weights(run, neurons, indices) if neurons else [None] * len(indices)
        layer_w, notes = _layer_matrices(run, indices)
        steps = run.steps
        check, at = _Finite(run.path, allow_nonfinite), [_step_at(run, i) for i in indices]
        label = {n: _tensor_name(run, n) for n in [tensor, neurons, *layer_w] if n}
    out = []
    for k, i in enumerate(indices):
        v = vectors[k].reshape(vectors[k].shape[0], -1)
        row_ids = ids if ids is not None else np.arange(len(v))
        v = _finite_tokens(check, label[tensor], v, at[k], row_ids, [""] * len(v), 2, "a covariance spectrum")[0]
        nw = None if neuron_w[k] is None else _neurons(neuron_w[k])
        if nw is not None:
            ok = check(label[neurons], neuron_w[k], at[k], "the neurons holding them left out")
            if ok is not None:
                nw = nw[finite_rows(_neurons(ok))]
        layers = {}
        for n, w in layer_w.items():
            if check(label[n], w[k], at[k], "left out of the singular values") is None:
                layers[n] = w[k]
        try:
            out.append(_condense(v, top_shares, nw, neurons or None, threshold, layers, step=int(steps[i])))
            out[-1].warnings += notes
        except np.linalg.LinAlgError as exc:
            raise _unconverged(path, f"condense: the decomposition of {getattr(exc, 'matrix', tensor)}", at[k],
                               exc) from None
    check.warn()
    return _warn(out)


def _neuron_weights(run, name: str, indices: list[int]) -> list[np.ndarray]:
    """condense's neuron weights at each step, once the memory budget allows their n x n cosine matrix
    (float64, and the boolean masks made of it: 10 bytes a pair)."""
    ds = run.tensor(name)
    n = ds.shape[1] * ds.shape[3] if ds.ndim == 4 else ds.shape[-1]    # per step (H, in, e): H*e; (in, out): out
    check(getattr(ds, "path", None) or run.path, f"cosines of the neurons of {name}", (n, n), "float64", 8,
          need=10 * n * n)
    return _read(ds, indices, work=FLOAT64)


def _layer_matrices(run, indices: list[int]) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """condense's weight matrices at each step (a snapshot's by their canonical names, layer0/W_K, as every
    other probe names them) and the notes that say which were left out: a matrix over the memory budget
    (the token selection is what condense is asked about; a vocabulary's singular values are extra), and
    per-head tensors whose head count no config gives."""
    names = _matrix_names(run) if isinstance(run, Run) else run.weight_matrices()
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
            out[n] = _read(run.tensor(n), indices, work=DECOMPOSITION)
        except OverBudget as exc:
            notes.append(f"{exc.fact}: its singular values left out")
    return out, notes


@budgeted
def spectrum(path: str | os.PathLike, *, step: str | int = "latest", precision: str = "float64", threads: int = 0,
             progress=None, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY) -> list[SpectrumResult]:
    """Spectral metrics of every linear layer, as WeightWatcher reports them, per selected step.

    For each weight matrix W: spectral norm, Frobenius norm, log norm, stable rank, entropy rank and the
    power-law exponent ``alpha`` of the tail of its eigenvalue density (the eigenvalues of W^T W).
    Snapshot files: every weight matrix (per-head tensors as the full map) by its canonical name
    (``layer0/W_K``; a parameter name where it has none). Other checkpoints, whatever their layout: every
    2-D tensor by its own name, in natural order (layer 2 before 10), a tensor tied to another (the same
    memory under two names) once.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    precision : {"float64", "float32"}, default "float64"
        Precision of the Gram matrix: float64 gives WeightWatcher's values to machine precision, float32
        is about twice as fast (eigenvalues to ~1e-6 relative).
    threads : int, default 0
        Layers analysed at once, each with one BLAS thread (0: one per CPU core); at most that many
        matrices are in memory.
    progress : callable, optional
        Called with each matrix's name when it is done.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: a matrix holding one is left out (no row). A
        ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[SpectrumResult]
        One result per selected step; its ``layers`` is a list of
        [`LayerSpectrum`][probe.analyses.spectrum.LayerSpectrum], one per matrix.

    Raises
    ------
    ProbeError
        A bad ``precision`` or ``threads``; a step a checkpoint does not hold; NaN or inf (without
        ``allow_nonfinite``); an eigen-decomposition that does not converge.

    Examples
    --------
    >>> import probe
    >>> res = probe.spectrum("model.safetensors")
    >>> [(layer.name, layer.alpha) for layer in res[0].layers]
    >>> res[0].summary()["mean_alpha"]
    """
    from ..analyses.spectrum import SpectrumResult

    from ..analyses.spectrum import PRECISIONS

    if precision not in PRECISIONS:
        raise ProbeError(f"{param('precision', precision)}: use {' or '.join(PRECISIONS)}")
    _number("threads", threads, lo=0, integer=True)
    out = []
    if is_snapshot_file(path):
        with Run(path) as run:
            indices = run.step_indices(step)
            names = _matrix_names(run)   # canonical names (layer0/W_K), as every other probe says
            for n in names:              # every matrix against the budget before the first is read
                _fits(run.tensor(n), 1, work=DECOMPOSITION)
            check = _Finite(run.path, allow_nonfinite)
            for i in indices:
                layers = _layer_spectra(names, lambda n: _as_matrix(n, run.read(n, i)), precision, threads, progress,
                                        check, int(run.steps[i]))
                out.append(SpectrumResult(step=int(run.steps[i]), layers=layers))
        check.warn()
        return _warn(out)
    # any checkpoint, known layout or not: every 2-D tensor, in natural order
    from ..readers.checkpoints import open_checkpoint

    src = open_checkpoint(path)
    if str(step) not in ("latest", "all", str(src.step)):
        raise ProbeError(f"{path}: a checkpoint holds one step; use {param('step', 'latest')}")
    tied = src.aliases()   # a tied lm_head is the embedding: one matrix, counted once
    names = sorted((n for n, s in src.shapes().items() if len(s) == 2 and min(s) > 1 and n not in tied),
                   key=_natural)
    _preflight(path, src, names, DECOMPOSITION)
    check = _Finite(path, allow_nonfinite)
    layers = _layer_spectra(names, src.read, precision, threads, progress, check, src.step)
    check.warn()
    return _warn([SpectrumResult(step=src.step if src.step is not None else 0, layers=layers)])


def _layer_spectra(names: list[str], read, precision: str, threads: int, progress, check: _Finite, step) -> list:
    """Each matrix read and analysed by ``threads`` workers (numpy and LAPACK release the GIL), each
    with one BLAS thread: on 2 cores the small Gram matrices and eigen-decompositions of a
    transformer scale with the workers, where two BLAS threads on one matrix do not. A matrix holding
    NaN or inf is reported through ``check`` (from this thread) and, allowed, left out."""
    from ..analyses.spectrum import layer_spectrum

    workers = min(threads or os.cpu_count() or 1, max(1, len(names)))

    def one(n):
        W = read(n)
        _, nan, inf = nonfinite(W)
        if nan or inf:
            return None, (nan, inf)
        try:
            # an overflow (huge finite values, a float32 Gram matrix) ends in a LinAlgError or a non-finite
            # norm below, said as one line; numpy's own warning would be a second one
            with np.errstate(over="ignore", invalid="ignore"):
                layer = layer_spectrum(n, W, precision)
            if not np.isfinite(layer.norm):
                raise np.linalg.LinAlgError("its Gram matrix overflows")
            return layer, None
        except np.linalg.LinAlgError as exc:
            big = float(np.max(np.abs(W))) if W.size else 0.0
            return None, np.linalg.LinAlgError(f"{exc}; largest |value| {big:.3g}, Gram matrix in {precision}")

    if workers == 1:
        results = map(one, names)
    else:
        from concurrent.futures import ThreadPoolExecutor

        from threadpoolctl import threadpool_limits

        limits, pool = threadpool_limits(1), ThreadPoolExecutor(workers)
        results = pool.map(in_context(one), names)     # each read checks this call's memory budget
    out = []
    try:
        for n, (layer, bad) in zip(names, results):
            if isinstance(bad, Exception):
                raise _unconverged(check.path, f"the eigenvalues of {n}", step, bad)
            if bad is not None:
                check.report(n, step, *bad, "left out")
            else:
                out.append(layer)
            if progress:
                progress(n)
    finally:
        if workers > 1:
            pool.shutdown(cancel_futures=True)
            limits.restore_original_limits()
    return out


def _rank_names(run) -> list[str]:
    """The canonical matrices a rank probe reads: every 2-D or per-head weight but the embedding (which
    enters centred, as ``embedding``), in natural order."""
    shapes = run.weights() if isinstance(run, Run) else run.tensors()
    names = [n for n, s in shapes.items() if len(s) >= 2 and n != "token_embedding"]
    return sorted(names, key=_natural)


@budgeted
def rank(path: str | os.PathLike, *, step: str | int = "latest", groups: str | None = None,
         mapping: str | None = None, allow_nonfinite: bool = False,
         max_memory: int | str | None = MAX_MEMORY) -> list[RankResult]:
    """Effective rank, stable rank and top-k energy of the embedding and of every weight matrix, per selected step.

    For a matrix with singular values σ: the effective rank exp(entropy of σ / Σσ) (1 = one direction),
    the stable rank Σσ² / σ₁², and the top-1 and top-5 energy (Σ of the k largest σ², over Σσ²). The token embedding
    enters with its rows centred on their mean, as ``embedding``; per-head tensors as the full map.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.
    mapping : str, optional
        A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the embedding rows holding one are left out
        (the rest centred), and a weight matrix holding one is left out. A ``ProbeWarning`` says what was left
        out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

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
    from ..analyses.rank import matrix_ranks

    with open_source(path, groups, mapping) as run:
        indices = run.step_indices(step)
        names = _rank_names(run)
        emb = _read(run.tensor("token_embedding"), indices, work=DECOMPOSITION)
        mats = {n: _read(run.tensor(n), indices, work=DECOMPOSITION) for n in names}
        steps = run.steps
        check, at = _Finite(run.path, allow_nonfinite), [_step_at(run, i) for i in indices]
        label = {n: _tensor_name(run, n) for n in [*names, "token_embedding"]}
    out = []
    for k, i in enumerate(indices):
        e = _finite_tokens(check, label["token_embedding"], emb[k], at[k], np.arange(len(emb[k])),
                           [""] * len(emb[k]), 2, "the embedding's rank")[0]
        ms = {n: _as_matrix(n, m[k]) for n, m in mats.items()
              if check(label[n], m[k], at[k], "left out") is None}
        try:
            out.append(matrix_ranks(ms, e, step=int(steps[i])))
        except np.linalg.LinAlgError as exc:
            raise _unconverged(path, f"the eigenvalues of {getattr(exc, 'matrix', 'a matrix')}", at[k], exc) from None
    check.warn()
    return _warn(out)


@budgeted
def rank_trajectory(path: str | os.PathLike, *, step: str | int = "all", metric: str = "effective_rank",
                    groups: str | None = None, mapping: str | None = None, allow_nonfinite: bool = False,
                    max_memory: int | str | None = MAX_MEMORY
                    ) -> list[RankTrajectoryResult]:
    """Where each matrix's rank bottoms out over the selected steps ("condense, then expand" as numbers).

    Runs [`rank`][probe.api.weights.rank] at every selected step and, per matrix, finds the minimum of
    ``metric``: its value and step, the dip below the first step (minimum / initial) and the rebound to the last
    (final / minimum). A matrix left out at some step (non-finite values) is left out of the trajectory.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    step : str or int, default "all"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    metric : {"effective_rank", "stable_rank", "top1_energy", "top5_energy"}, default "effective_rank"
        The number of [`rank`][probe.api.weights.rank] followed over the steps.
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.
    mapping : str, optional
        A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: as for [`rank`][probe.api.weights.rank]. A
        ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[RankTrajectoryResult]
        One result for the whole trajectory (its ``step`` is ``None``).

    Raises
    ------
    ProbeError
        An unknown ``metric`` or step, or anything [`rank`][probe.api.weights.rank] raises.

    Examples
    --------
    >>> import probe
    >>> traj = probe.rank_trajectory("run.h5")[0]
    >>> traj.min_step["embedding"], traj.dip("embedding"), traj.condense_then_expand("embedding")
    """
    from ..analyses.rank import rank_trajectory as _rank_trajectory

    results = rank(path, step=step, groups=groups, mapping=mapping, allow_nonfinite=allow_nonfinite)
    known = list(next(iter(results[0].numbers.values())))
    if metric not in known:
        raise ProbeError(f"{param('metric', metric)}: rank reports {', '.join(known)}")
    return _warn([_rank_trajectory(results, metric)])
