"""The probes of the weights alone, on a snapshot file or any checkpoint: similarity, pca, align,
condense, spectrum, rank and rank_trajectory."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from ..analyses.similarity import BLOCKED_ABOVE
from ..analyses._stats import finite_rows, nonfinite
from ..errors import ProbeError, param
from ..format import Run, is_snapshot_file
from ..readers.source import open_source

from ._common import (
    _as_matrix, _enough, _Finite, _finite_tokens, _layer_check, _natural, _neurons, _number, _read, select_tokens,
    _step_at, _tensor_name, _TokenRows, _unconverged, _warn
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


def similarity(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
               tensor: str = "token_embedding", step: str | int = "latest", groups: str | None = None,
               mapping: str | None = None, allow_nonfinite: bool = False) -> list[SimilarityResult]:
    """Cosine-similarity structure of the chosen rows of ``tensor`` at each selected step
    (default selection: the ``reasoning`` group). Only the requested rows are read. A row holding
    NaN or inf is an error; with ``allow_nonfinite`` it is left out (a warning names the tokens)."""
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


def cohesion(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
             tensor: str = "token_embedding", step: str | int = "latest", groups: str | None = None,
             mapping: str | None = None, allow_nonfinite: bool = False) -> list[CohesionResult]:
    """Mean cosine within each token group and between every pair of groups, of the chosen rows of
    ``tensor`` at each selected step (default: every stored group; ids and words go to the stored
    group holding them, else to ``selected``), and the separation (within minus between). O(k d):
    no k x k matrix. A row holding NaN or inf is an error; with ``allow_nonfinite`` it is left out."""
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


def pca(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
        tensor: str = "token_embedding", step: str | int = "latest", n_components: int = 3,
        groups: str | None = None, mapping: str | None = None, allow_nonfinite: bool = False) -> list[PCAResult]:
    """PCA of the chosen token vectors (default: ``keys,reasoning,memory``) with an order score
    per group. A row holding NaN or inf is an error; with ``allow_nonfinite`` it is left out."""
    from ..analyses.pca import pca as _pca

    _number("n_components", n_components, lo=1, integer=True)
    with open_source(path, groups, mapping) as run:
        rows = _TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "pca", 2, "PCA")
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


def align(path: str | os.PathLike, layer: int | None = None, head: int | None = None, *,
          step: str | int = "latest", top_k: int = 3, groups: str | None = None, mapping: str | None = None,
          allow_nonfinite: bool = False) -> list[AlignResult]:
    """Singular vectors of W_V (and W_V W_O) of one head (default: layer 0, head 0) against every
    token embedding. NaN or inf in the head's W_V or W_O or in the embedding is an error; with
    ``allow_nonfinite`` the non-finite entries of W_V and W_O are taken as 0 and the embedding rows
    holding one are left out of the group means (their cosines are 0)."""
    from ..analyses.align import align as _align

    layer = 0 if layer is None else _number("layer", layer, integer=True)
    head = 0 if head is None else _number("head", head, integer=True)
    _number("top_k", top_k, lo=1, integer=True)
    with open_source(path, groups, mapping) as run:
        _layer_check(run, layer, head)
        indices = run.step_indices(step)
        wv = _read(run.tensor(f"layer{layer}/W_V"), indices)
        wo = _read(run.tensor(f"layer{layer}/W_O"), indices)
        emb = _read(run.tensor("token_embedding"), indices)
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


def condense(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
             tensor: str = "token_embedding", neurons: str | None = "layer0/W_Q", threshold: float = 0.7,
             step: str | int = "latest", top_shares: tuple[int, ...] = (1, 2, 5), groups: str | None = None,
             mapping: str | None = None, allow_nonfinite: bool = False) -> list[CondenseResult]:
    """Covariance spectrum of ``tensor``'s rows (default: every row), neuron groups of ``neurons``
    ('' or None: none) and the singular values of every weight matrix. NaN or inf in any of them is
    an error; with ``allow_nonfinite`` the rows and neurons holding one are left out, and a weight
    matrix holding one is left out of the singular values."""
    from ..analyses.condense import condense as _condense

    _number("threshold", threshold, lo=-1.0, hi=1.0)
    if not top_shares or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1
                             for k in top_shares):
        raise ProbeError(f"{param('top_shares', top_shares)}: need positive integers")
    with open_source(path, groups, mapping) as run:
        ids = select_tokens(run, tokens, words=words, words_file=words_file, tensor=tensor, probe="condense")[0]
        _enough(ids if ids is not None else range(run.tensor(tensor).shape[1]), 2, "a covariance spectrum")
        indices = run.step_indices(step)
        vectors = _read(run.tensor(tensor), indices, ids)
        if neurons == "layer0/W_Q" and int(run.dims.get("layers", 0)) == 0:
            neurons = None  # the default, on a model without attention (the Emb-MLP)
        neuron_w = _read(run.tensor(neurons), indices) if neurons else [None] * len(indices)
        layer_w = {n: _read(run.tensor(n), indices) for n in run.weight_matrices()}
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
        except np.linalg.LinAlgError as exc:
            raise _unconverged(path, f"condense: the decomposition of {getattr(exc, 'matrix', tensor)}", at[k],
                               exc) from None
    check.warn()
    return _warn(out)


def spectrum(path: str | os.PathLike, *, step: str | int = "latest", precision: str = "float64", threads: int = 0,
             progress=None, allow_nonfinite: bool = False) -> list[SpectrumResult]:
    """Spectral metrics (WeightWatcher's: spectral norm, Frobenius norm, stable rank, alpha, ...)
    of every linear layer. ``precision`` of the Gram matrix: float64 (WeightWatcher's values to
    machine precision) or float32 (about twice as fast). ``threads`` layers at once, each with one
    BLAS thread (0: one per CPU core), so at most that many matrices are in memory.

    Snapshot files: every weight matrix parameter (per-head tensors as the full map); other
    checkpoints, whatever their layout: every 2-D tensor, in natural order (layer 2 before 10), a
    tensor tied to another (the same memory under two names) once.

    A matrix holding NaN or inf is an error; with ``allow_nonfinite`` it is left out (no row).
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
            names = run.weight_matrices() + [n for n in run.tensors() if n in ("W_E", "W_pos", "W_U")]
            names = list(dict.fromkeys(sorted(names, key=_natural)))
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
        results = pool.map(one, names)
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


def rank(path: str | os.PathLike, *, step: str | int = "latest", groups: str | None = None,
         mapping: str | None = None, allow_nonfinite: bool = False) -> list[RankResult]:
    """Effective rank (exp entropy of σ / Σσ), stable rank (Σσ² / σ₁²) and top-1 / top-5 energy of the
    centred token embedding and of every weight matrix (per-head tensors as the full map), per step.
    NaN or inf is an error; with ``allow_nonfinite`` the embedding rows holding one are left out (the
    rest centred), and a weight matrix holding one is left out."""
    from ..analyses.rank import matrix_ranks

    with open_source(path, groups, mapping) as run:
        indices = run.step_indices(step)
        names = _rank_names(run)
        emb = _read(run.tensor("token_embedding"), indices)
        mats = {n: _read(run.tensor(n), indices) for n in names}
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


def rank_trajectory(path: str | os.PathLike, *, step: str | int = "all", metric: str = "effective_rank",
                    groups: str | None = None, mapping: str | None = None, allow_nonfinite: bool = False
                    ) -> list[RankTrajectoryResult]:
    """Where each matrix's ``metric`` (effective_rank, stable_rank, top1_energy, top5_energy) bottoms out
    over the selected steps: its minimum, the step of it, the dip below the first step and the rebound
    to the last ("condense, then expand" as numbers). Non-finite values: as :func:`rank` (a matrix
    left out at some step is left out of the trajectory)."""
    from ..analyses.rank import rank_trajectory as _rank_trajectory

    results = rank(path, step=step, groups=groups, mapping=mapping, allow_nonfinite=allow_nonfinite)
    known = list(next(iter(results[0].numbers.values())))
    if metric not in known:
        raise ProbeError(f"{param('metric', metric)}: rank reports {', '.join(known)}")
    return _warn([_rank_trajectory(results, metric)])
