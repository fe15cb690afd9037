"""The Python API behind the ``probe`` CLI: each function takes a path and returns results.

Functions that accept ``step`` return one result per selected snapshot (``latest``,
``all``, a step number, or ``A:B``); with several steps each dataset is read once.
"""
from __future__ import annotations

import os

import numpy as np

from .analyses.align import AlignResult, align as _align
from .analyses.attention import AttentionResult, attention_stats
from .analyses.bias import BiasResult, reasoning_bias
from .analyses.condense import CondenseResult, condense as _condense
from .analyses.ood import OODResult, loss_acc
from .analyses.pca import PCAResult, pca as _pca
from .analyses.similarity import BLOCKED_ABOVE, SimilarityResult, cosine_similarity, cosine_similarity_blocked
from .analyses.spectrum import SpectrumResult, spectrum as _spectrum
from .analyses.theory import TheoryResult, theory as _theory
from .errors import ProbeError
from .snapshot import P, Run, is_snapshot_file, read_rows
from .sources import open_source
from .tokens import parse_tokens
from .schema_check import validate

__all__ = ["Run", "info", "token_text", "similarity", "validate", "select_tokens", "pca", "align", "condense", "theory",
           "ood", "attention", "bias", "spectrum"]


def info(path: str | os.PathLike) -> dict:
    """Summary of a snapshot file: configuration, steps, token groups, tensors and shapes."""
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
            "task": run.task,
            "dims": run.dims,
            "groups": {k: [int(i) for i in v] for k, v in groups.items()},
            "group_strings": {} if strings is None else {k: [strings[i] for i in v] for k, v in groups.items()},
            "tensors": {k: list(v) for k, v in run.tensors().items()},
            "metrics": {s: {m: float(v[-1]) for m, v in ms.items() if len(v)} for s, ms in run.metrics().items()},
        }


def token_text(path: str | os.PathLike, ids) -> list[str] | None:
    """Text of each token id: the strings a text run stores, else the checkpoint's tokenizer
    files (see ``probe.words``); ``None`` when neither exists (synthetic tasks)."""
    if is_snapshot_file(path):
        with Run(path) as run:
            strings = run.token_strings()
        return None if strings is None else [strings[int(i)] for i in ids]
    from .words import ids_to_text

    return ids_to_text(str(path), ids)


def select_tokens(run: Run, tokens: str, tensor: str = "token_embedding") -> tuple[np.ndarray, list[str]]:
    """Ids chosen by a ``--tokens`` spec, checked against the rows of ``tensor``."""
    if tokens is None:
        raise ProbeError("--tokens is required")
    rows = run.tensor(tensor).shape[1]
    return parse_tokens(tokens, run.groups, rows)


def _read(ds, indices: list[int], rows=None) -> list[np.ndarray]:
    """ds at each snapshot index (optionally only ``rows``); one read when the indices are contiguous."""
    if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
        sl = slice(indices[0], indices[-1] + 1)
        return list(ds[sl] if rows is None else read_rows(ds, sl, rows))
    return [ds[i] if rows is None else read_rows(ds, i, rows) for i in indices]


def _group_of(run: Run, ids: np.ndarray, labels: list[str]) -> list[str]:
    """Group of each id: its --tokens group, else the first stored group holding it, else ''."""
    groups = run.groups
    out = []
    for i, lab in zip(ids, labels):
        out.append(lab or next((g for g, v in groups.items() if i in v), ""))
    return out


def similarity(path: str | os.PathLike, tokens: str = "reasoning", *, tensor: str = "token_embedding",
               step: str | int = "latest", groups: str | None = None, mapping: str | None = None
               ) -> list[SimilarityResult]:
    """Cosine-similarity structure of the chosen rows of ``tensor`` at each selected step.

    Only the requested rows are read from the file.
    """
    with open_source(path, groups, mapping) as run:
        ids, groups = select_tokens(run, tokens, tensor)
        indices = run.step_indices(step)
        vectors = _read(run.tensor(tensor), indices, ids)
        steps = run.steps
    fn = cosine_similarity if len(ids) <= BLOCKED_ABOVE else cosine_similarity_blocked
    return [fn(v.reshape(len(ids), -1), ids, step=int(steps[i]), groups=groups) for v, i in zip(vectors, indices)]


def pca(path: str | os.PathLike, tokens: str = "keys,reasoning,memory", *, tensor: str = "token_embedding",
        step: str | int = "latest", n_components: int = 3, groups: str | None = None,
        mapping: str | None = None) -> list[PCAResult]:
    """PCA of the chosen token vectors with an order score per numeric group."""
    with open_source(path, groups, mapping) as run:
        ids, labels = select_tokens(run, tokens, tensor)
        groups = _group_of(run, ids, labels)
        indices = run.step_indices(step)
        vectors = _read(run.tensor(tensor), indices, ids)
        steps = run.steps
    return [_pca(v.reshape(len(ids), -1), ids, groups, n_components, step=int(steps[i]))
            for v, i in zip(vectors, indices)]


def _layer_check(run: Run, layer: int, head: int | None = None) -> None:
    layers = int(run.dims.get("layers", 0))
    if layers == 0:
        raise ProbeError(f"{run.path}: the model has no attention layers")
    if not 0 <= layer < layers:
        raise ProbeError(f"layer {layer} out of range: the model has layers 0..{layers - 1}")
    heads = int(run.dims.get("heads", 1))
    if head is not None and not 0 <= head < heads:
        raise ProbeError(f"head {head} out of range: the model has heads 0..{heads - 1}")


def align(path: str | os.PathLike, layer: int = 0, head: int = 0, *, step: str | int = "latest",
          top_k: int = 3, groups: str | None = None, mapping: str | None = None) -> list[AlignResult]:
    """Singular vectors of W_V (and W_V W_O) of one head against every token embedding."""
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
    return [_align(v[head], o[head], e, groups, top_k, layer, head, step=int(steps[i]))
            for v, o, e, i in zip(wv, wo, emb, indices)]


def _neurons(W: np.ndarray) -> np.ndarray:
    """Neuron input-weight vectors of an x @ W tensor: (in, out) -> (out, in); per head (H, in, e) -> (H*e, in)."""
    if W.ndim == 3:
        return np.concatenate([w.T for w in W])
    if W.ndim == 2:
        return W.T
    raise ProbeError(f"cannot group neurons of a {W.ndim}-D tensor")


def condense(path: str | os.PathLike, *, tensor: str = "token_embedding", tokens: str | None = None,
             neurons: str | None = "layer0/W_Q", threshold: float = 0.7, step: str | int = "latest",
             top_k: tuple[int, ...] = (1, 2, 5), groups: str | None = None, mapping: str | None = None
             ) -> list[CondenseResult]:
    """Covariance spectrum of ``tensor``'s rows (all, or ``tokens``), neuron groups of ``neurons``
    and the singular values of every weight matrix."""
    with open_source(path, groups, mapping) as run:
        ids = select_tokens(run, tokens, tensor)[0] if tokens else None
        indices = run.step_indices(step)
        vectors = _read(run.tensor(tensor), indices, ids)
        if neurons == "layer0/W_Q" and int(run.dims.get("layers", 0)) == 0:
            neurons = None  # the default, on a model without attention (the Emb-MLP)
        neuron_w = _read(run.tensor(neurons), indices) if neurons else [None] * len(indices)
        layer_w = {n: _read(run.tensor(n), indices) for n in run.weight_matrices()}
        steps = run.steps
    out = []
    for k, i in enumerate(indices):
        v = vectors[k].reshape(vectors[k].shape[0], -1)
        nw = None if neuron_w[k] is None else _neurons(neuron_w[k])
        out.append(_condense(v, top_k, nw, neurons, threshold, {n: w[k] for n, w in layer_w.items()},
                             step=int(steps[i])))
    return out


def theory(path: str | os.PathLike, tokens: str = "reasoning", *, anchor: int | None = None,
           step: str | int = "latest", dim: int | None = None, seed: int = 0) -> list[TheoryResult]:
    """Measured embedding cosines against the P^s prediction and paper 1's eq. 14 reconstruction."""
    with Run(path) as run:
        ids, labels = select_tokens(run, tokens)
        if P["label_dist"] not in run.h5:
            raise ProbeError(f"{run.path}: holds no label distribution P^s ('{P['label_dist']}')")
        Pmat = np.asarray(run.dataset("label_dist")[...])
        groups = _group_of(run, ids, labels)
        kinds = ["reasoning" if g == "reasoning" else "key" if g == "keys" else g for g in groups]
        if anchor is None:
            anchor = int(ids[len(ids) // 2])
        if anchor not in ids:
            raise ProbeError(f"--anchor {anchor} is not among the chosen tokens")
        indices = run.step_indices(step)
        vectors = _read(run.tensor("token_embedding"), indices, ids)
        d_m = int(run.dims["d_model"])
        gamma = float(run.config.get("gamma", 0.5))
        steps = run.steps
    return [_theory(v, Pmat, ids, kinds, anchor, d_m, gamma, dim, seed, step=int(steps[i]))
            for v, i in zip(vectors, indices)]


def attention(path: str | os.PathLike, *, layer: int | None = None, step: str | int = "latest"
              ) -> list[AttentionResult]:
    """How close attention on the stored probe batch is to causal averaging, per layer and head."""
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
    out = []
    for A, i in zip(maps, indices):
        if layer is not None:
            A = A[layer:layer + 1]
        out.append(attention_stats(A, key_pos, n_anchors, step=int(steps[i])))
    return out


def bias(path: str | os.PathLike, splits: tuple[str, str] | None = None, *, step: str | int = "all"
         ) -> list[BiasResult]:
    """Reasoning bias Delta L = (L_A - L_B) / L_B from the stored per-split losses."""
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
    return reasoning_bias(m[splits[0]]["loss"][indices], m[splits[1]]["loss"][indices], steps[indices],
                          splits[0], splits[1])


def ood(path: str | os.PathLike, *, step: str | int = "latest", full: bool = False) -> list[OODResult]:
    """Rebuild the model from the stored weights and evaluate every split, per anchor combination on
    the held-out data; for the composite task also the inferential and symmetric accuracy.

    By default each split is evaluated on the sequences the trainer used for its metrics, so the
    numbers equal the logged ones; ``full`` evaluates every sequence of each split.
    """
    import torch

    from train.evaluate import evaluate
    from train.tasks import make_task

    from .models import load_model, run_config

    with Run(path) as run:
        cfg = run_config(run)
        task = make_task(cfg)
        indices = run.step_indices(step)
        steps = run.steps
        models = [load_model(run, i)[0] for i in indices]
    held_out = "rsn_test" if cfg.task == "anchor" else "ood_inferential"
    out = []
    for model, i in zip(models, indices):
        res = OODResult(step=int(steps[i]))
        logits_of = {}
        for split in task.splits:
            idx = task.indices(split) if full else task.eval_indices(split)
            loss, acc, logits = evaluate(model, torch.as_tensor(task.tokens[idx]),
                                         torch.as_tensor(task.key_pos[idx]), torch.as_tensor(task.labels[idx]))
            logits_of[split] = (idx, logits.numpy())
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
        out.append(res)
    return out


def _as_matrix(name: str, W: np.ndarray) -> np.ndarray:
    """Per-head tensors back to the full linear map: (H, d, e) -> (d, H*e); W_O (H, e, d) -> (H*e, d)."""
    if W.ndim == 3:
        if name.endswith("W_O"):
            return W.reshape(-1, W.shape[-1])
        return W.transpose(1, 0, 2).reshape(W.shape[1], -1)
    return W


def spectrum(path: str | os.PathLike, *, step: str | int = "latest", progress=None) -> list[SpectrumResult]:
    """Spectral metrics (WeightWatcher's: spectral norm, Frobenius norm, stable rank, alpha, ...)
    of every linear layer, one matrix in memory at a time.

    Snapshot files: every weight matrix parameter (per-head tensors as the full map); other
    checkpoints, whatever their layout: every 2-D tensor, in natural order (layer 2 before 10).
    """
    out = []
    if is_snapshot_file(path):
        with Run(path) as run:
            indices = run.step_indices(step)
            names = run.weight_matrices() + [n for n in run.tensors() if n in ("W_E", "W_pos", "W_U")]
            names = list(dict.fromkeys(sorted(names, key=_natural)))
            for i in indices:
                mats = {}
                for n in names:
                    mats[n] = _as_matrix(n, run.read(n, i))
                    if progress:
                        progress(n)
                out.append(_spectrum(mats, step=int(run.steps[i])))
        return out
    # any checkpoint, known layout or not: every 2-D tensor, in natural order
    from .checkpoints import open_checkpoint

    src = open_checkpoint(path)
    if str(step) not in ("latest", "all", str(src.step)):
        raise ProbeError(f"{path}: a checkpoint holds one step; use --step latest")
    names = sorted((n for n, s in src.shapes().items() if len(s) == 2 and min(s) > 1), key=_natural)
    mats = {}
    for n in names:
        mats[n] = src.read(n)
        if progress:
            progress(n)
    return [_spectrum(mats, step=src.step if src.step is not None else 0)]


def _natural(name: str):
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]
