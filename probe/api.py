"""The Python API behind the ``probe`` CLI: each function takes a path and returns results.

Functions that accept ``step`` return one result per selected snapshot (``latest``,
``all``, a step number, ``A:B`` or a comma list); with several steps each dataset is read once. Token
selections are ``tokens`` (group names, ids ``3,5,7``, a half-open range ``11:21``, or a
list) or ``words`` / ``words_file`` (looked up in a text run's stored vocabulary or a
checkpoint's tokenizer files); ``None`` for all of them is the probe's own selection.
Every result follows one contract (:class:`probe.analyses.base.Result`). Warnings about
a result (zero vectors, words left out) are :class:`~probe.errors.ProbeWarning`.
"""
from __future__ import annotations

import inspect
import math
import os
import re
import warnings

import numpy as np

from .analyses.dynamics import DELTA, SPIKE_FACTOR, SPIKE_WINDOW, WINDOW as SMOOTH
from .analyses.norms import SATURATION
from .analyses.sinks import MIN_QUERY, SINK_THRESHOLD
from .analyses.tokens import BUCKETS
from .analyses.similarity import BLOCKED_ABOVE


def _lazy(module: str, name: str):
    """``name`` of ``probe.analyses.<module>``, imported at its first call: ``probe info`` and
    ``validate`` need none of the math (bench/bench_cli.py). (Result classes appear as annotations, strings
    here, except the two this module builds.)"""
    def call(*args, **kwargs):
        from importlib import import_module

        return getattr(import_module(f"probe.analyses.{module}"), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


_align = _lazy("align", "align")
attention_stats = _lazy("attention", "attention_stats")
reasoning_bias = _lazy("bias", "reasoning_bias")
_condense = _lazy("condense", "condense")
loss_dynamics = _lazy("dynamics", "loss_dynamics")
norm_saturation = _lazy("norms", "norm_saturation")
matrix_ranks = _lazy("rank", "matrix_ranks")
_rank_trajectory = _lazy("rank", "rank_trajectory")
OODResult, loss_acc = _lazy("ood", "OODResult"), _lazy("ood", "loss_acc")
_pca = _lazy("pca", "pca")
attention_sinks = _lazy("sinks", "attention_sinks")
token_features, token_gains = _lazy("tokens", "token_features"), _lazy("tokens", "token_gains")
cosine_similarity = _lazy("similarity", "cosine_similarity")
cosine_similarity_blocked = _lazy("similarity", "cosine_similarity_blocked")
SpectrumResult = _lazy("spectrum", "SpectrumResult")
_theory = _lazy("theory", "theory")
from ._files import open_regular, regular_file
from .analyses._stats import finite_rows, nonfinite
from .errors import ProbeError, ProbeWarning, param
from .format import P, Run, is_snapshot_file, read_rows
from .format import validate as _validate
from .readers.source import open_source, word_ids
from .readers.tokens import parse_tokens
from .readers.words import word_list

__all__ = ["Run", "info", "token_text", "similarity", "validate", "select_tokens", "pca", "align", "condense",
           "theory", "ood", "attention", "bias", "spectrum", "norms", "sinks", "rank", "rank_trajectory", "tokens",
           "dynamics", "sweep_summary"]

# The selection a probe analyses when neither tokens nor words are given (None: every row).
DEFAULT_TOKENS = {"similarity": "reasoning", "pca": "keys,reasoning,memory", "theory": "reasoning",
                  "condense": None}


def info(path: str | os.PathLike) -> dict:
    """Summary of a snapshot file (configuration, steps, token groups, tensors and shapes) or of a
    checkpoint (format, layout, layers, heads, step, every tensor's shape and dtype)."""
    if not is_snapshot_file(path):
        return _checkpoint_info(os.fspath(path))
    with Run(path) as run:
        groups, strings = run.groups, run.token_strings()
        return {
            "file": run.path,
            "schema_version": "%d.%d" % run.schema_version,
            "package_version": run.package_version,
            "created": str(run.h5.attrs.get("created", "")),
            "snapshots": run.n_snapshots,
            "steps": [int(s) for s in run.steps],
            "config": run.config,
            "environment": run.environment,
            "task": run.task,
            "dims": run.dims,
            "groups": {k: [int(i) for i in v] for k, v in groups.items()},
            "group_strings": {} if strings is None else {k: [strings[i] for i in v] for k, v in groups.items()},
            "tensors": {k: list(v) for k, v in run.tensors().items()},
            "metrics": {s: {m: float(v[-1]) for m, v in ms.items() if len(v)} for s, ms in run.metrics().items()},
        }


def _checkpoint_info(path: str) -> dict:
    from .readers.checkpoints import open_checkpoint
    from .readers.layouts import detect

    src = open_checkpoint(path)
    shapes, dtypes, tied = src.shapes(), src.dtypes(), src.aliases()
    try:
        layout = detect(src)
        known = {"layout": layout.name, "layers": layout.layers, "heads": layout.heads,
                 "canonical": {n: list(raw) for n, (raw, _) in layout.rules.items()}}
    except ProbeError as exc:   # info describes what it can read, known layout or not
        known = {"layout": None, "layers": None, "heads": None, "canonical": {}, "layout_error": str(exc)}
    return {"file": path, "format": src.kind, "step": src.step, **known, "config": src.config,
            "tensors": {n: {"shape": list(s), "dtype": dtypes.get(n, "?"), **({"tied_to": tied[n]} if n in tied
                                                                                else {})}
                        for n, s in shapes.items()},
            "parameters": int(sum(int(np.prod(s)) for n, s in shapes.items()
                                  if n not in tied and "f" in dtypes.get(n, "f")))}   # floats: not index buffers


def validate(path: str | os.PathLike) -> list[str]:
    """Findings of checking a snapshot file against the schema (empty: it matches). A FIFO or device
    is refused unopened; a safetensors checkpoint is refused with what is wrong in its header (the
    line every reader gives), or as a checkpoint rather than a snapshot file."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        regular_file(path, "snapshot file")
        if not is_snapshot_file(path):
            from .readers.checkpoints import SafetensorsSource, sniff

            if sniff(path) == "safetensors":
                SafetensorsSource(path)
                raise ProbeError(f"{path}: a safetensors checkpoint, not a snapshot file: validate checks the files "
                                 "probe-train writes (probe info describes a checkpoint)")
    return _validate(path)


def token_text(path: str | os.PathLike, ids) -> list[str] | None:
    """Text of each token id: the strings a text run stores, else the checkpoint's tokenizer
    files; ``None`` when neither exists (synthetic tasks)."""
    if is_snapshot_file(path):
        with Run(path) as run:
            strings = run.token_strings()
        return None if strings is None else [strings[int(i)] for i in ids]
    from .readers.words import ids_to_text

    return ids_to_text(os.fspath(path), ids)


def select_tokens(run, tokens=None, *, words=None, words_file: str | None = None,
                  tensor: str = "token_embedding", probe: str = "similarity") -> tuple[np.ndarray | None, list[str]]:
    """(ids, the group each id was chosen by) for a selection, checked against the rows of ``tensor``;
    ids is None when the probe's default is every row."""
    rows = run.tensor(tensor).shape[1]
    wl = word_list(words, words_file)
    if wl:
        if tokens is not None:
            raise ProbeError(f"give {param('tokens')} or {param('words')}, not both")
        ids = word_ids(run, wl)
        bad = ids[(ids < 0) | (ids >= rows)]
        if bad.size:
            raise ProbeError(f"word token id(s) {', '.join(map(str, bad[:5]))} outside the rows of {tensor} "
                             f"(0..{rows - 1})")
        return ids, [""] * len(ids)
    if tokens is None:
        tokens = DEFAULT_TOKENS.get(probe)
        if tokens is None:
            return None, []
        missing = [g for g in tokens.split(",") if g not in run.groups]
        if missing:
            known = ", ".join(sorted(run.groups)) or "none"
            raise ProbeError(f"{run.path}: has no token group '{missing[0]}' (the default selection); choose "
                             f"tokens with {param('tokens')} or {param('words')} (groups here: {known})")
    return parse_tokens(tokens, run.groups, rows)


def _number(name: str, value, lo=None, hi=None, integer: bool = False):
    """``value`` if it is a finite number in [lo, hi]; else a ProbeError naming the parameter."""
    import math

    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.number))
    if not ok or isinstance(value, bool) or not math.isfinite(float(value)):
        kind = "an integer" if integer else "a finite number"
        raise ProbeError(f"{param(name, value)}: need {kind}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f"at least {lo}" if hi is None else f"at most {hi}" if lo is None else f"between {lo} and {hi}"
        raise ProbeError(f"{param(name, value)}: need {rng}")
    return value


def _enough(ids, need: int, what: str) -> None:
    if ids is not None and len(ids) < need:
        raise ProbeError(f"{what} needs at least {need} tokens; the selection has {len(ids)}")


def _read(ds, indices: list[int], rows=None) -> list[np.ndarray]:
    """ds at each snapshot index (optionally only ``rows``); one read when the indices are contiguous."""
    if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
        sl = slice(indices[0], indices[-1] + 1)
        return list(ds[sl] if rows is None else read_rows(ds, sl, rows))
    return [ds[i] if rows is None else read_rows(ds, i, rows) for i in indices]


def _group_of(run, ids: np.ndarray, labels: list[str]) -> list[str]:
    """Group of each id: the group that selected it, else the first stored group holding it, else ''."""
    groups = run.groups
    return [lab or next((g for g, v in groups.items() if i in v), "") for i, lab in zip(ids, labels)]


def _warn(results: list) -> list:
    """Pass each result's warnings on to the caller (once per distinct message)."""
    for msg in dict.fromkeys(w for r in results for w in r.warnings):
        warnings.warn(msg, ProbeWarning, stacklevel=3)
    return results


# --- non-finite input ----------------------------------------------------------------------------
# Every probe checks what it read (np.isfinite on the arrays in hand; nothing is read twice). By default a
# NaN or inf is an error naming the file, the tensor, the step and the counts; with ``allow_nonfinite`` the
# probe computes on the finite part, by its own rule, and one warning per tensor says so:
#   token vectors (similarity, pca, theory, condense, align's embedding, rank's embedding): the rows
#     holding a non-finite value are left out;
#   weight matrices in an SVD or eigen-decomposition (spectrum, rank, condense's singular values): the
#     matrix is left out; align's own W_V and W_O: their non-finite entries are taken as 0;
#   condense's neuron weights: the neurons holding one are left out;
#   attention maps and residual norms (attention, sinks): the probe sequences holding one are left out;
#   norm statistics (norms): the sites holding one; per-split losses (bias): the steps holding one;
#   the per-step loss log (dynamics): the log is cut before its first non-finite loss;
#   per-token losses and entropies (tokens): the tokens holding one;
#   ood: the weights are used as they are, and the sequences whose logits are not finite are left out
#     of each split's loss and accuracy. Non-finite logits (possible from finite weights: a forward pass
#     that overflows) are an error without ``allow_nonfinite``.

_ALLOW = param("allow_nonfinite", True)


class _Finite:
    """The non-finite check of one probe call on one file (see above). ``check(name, X, step, action)``
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
        ok = nonfinite(X)[0]
        if ok is None:
            return None
        keep = finite_rows(ok)
        gone = np.flatnonzero(~keep) if ids is None else np.asarray(ids)[~keep]
        shown = ", ".join(str(int(i)) for i in gone[:8]) + (", ..." if gone.size > 8 else "")
        self(name, X, step, f"token(s) {shown} left out")
        return keep

    def warn(self) -> None:
        for (name, action), found in self._found.items():
            warnings.warn(f"{self.facts(name, found)}; {action}", ProbeWarning, stacklevel=3)
        self._found.clear()


def _tensor_name(run, name: str) -> str:
    """``name`` with the checkpoint's own tensor name(s) it is built from, where they differ."""
    rules = getattr(getattr(getattr(run, "reader", None), "layout", None), "rules", {})
    raw = tuple(rules.get(name, ((),))[0])
    return f"{name} ({', '.join(raw)})" if raw and raw != (name,) else name


def _step_at(run, i: int) -> int | None:
    """The step of snapshot ``i`` for messages; a checkpoint's own step, or None when it has none."""
    source = getattr(run, "source", None)
    if source is not None:
        return source.step
    return int(run.steps[i])


def _at(step) -> str:
    return "" if step is None else f"at step {step} "


def _unconverged(path, what: str, step, exc: Exception) -> ProbeError:
    at = f" at step {step}" if step is not None else ""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return ProbeError(f"{os.fspath(path)}: {what}{at} did not converge ({detail})")


def similarity(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
               tensor: str = "token_embedding", step: str | int = "latest", groups: str | None = None,
               mapping: str | None = None, allow_nonfinite: bool = False) -> list[SimilarityResult]:
    """Cosine-similarity structure of the chosen rows of ``tensor`` at each selected step
    (default selection: the ``reasoning`` group). Only the requested rows are read. A row holding
    NaN or inf is an error; with ``allow_nonfinite`` it is left out (a warning names the tokens)."""
    with open_source(path, groups, mapping) as run:
        ids, labels = select_tokens(run, tokens, words=words, words_file=words_file, tensor=tensor,
                                    probe="similarity")
        _enough(ids, 2, "cosine similarity")
        indices = run.step_indices(step)
        vectors = _read(run.tensor(tensor), indices, ids)
        steps = run.steps
        check, name = _Finite(run.path, allow_nonfinite), _tensor_name(run, tensor)
        at = [_step_at(run, i) for i in indices]
    out = []
    for v, i, s in zip(vectors, indices, at):
        v, sel, lab = _finite_tokens(check, name, v.reshape(len(ids), -1), s, ids, labels, 2, "cosine similarity")
        fn = cosine_similarity if len(sel) <= BLOCKED_ABOVE else cosine_similarity_blocked
        out.append(fn(v, sel, step=int(steps[i]), groups=lab))
    check.warn()
    return _warn(out)


def _finite_tokens(check: _Finite, name: str, X: np.ndarray, step, ids, labels, need: int, what: str):
    """(X, ids, labels) without the rows of X (k, d) that hold a non-finite value (an error unless
    allowed); at least ``need`` rows must remain."""
    keep = check.rows(name, X, step, ids)
    if keep is None:
        return X, ids, labels
    if keep.sum() < need:
        raise ProbeError(f"{check.facts(name, [(step, *nonfinite(X)[1:])])}: {what} needs at least {need} tokens "
                         f"with finite values; {int(keep.sum())} left")
    return X[keep], np.asarray(ids)[keep], [l for l, k in zip(labels, keep) if k]


def pca(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
        tensor: str = "token_embedding", step: str | int = "latest", n_components: int = 3,
        groups: str | None = None, mapping: str | None = None, allow_nonfinite: bool = False) -> list[PCAResult]:
    """PCA of the chosen token vectors (default: ``keys,reasoning,memory``) with an order score
    per group. A row holding NaN or inf is an error; with ``allow_nonfinite`` it is left out."""
    _number("n_components", n_components, lo=1, integer=True)
    with open_source(path, groups, mapping) as run:
        ids, labels = select_tokens(run, tokens, words=words, words_file=words_file, tensor=tensor, probe="pca")
        _enough(ids, 2, "PCA")
        groups_of = _group_of(run, ids, labels)
        indices = run.step_indices(step)
        vectors = _read(run.tensor(tensor), indices, ids)
        steps = run.steps
        check, name = _Finite(run.path, allow_nonfinite), _tensor_name(run, tensor)
        at = [_step_at(run, i) for i in indices]
    out = []
    for v, i, s in zip(vectors, indices, at):
        v, sel, grp = _finite_tokens(check, name, v.reshape(len(ids), -1), s, ids, groups_of, 2, "PCA")
        try:
            out.append(_pca(v, sel, grp, n_components, step=int(steps[i])))
        except np.linalg.LinAlgError as exc:
            raise _unconverged(path, f"the SVD (PCA) of {name}", s, exc) from None
    check.warn()
    return _warn(out)


def _layer_check(run, layer: int, head: int | None = None) -> None:
    layers = int(run.dims.get("layers", 0))
    if layers == 0:
        raise ProbeError(f"{run.path}: the model has no attention layers")
    if not 0 <= layer < layers:
        raise ProbeError(f"{param('layer', layer)} out of range: the model has layers 0..{layers - 1}")
    heads = int(run.dims.get("heads", 1))
    if head is not None and not 0 <= head < heads:
        raise ProbeError(f"{param('head', head)} out of range: the model has heads 0..{heads - 1}")


def align(path: str | os.PathLike, layer: int | None = None, head: int | None = None, *,
          step: str | int = "latest", top_k: int = 3, groups: str | None = None, mapping: str | None = None,
          allow_nonfinite: bool = False) -> list[AlignResult]:
    """Singular vectors of W_V (and W_V W_O) of one head (default: layer 0, head 0) against every
    token embedding. NaN or inf in the head's W_V or W_O or in the embedding is an error; with
    ``allow_nonfinite`` the non-finite entries of W_V and W_O are taken as 0 and the embedding rows
    holding one are left out of the group means (their cosines are 0)."""
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


def _neurons(W: np.ndarray) -> np.ndarray:
    """Neuron input-weight vectors of an x @ W tensor: (in, out) -> (out, in); per head (H, in, e) -> (H*e, in)."""
    if W.ndim == 3:
        return np.concatenate([w.T for w in W])
    if W.ndim == 2:
        return W.T
    raise ProbeError(f"cannot group neurons of a {W.ndim}-D tensor")


def condense(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
             tensor: str = "token_embedding", neurons: str | None = "layer0/W_Q", threshold: float = 0.7,
             step: str | int = "latest", top_shares: tuple[int, ...] = (1, 2, 5), groups: str | None = None,
             mapping: str | None = None, allow_nonfinite: bool = False) -> list[CondenseResult]:
    """Covariance spectrum of ``tensor``'s rows (default: every row), neuron groups of ``neurons``
    ('' or None: none) and the singular values of every weight matrix. NaN or inf in any of them is
    an error; with ``allow_nonfinite`` the rows and neurons holding one are left out, and a weight
    matrix holding one is left out of the singular values."""
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


def theory(path: str | os.PathLike, tokens=None, *, words=None, words_file: str | None = None,
           anchor: int | None = None, step: str | int = "latest", dim: int | None = None, seed: int = 0,
           groups: str | None = None, allow_nonfinite: bool = False) -> list[TheoryResult]:
    """Measured embedding cosines (default tokens: ``reasoning``) against the P^s prediction and
    paper 1's eq. 14 reconstruction. NaN or inf in an embedding row or a row of P^s is an error;
    with ``allow_nonfinite`` those tokens are left out (the default anchor moves to the middle of the
    tokens left; a chosen anchor left out is an error)."""
    if dim is not None:
        _number("dim", dim, lo=1, integer=True)
    _number("seed", seed, lo=0, integer=True)
    with open_source(path, groups) as run:
        if not isinstance(run, Run):
            raise ProbeError(f"{path}: theory needs a snapshot file written by probe-train (its P^s)")
        ids, labels = select_tokens(run, tokens, words=words, words_file=words_file, probe="theory")
        _enough(ids, 2, "the P^s theory")
        if P["label_dist"] not in run.h5:
            raise ProbeError(f"{run.path}: holds no label distribution P^s ('{P['label_dist']}')")
        Pmat = np.asarray(run.dataset("label_dist")[...])
        kinds = ["reasoning" if g == "reasoning" else "key" if g == "keys" else g
                 for g in _group_of(run, ids, labels)]
        chosen = anchor
        if anchor is None:
            anchor = int(ids[len(ids) // 2])
        if anchor not in ids:
            raise ProbeError(f"{param('anchor', anchor)} is not among the chosen tokens")
        indices = run.step_indices(step)
        vectors = _read(run.tensor("token_embedding"), indices, ids)
        d_m = int(run.dims["d_model"])
        gamma = float(run.config.get("gamma", 0.5))
        steps = run.steps
        check = _Finite(run.path, allow_nonfinite)
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
    return _warn(out)


def attention(path: str | os.PathLike, *, layer: int | None = None, step: str | int = "latest",
              allow_nonfinite: bool = False) -> list[AttentionResult]:
    """How close attention on the stored probe batch is to causal averaging, per layer (default:
    every layer) and head. NaN or inf in the maps is an error; with ``allow_nonfinite`` the probe
    sequences holding one (in any layer or head) are left out."""
    if layer is not None:
        _number("layer", layer, integer=True)
    with Run(path) as run:
        if layer is not None:
            _layer_check(run, layer)
        if P["attention"] not in run.h5:
            raise ProbeError(f"{run.path}: holds no attention maps (an Emb-MLP run?)")
        indices = run.step_indices(step)
        maps = _read(run.dataset("attention"), indices)
        key_pos = np.asarray(run.dataset("probe_key_pos")[...])
        n_anchors = int(run.task.get("n_anchors", 2))
        steps = run.steps
        check = _Finite(run.path, allow_nonfinite)
    out = []
    for A, i in zip(maps, indices):
        if layer is not None:
            A = A[layer:layer + 1]
        keep = _finite_sequences(check, "attention" if layer is None else f"attention of layer {layer}", A,
                                 int(steps[i]))
        out.append(attention_stats(A if keep is None else A[:, :, keep], key_pos if keep is None else key_pos[keep],
                                   n_anchors, step=int(steps[i])))
    check.warn()
    return _warn(out)


def _finite_sequences(check: _Finite, name: str, A: np.ndarray, step, axis: int = 2, also=None) -> np.ndarray | None:
    """None when the maps A (layers, heads, B, T, T) (and ``also``, (blocks, B, T) residual norms, if
    given) are finite; else (allowed) the (B,) mask of the probe sequences finite in both."""
    ok = check(name, A, step, "the probe sequences holding them left out")
    keep = None if ok is None else np.moveaxis(ok, axis, 0).reshape(ok.shape[axis], -1).all(axis=1)
    if also is not None:
        ok2 = check(also[0], also[1], step, "the probe sequences holding them left out")
        if ok2 is not None:
            k2 = np.moveaxis(ok2, 1, 0).reshape(ok2.shape[1], -1).all(axis=1)
            keep = k2 if keep is None else keep & k2
    if keep is not None and not keep.any():
        raise ProbeError(f"{check.path}: {_at(step)}no probe sequence has finite attention maps"
                         f"{' and residual norms' if also is not None else ''}")
    return keep


def bias(path: str | os.PathLike, splits: tuple[str, str] | None = None, *, step: str | int = "latest",
         allow_nonfinite: bool = False) -> list[BiasResult]:
    """Reasoning bias Delta L = (L_A - L_B) / L_B from the stored per-split losses; ``splits`` is
    (A, B), by default the task's pair (anchor: mem, rsn_train; text: story, logic). A NaN or inf
    loss is an error; with ``allow_nonfinite`` the steps holding one are left out."""
    if splits is not None and len(splits) != 2:
        raise ProbeError(f"{param('splits')} takes exactly two splits, A then B")
    with Run(path) as run:
        known = run.splits
        if splits is None:
            fallback = ("mem", "rsn_train") if run.task.get("kind") == "anchor" else (known[0], known[-1])
            splits = tuple(run.task.get("bias_splits", fallback))
        for s in splits:
            if s not in known:
                raise ProbeError(f"unknown split '{s}'; this run has {', '.join(known)}")
        indices = run.step_indices(step)
        m = run.metrics()
        steps = run.steps
        check = _Finite(run.path, allow_nonfinite)
    a, b, at = m[splits[0]]["loss"][indices], m[splits[1]]["loss"][indices], steps[indices]
    keep = np.ones(len(at), bool)
    for split, x in ((splits[0], a), (splits[1], b)):
        for k in np.flatnonzero(~np.isfinite(x)):   # named per step, like a tensor
            check(f"loss[{split}]", x[k:k + 1], int(at[k]), "the steps holding them left out")
            keep[k] = False
    if not keep.any():
        facts = "; ".join(check.facts(n, f) for (n, _), f in check._found.items())
        raise ProbeError(f"{facts}: no selected step is left")
    check.warn()
    return _warn(reasoning_bias(a[keep], b[keep], at[keep], splits[0], splits[1]))


def ood(path: str | os.PathLike, *, step: str | int = "latest", full: bool = False, threads: int = 0,
        progress=None, allow_nonfinite: bool = False) -> list[OODResult]:
    """Rebuild the model from the stored weights and evaluate every split, per anchor combination on
    the held-out data; for the composite task also the inferential and symmetric accuracy.

    By default each split is evaluated on the sequences the trainer used for its metrics, so the
    numbers equal the logged ones; ``full`` evaluates every sequence of each split. With several
    steps, ``threads`` snapshots are evaluated at once, one torch thread each (0: one per CPU core);
    the numbers do not depend on it.

    A weight holding NaN or inf is an error, and so are non-finite logits (finite weights can
    overflow in the forward pass): the message names the split and how many sequences. With
    ``allow_nonfinite`` the model runs with the weights as stored and the sequences whose logits are
    not finite are left out of each split's loss and accuracy (a split left with none: null).
    """
    _number("threads", threads, lo=0, integer=True)
    from probe_train import evaluate as E  # probe's one door into the trainer (torch is imported here)

    with Run(path) as run:
        cfg = E.run_config(run)
        task = E.load_task(run)
        indices = run.step_indices(step)
        steps = run.steps
        held_out = "rsn_test" if cfg.task == "anchor" else "ood_inferential"
        inputs = {split: E.split_inputs(task, split, full) for split in task.splits}
        check, nonfinite_at = _Finite(run.path, allow_nonfinite), set()

        def check_weights(name, part, stack):   # as read, before a model is built from them
            for k, i in enumerate(part):
                if check(name, stack[k], int(steps[i]), "the model is evaluated with them") is not None:
                    nonfinite_at.add(int(i))

        out = E.map_models(run, indices, lambda i, model: _ood_one(E, model, task, cfg, held_out, inputs,
                                                                   int(steps[i]), check, i not in nonfinite_at),
                           threads=threads or os.cpu_count() or 1, progress=progress, check=check_weights)
    check.warn()
    return _warn(out)


def _ood_one(E, model, task, cfg, held_out: str, inputs: dict, step: int, check: _Finite,
             finite_weights: bool) -> OODResult:
    res = OODResult(step=step)
    logits_of = {}
    for split in task.splits:
        idx, loss, acc, logits = E.evaluate_split(model, task, inputs[split])
        ok, nan, inf = nonfinite(logits)
        if ok is not None:
            rows = finite_rows(ok)
            why = " (from finite weights: the forward pass overflows)" if finite_weights else ""
            check.report(f"the output (logits) of split {split}", step, nan, inf,
                         "those sequences left out of its loss and accuracy",
                         f" in {int((~rows).sum())} of {len(rows)} sequences{why}")
            idx, logits = idx[rows], logits[rows]
            loss, acc = loss_acc(logits, task.labels[idx])
        logits_of[split] = (idx, logits)
        res.splits[split] = {"loss": loss, "acc": acc, "n": int(len(idx))}
    idx, logits = logits_of[held_out]
    for c in np.unique(task.combo[idx]):
        sel = task.combo[idx] == c
        loss, acc = loss_acc(logits[sel], task.labels[idx][sel])
        res.combos[",".join(map(str, task.combos[c]))] = {"loss": loss, "acc": acc, "n": int(sel.sum())}
    if cfg.task == "composite":
        for name in ("ood_inferential", "ood_symmetric"):
            idx, logits = logits_of[name]
            res.targets[name.removeprefix("ood_")] = {
                "acc": float((logits.argmax(-1) == task.labels[idx]).mean()), "n": int(len(idx))}
    return res


def _as_matrix(name: str, W: np.ndarray) -> np.ndarray:
    """Per-head tensors back to the full linear map: (H, d, e) -> (d, H*e); W_O (H, e, d) -> (H*e, d)."""
    if W.ndim == 3:
        if name.endswith("W_O"):
            return W.reshape(-1, W.shape[-1])
        return W.transpose(1, 0, 2).reshape(W.shape[1], -1)
    return W


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


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
    from .analyses.spectrum import PRECISIONS

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
    from .readers.checkpoints import open_checkpoint

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
    from .analyses.spectrum import layer_spectrum

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


# --- paper 4: norms, sinks, rank, tokens ---------------------------------------------------------

WINDOW, MAX_TOKENS = 128, 4096


def _forward(path: str, text: str | None, what: str, step, *, window: int, max_tokens: int, attention: bool = False):
    """A checkpoint run over ``text`` (the probes that need activations, on external checkpoints)."""
    from .readers.activations import run_text
    from .readers.checkpoints import open_checkpoint

    if not os.path.exists(path) and not path.startswith("hf:"):
        raise ProbeError(f"{path}: no such file or folder")
    open_checkpoint(path)   # a clear error for anything that is no readable checkpoint at all
    if text is None:
        raise ProbeError(f"{path}: {what} on a checkpoint needs activations: pass {param('text')} FILE, a text "
                         "file to run the model on (its tokenizer files are used)")
    if str(step) not in ("latest", "all"):
        raise ProbeError(f"{path}: a checkpoint holds one step; use {param('step', 'latest')}")
    _number("window", window, lo=2, integer=True)
    _number("max_tokens", max_tokens, lo=2, integer=True)
    return run_text(path, text, window=window, max_tokens=max_tokens, attention=attention)


def _text_only_for_checkpoints(path, text) -> None:
    if text is not None:
        warnings.warn(f"{path}: {param('text')} is for external checkpoints; a snapshot file stores what it needs "
                      "(ignored)", ProbeWarning, stacklevel=3)


def norms(path: str | os.PathLike, *, step: str | int = "latest", saturation: float = SATURATION,
          text: str | None = None, window: int = WINDOW, max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False
          ) -> list[NormsResult]:
    """ε share s = ε / (m + ε) and effective gain of every norm site (m: the mean over the probe
    tokens of mean(x²), var(x) for a LayerNorm); sites with s >= ``saturation`` are saturated.
    Snapshot files: from the stored norm statistics; checkpoints: by running the model on ``text``.
    NaN or inf in a site's statistics or gain is an error; with ``allow_nonfinite`` the site is left out."""
    _number("saturation", saturation, lo=0.0, hi=1.0)
    path = os.fspath(path)
    if not is_snapshot_file(path):
        fw = _forward(path, text, "norms", step, window=window, max_tokens=max_tokens)
        if not fw.norm_sites:
            raise ProbeError(f"{path}: the model has no normalisation layers")
        eps = set(fw.norm_eps)
        if len(eps) > 1:
            warnings.warn(f"{path}: the norms use several epsilons ({sorted(eps)}); the largest is reported",
                          ProbeWarning, stacklevel=2)
        check = _Finite(path, allow_nonfinite)
        sites, ms, gain, med = _finite_sites(check, None, list(fw.norm_sites), fw.norm_ms, fw.norm_gain,
                                             fw.norm_ms_median, " (the model run on the text)")
        check.warn()
        return _warn([norm_saturation(sites, ms, max(eps), gain=gain, median_square=med, saturation=saturation)])
    _text_only_for_checkpoints(path, text)
    with Run(path) as run:
        if not run.has("norm_ms"):
            raise ProbeError(f"{run.path}: stores no norm statistics (a run without norms, or written before "
                             "schema 1.3)")
        sites = run.strings("norm_sites")
        indices = run.step_indices(step)
        ms = _read(run.dataset("norm_ms"), indices)
        med = _read(run.dataset("norm_ms_median"), indices) if run.has("norm_ms_median") else [None] * len(indices)
        gains = {s: _read(run.tensor(s), indices) for s in sites if s in run.weights()}
        eps = float(run.config.get("norm_eps", 1e-5))
        steps = run.steps
        check = _Finite(run.path, allow_nonfinite)
    out = []
    for k, i in enumerate(indices):
        g = np.array([np.sqrt(np.mean(np.square(gains[s][k], dtype=np.float64))) if s in gains else 1.0
                      for s in sites])
        for s in gains:   # a gain is a weight: named as stored, like every tensor
            ok = check(s, gains[s][k], int(steps[i]), "its site left out")
            if ok is not None:
                g[sites.index(s)] = np.nan
        kept, m, gk, mk = _finite_sites(check, int(steps[i]), sites, ms[k], g, med[k], "")
        out.append(norm_saturation(kept, m, eps, gain=gk, median_square=mk, saturation=saturation,
                                   step=int(steps[i])))
    check.warn()
    return _warn(out)


def _finite_sites(check: _Finite, step, sites: list[str], ms, gain, med, where: str):
    """(sites, mean_square, gain, median_square) of the norm sites whose numbers are all finite (an
    error unless allowed; a gain already reported non-finite is NaN here and not named again)."""
    bad = np.zeros(len(sites), bool)
    for name, x in (("norm_ms", ms), ("norm_ms_median", med)):
        if x is not None:
            ok = check(name + where, x, step, "the sites holding them left out")
            if ok is not None:
                bad |= ~ok
    if gain is not None:
        bad |= ~np.isfinite(np.asarray(gain, dtype=np.float64))
        if where:   # a checkpoint: the gains come from the model run, named here
            ok = check("norm gains" + where, gain, step, "the sites holding them left out")
    if not bad.any():
        return sites, ms, gain, med
    if bad.all():
        raise ProbeError(f"{check.path}: {_at(step)}no norm site has finite statistics")
    keep = ~bad
    return ([s for s, k in zip(sites, keep) if k], np.asarray(ms)[keep],
            None if gain is None else np.asarray(gain)[keep], None if med is None else np.asarray(med)[keep])


def sinks(path: str | os.PathLike, *, step: str | int = "latest", min_query: int = MIN_QUERY,
          sink_threshold: float = SINK_THRESHOLD, text: str | None = None, window: int = WINDOW,
          max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False) -> list[SinksResult]:
    """Attention sinks per layer and head: mean attention on the first position of queries at
    positions >= ``min_query``, the fraction of heads at or above ``sink_threshold``, and the first
    position's residual norm against the median position. Snapshot files: the stored probe batch;
    checkpoints: the model run on ``text``. NaN or inf in the maps or the residual norms is an
    error; with ``allow_nonfinite`` the sequences (windows) holding one are left out."""
    _number("min_query", min_query, lo=1, integer=True)
    _number("sink_threshold", sink_threshold, lo=0.0, hi=1.0)
    path = os.fspath(path)
    if not is_snapshot_file(path):
        fw = _forward(path, text, "sinks", step, window=window, max_tokens=max_tokens, attention=True)
        check = _Finite(path, allow_nonfinite)
        A, h = fw.attention, fw.hidden_norm
        keep = _finite_sequences(check, "attention (the model run on the text)", A, None,
                                 also=None if h is None else ("residual norms (the model run on the text)", h))
        if keep is not None:
            A, h = A[:, :, keep], None if h is None else h[:, keep]
        check.warn()
        return _warn([attention_sinks(A, h, min_query=min_query, threshold=sink_threshold)])
    _text_only_for_checkpoints(path, text)
    with Run(path) as run:
        if P["attention"] not in run.h5:
            raise ProbeError(f"{run.path}: holds no attention maps (an Emb-MLP run?)")
        indices = run.step_indices(step)
        maps = _read(run.dataset("attention"), indices)
        hidden = _read(run.dataset("hidden_norm"), indices) if run.has("hidden_norm") else [None] * len(indices)
        steps = run.steps
        check = _Finite(run.path, allow_nonfinite)
    out = []
    for A, h, i in zip(maps, hidden, indices):
        keep = _finite_sequences(check, "attention", A, int(steps[i]), also=None if h is None else ("hidden_norm", h))
        if keep is not None:
            A, h = A[:, :, keep], None if h is None else h[:, keep]
        out.append(attention_sinks(A, h, min_query=min_query, threshold=sink_threshold, step=int(steps[i])))
    check.warn()
    return _warn(out)


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
    results = rank(path, step=step, groups=groups, mapping=mapping, allow_nonfinite=allow_nonfinite)
    known = list(next(iter(results[0].numbers.values())))
    if metric not in known:
        raise ProbeError(f"{param('metric', metric)}: rank reports {', '.join(known)}")
    return _warn([_rank_trajectory(results, metric)])


def tokens(path: str | os.PathLike, other: str | os.PathLike | None = None, *, step: str | int = "latest",
           step_b: str | int | None = None, buckets: int = BUCKETS, text: str | None = None, window: int = WINDOW,
           max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False) -> list[TokensResult]:
    """Per-token loss difference ΔL = L_A − L_B between run A (``path`` at ``step``) and run B
    (``other``, or ``path`` again, at ``step_b``; by default B's latest step, or with several or a
    numbered ``step`` the same steps as A: a trajectory) on identical held-out tokens, bucketed by token
    frequency, unigram and bigram surprisal, how much the context lowers the loss, and the models'
    predictive entropy; per bucket the mean ΔL and the share of the total gain. Snapshot files: the
    stored token-probe windows; checkpoints (two Hugging Face folders): the models run on ``text``.
    A NaN or inf per-token loss, entropy or n-gram surprisal is an error; with ``allow_nonfinite`` the
    tokens holding one (in either model) are left out."""
    _number("buckets", buckets, lo=1, integer=True)
    path = os.fspath(path)
    other = os.fspath(other) if other is not None else None
    for p in (path, other):   # a broken file is named before anything else is said
        if p is not None:
            open_source(p).close()
    if other is None and step_b is None:
        raise ProbeError(f"tokens compares two models: give a second run, or a second step of the same run "
                         f"with {param('step_b')}")
    b_path = other if other is not None else path
    same_steps = step_b is None and str(step) != "latest"
    step_b = step if step_b is None else step_b
    if not is_snapshot_file(path) or not is_snapshot_file(b_path):
        if is_snapshot_file(path) or is_snapshot_file(b_path):
            raise ProbeError("tokens compares two snapshot files or two checkpoints, not one of each")
        if other is None:
            raise ProbeError(f"{path}: a checkpoint holds one step; give a second checkpoint to compare with")
        fa = _forward(path, text, "tokens", step, window=window, max_tokens=max_tokens)
        fb = _forward(b_path, text, "tokens", step_b, window=window, max_tokens=max_tokens)
        if fa.vocab_size != fb.vocab_size or not np.array_equal(fa.tokens, fb.tokens):
            raise ProbeError(f"{path} and {b_path} tokenize the text differently; the per-token comparison needs "
                             "one vocabulary")
        # checked before anything else is said: an error comes alone
        checks = _Finite(path, allow_nonfinite), _Finite(b_path, allow_nonfinite)
        keep = _finite_tokens_of(checks, [(0, "token_loss", fa.token_loss, None),
                                          (0, "token_entropy", fa.token_entropy, None),
                                          (1, "token_loss", fb.token_loss, None),
                                          (1, "token_entropy", fb.token_entropy, None)], " (the model run on the text)")
        V = fa.vocab_size
        counts = np.bincount(fa.targets.ravel(), minlength=V).astype(np.float64)
        prev = np.bincount(fa.tokens.ravel(), minlength=V).astype(np.float64)
        codes, pair = np.unique(fa.tokens.ravel() * V + fa.targets.ravel(), return_counts=True)
        want = fa.tokens.ravel() * V + fa.targets.ravel()
        c_ab = pair[np.searchsorted(codes, want)].astype(np.float64)
        tgt = fa.targets.ravel()
        unigram = -np.log((counts[tgt] + 1.0) / (counts.sum() + V))
        bigram = -np.log((c_ab + 0.01) / (prev[fa.tokens.ravel()] + 0.01 * V))
        warnings.warn("n-gram statistics of a checkpoint comparison come from the text itself (no training counts)",
                      ProbeWarning, stacklevel=2)
        la, lb = fa.token_loss.ravel(), fb.token_loss.ravel()
        feats = token_features(counts[tgt], unigram, bigram, la, lb, fa.token_entropy.ravel(), fb.token_entropy.ravel())
        if keep is not None:
            la, lb, feats = la[keep], lb[keep], {k: v[keep] for k, v in feats.items()}
        for c in checks:
            c.warn()
        return _warn([token_gains(la, lb, feats, buckets=buckets, label_a=path, label_b=b_path)])
    _text_only_for_checkpoints(path, text)
    runs_a = _token_runs(path, step)
    try:   # B at step_b; with a second run and no step_b, at its latest step or at each of A's steps
        if other is not None and same_steps:
            runs_b = [_token_runs(b_path, a["step"])[0] for a in runs_a]
        else:
            runs_b = _token_runs(b_path, step_b)
            if len(runs_b) != 1:
                raise ProbeError(f"{param('step')} selects the steps of run A; run B takes one step, not "
                                 f"{param('step', step_b)}")
            runs_b = runs_b * len(runs_a)
    except ProbeError as exc:   # a bad step of run B is --step-b's fault
        mark = param("step")[0]
        raise ProbeError(exc.args[0].replace(f"{mark}step{mark}", param("step_b"))
                         .replace(f"{mark}step=", f"{mark}step_b=")) from None
    out = []
    checks = _Finite(path, allow_nonfinite), _Finite(b_path, allow_nonfinite)
    a = runs_a[0]   # what does not change with the step (the windows' n-gram numbers): checked once
    fixed = _finite_tokens_of(checks, [(0, "token_probe_unigram", a["unigram"], None),
                                       (0, "token_probe_bigram", a["bigram"], None),
                                       (0, "token_counts", a["counts"][a["targets"].ravel()], None)], "")
    for a, b in zip(runs_a, runs_b):
        if not np.array_equal(a["tokens"], b["tokens"]) or not np.array_equal(a["targets"], b["targets"]):
            raise ProbeError(f"{path} and {b_path} hold different token-probe windows (another data seed, "
                             "tokenizer or token_probe size); the per-token comparison needs identical tokens")
        tgt = a["targets"].ravel()
        la, lb = a["loss"].ravel(), b["loss"].ravel()
        feats = token_features(a["counts"][tgt], a["unigram"].ravel(), a["bigram"].ravel(), la, lb,
                               a["entropy"].ravel(), b["entropy"].ravel())
        source = np.repeat(a["source"], a["tokens"].shape[1])
        keep = _finite_tokens_of(checks, [(0, "token_loss", la, a["step"]), (1, "token_loss", lb, b["step"]),
                                          (0, "token_entropy", a["entropy"], a["step"]),
                                          (1, "token_entropy", b["entropy"], b["step"])], "")
        keep = fixed if keep is None else keep if fixed is None else keep & fixed
        if keep is not None and not keep.any():
            raise ProbeError(f"{path}: no token has a finite loss, entropy and surprisal in both models")
        if keep is not None:
            la, lb, source = la[keep], lb[keep], source[keep]
            feats = {k: v[keep] for k, v in feats.items()}
        out.append(token_gains(la, lb, feats, groups=source, group_names=a["splits"], buckets=buckets,
                               label_a=f"{path}@{a['step']}", label_b=f"{b_path}@{b['step']}", step=a["step"]))
    for c in checks:
        c.warn()
    return _warn(out)


def _finite_tokens_of(checks: tuple, arrays: list[tuple], where: str) -> np.ndarray | None:
    """None when every per-token array is finite; else (allowed) the mask of the tokens finite in all.
    ``arrays``: (0 for run A or 1 for run B, name, values (any shape, N values), step)."""
    keep = None
    for which, name, x, step in arrays:
        ok = checks[which](name + where, x, step, "the tokens holding them left out")
        if ok is not None:
            keep = ok.ravel() if keep is None else keep & ok.ravel()
    if keep is not None and not keep.any():
        raise ProbeError(f"{checks[0].path}: no token has a finite loss, entropy and surprisal in both models")
    return keep


def _token_runs(path: str, step) -> list[dict]:
    """The token-probe windows of a run with their per-token loss and entropy at each selected step."""
    with Run(path) as run:
        if not run.has("token_loss"):
            raise ProbeError(f"{run.path}: stores no per-token losses (train a text run with --token-probe N)")
        indices = run.step_indices(step)
        fixed = {"tokens": np.asarray(run.dataset("token_probe_tokens")[...]),
                 "targets": np.asarray(run.dataset("token_probe_targets")[...]),
                 "source": np.asarray(run.dataset("token_probe_source")[...]),
                 "unigram": np.asarray(run.dataset("token_probe_unigram")[...]),
                 "bigram": np.asarray(run.dataset("token_probe_bigram")[...]),
                 "counts": np.asarray(run.dataset("token_counts")[...]), "splits": run.splits}
        loss, ent = _read(run.dataset("token_loss"), indices), _read(run.dataset("token_entropy"), indices)
        steps = run.steps
    return [{**fixed, "loss": np.asarray(l), "entropy": np.asarray(e), "step": int(steps[i])}
            for l, e, i in zip(loss, ent, indices)]


def dynamics(path: str | os.PathLike, *, step: str | int = "latest", delta: float = DELTA, smooth: int = SMOOTH,
             spike_factor: float = SPIKE_FACTOR, spike_window: int = SPIKE_WINDOW, allow_nonfinite: bool = False
             ) -> list[DynamicsResult]:
    """From the per-step loss log up to each selected snapshot: the escape step (first step where the
    loss, averaged over ``smooth`` steps, is below ln V − ``delta``) and the loss spikes (a loss above
    ``spike_factor`` x the median of the ``spike_window`` steps before it; a run of them is one).
    A NaN or inf loss in the log is an error; with ``allow_nonfinite`` the log is cut before the first
    one (so every step keeps its place)."""
    _number("delta", delta, lo=0.0)
    _number("smooth", smooth, lo=1, integer=True)
    _number("spike_factor", spike_factor, lo=1.0)
    _number("spike_window", spike_window, lo=1, integer=True)
    with Run(path) as run:
        indices = run.step_indices(step)
        losses = run.step_losses()
        vocab = int(run.dims["vocab"])
        steps = run.steps
        check = _Finite(run.path, allow_nonfinite)
    upto = losses[:max(int(steps[i]) for i in indices)]
    first = np.flatnonzero(~np.isfinite(upto))
    if first.size:   # row t of the log is step t
        check(f"step_loss (the per-step loss log, the first at step {int(first[0])})", upto, None,
              f"the log is used before step {int(first[0])}")
        losses = losses[:int(first[0])]
    check.warn()
    return _warn([loss_dynamics(losses[:int(steps[i])], vocab, delta=delta, window=smooth, spike_factor=spike_factor,
                                spike_window=spike_window, step=int(steps[i])) for i in indices])


# --- sweeps: per grid cell over seeds -----------------------------------------------------------

SEED_FIELDS = ("seed", "data_seed")
_OUTCOME = re.compile(r"^\s*(.+?)\s*(>=|<=|>|<)\s*(.+?)\s*$")
_DEFAULT_OUTCOMES = {"composite": ["acc[ood_inferential]>acc[ood_symmetric]"], "anchor": ["acc[rsn_test]>0.5"]}


def _manifest(path) -> tuple[str, dict]:
    import json

    path = os.fspath(path)
    file = os.path.join(path, "sweep.json") if os.path.isdir(path) else path
    if not os.path.exists(file):
        raise ProbeError(f"{path}: no sweep manifest (sweep.json); make one with probe-train sweep --out DIR")
    try:
        with open_regular(file, what="sweep manifest") as fh:
            manifest = json.load(fh)
        manifest["runs"], manifest["grid"]
    except FileNotFoundError:
        raise ProbeError(f"{path}: no sweep manifest (sweep.json); make one with probe-train sweep --out DIR") from None
    except (OSError, ValueError, KeyError, TypeError):
        raise ProbeError(f"{file}: not a sweep manifest written by probe-train sweep") from None
    return os.path.dirname(os.path.abspath(file)), manifest


def _run_value(file: str, run: Run, name: str, index: int, cache: dict):
    """A number of one run at snapshot ``index``: a logged metric (acc[split], loss[split],
    train_loss) or a probe's summary number (probe:name, e.g. similarity:distance_corr)."""
    if ":" in name:
        call, _, key = name.rpartition(":")   # options may hold colons (tokens=21:41), keys do not
        probe, options = _probe_call(name, call)
        if call not in cache:
            cache[call] = globals()[probe](file, step=int(run.steps[index]), **options)[0].summary()
        if key not in cache[call]:
            raise ProbeError(f"{param('metric', name)}: probe {probe} reports {', '.join(cache[call])}")
        return float(cache[call][key])
    if name == "train_loss":
        return float(run.dataset("train_loss")[index])
    m = re.fullmatch(r"(acc|loss)\[(\w+)\]", name)
    if not m:
        raise ProbeError(f"{param('metric', name)}: use acc[SPLIT], loss[SPLIT], train_loss or PROBE:NAME "
                         "(e.g. similarity:distance_corr)")
    metrics = run.metrics()
    if m.group(2) not in metrics:
        raise ProbeError(f"{param('metric', name)}: this run has splits {', '.join(metrics)}")
    return float(metrics[m.group(2)][m.group(1)][index])


_PROBES_FOR_SWEEPS = ("similarity", "pca", "align", "condense", "theory", "attention", "bias", "ood", "norms", "sinks",
                      "rank", "dynamics")
_CALL = re.compile(r"^(\w+)(?:\((.*)\))?$")


def _probe_call(name: str, call: str) -> tuple[str, dict]:
    """``similarity(tokens=logic,tensor=W_E)`` -> ("similarity", {"tokens": "logic", ...}): a probe
    and its options as the CLI spells them (numbers stay numbers)."""
    m = _CALL.match(call.strip())
    probe = m.group(1) if m else call
    if not m or probe not in _PROBES_FOR_SWEEPS:
        raise ProbeError(f"{param('metric', name)}: unknown probe '{call}' (known: {', '.join(_PROBES_FOR_SWEEPS)};"
                         " options in brackets: similarity(tokens=logic):mean_offdiag)")
    allowed = [p for p in inspect.signature(globals()[probe]).parameters if p not in ("path", "step")]
    options = {}
    # a comma starts a new option only before NAME=, so token lists (tokens=11,12,13) stay whole
    for item in filter(None, (x.strip() for x in re.split(r",\s*(?=[\w-]+=)", m.group(2) or ""))):
        k, sep, v = item.partition("=")
        k = k.strip().replace("-", "_")
        if not sep or k not in allowed:
            raise ProbeError(f"{param('metric', name)}: '{item}' is not an option of {probe} "
                             f"(options: {', '.join(allowed)})")
        options[k] = _side(v.strip()) if k not in ("tokens", "words") else v.strip()
        if isinstance(options[k], float) and options[k].is_integer():
            options[k] = int(options[k])
    return probe, options


def _side(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def sweep_summary(path: str | os.PathLike, metric=None, outcome=None, *, step: str | int = "latest"
                  ) -> list:
    """Per grid cell of a sweep (``probe-train sweep``'s folder or manifest), over its seeds: mean,
    std and 95 % bootstrap interval of each ``metric``, and the fraction of seeds with each binary
    ``outcome`` (``A>B``, ``A<B``, ``A>=B``, ``A<=B``; A, B metrics or numbers) with its Wilson
    interval. Defaults: every logged accuracy; composite task: acc[ood_inferential] >
    acc[ood_symmetric]; anchor task: acc[rsn_test] > 0.5. ``step``: latest (finished runs only) or a
    step number every run has."""
    from .analyses.uncertainty import CellSummary, describe, proportion

    folder, manifest = _manifest(path)
    metrics = [metric] if isinstance(metric, str) else list(metric or [])
    outcomes = [outcome] if isinstance(outcome, str) else list(outcome or [])
    parsed = {}
    for o in outcomes:
        m = _OUTCOME.match(o)
        if not m:
            raise ProbeError(f"{param('outcome', o)}: use A>B, A<B, A>=B or A<=B with metrics or numbers")
        parsed[o] = (_side(m.group(1)), m.group(2), _side(m.group(3)))
    cell_keys = [k for k in manifest["grid"] if k not in SEED_FIELDS]
    cells: dict[tuple, dict] = {}
    left_out = []
    for r in manifest["runs"]:
        file = os.path.join(folder, r["path"])
        if r.get("status") == "failed" or not os.path.exists(file):
            left_out.append(r["label"])
            continue
        with Run(file) as run:
            if str(step) == "latest" and int(run.steps[-1]) != int(run.config.get("steps", -1)):
                left_out.append(r["label"])
                continue
            index = run.step_indices(step)[0] if str(step) != "latest" else run.n_snapshots - 1
            kind = run.task.get("kind")
            if not metrics:
                metrics = [f"acc[{s}]" for s in run.splits]
            if not parsed:
                parsed = {o: (_side(a), op, _side(b)) for o in _DEFAULT_OUTCOMES.get(kind, [])
                          for a, op, b in [_OUTCOME.match(o).groups()]}
            names = set(metrics) | {x for a, _, b in parsed.values() for x in (a, b) if isinstance(x, str)}
            cache: dict = {}
            values = {n: _run_value(file, run, n, index, cache) for n in sorted(names)}
            at = int(run.steps[index])
        key = tuple(r["point"].get(k) for k in cell_keys)
        cell = cells.setdefault(key, {"runs": [], "values": [], "steps": set()})
        cell["runs"].append(r["path"])
        cell["values"].append(values)
        cell["steps"].add(at)
    if left_out:
        warnings.warn(f"{len(left_out)} run(s) left out (failed, missing or unfinished): "
                      f"{', '.join(left_out[:5])}{', ...' if len(left_out) > 5 else ''}", ProbeWarning, stacklevel=2)
    if not cells:
        raise ProbeError(f"{path}: no finished run to summarise")

    def holds(values, a, op, b):
        x = values[a] if isinstance(a, str) else a
        y = values[b] if isinstance(b, str) else b
        if not (math.isfinite(x) and math.isfinite(y)):
            return None
        return {">": x > y, "<": x < y, ">=": x >= y, "<=": x <= y}[op]

    out = []
    for key, c in cells.items():
        out.append(CellSummary(
            step=next(iter(c["steps"])) if len(c["steps"]) == 1 else None, cell=dict(zip(cell_keys, key)),
            runs=c["runs"], stats={m: describe([v[m] for v in c["values"]]) for m in metrics},
            outcomes={o: proportion([holds(v, *parsed[o]) for v in c["values"]]) for o in parsed}))
    return out
