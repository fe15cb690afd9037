"""The probes of what only probe-train's snapshot files hold (the task, the per-split losses, the
probe batch's attention, the per-step loss log): theory, attention, bias, ood and dynamics."""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import numpy as np

from ..analyses.dynamics import DELTA, SPIKE_FACTOR, SPIKE_WINDOW, WINDOW as SMOOTH
from ..analyses._stats import finite_rows, nonfinite
from .._limits import MAX_MEMORY, budgeted, check_total
from ..errors import ProbeError, param
from ..format import P, Run
from ..readers.source import open_source

from ._common import (
    _Finite, _enough, _finite_sequences, _fits, _group_of, _layer_check, _number, _read, _warn, _whole, select_tokens
)


__all__ = ["theory", "ood", "attention", "bias", "dynamics"]   # the probes of this module (probe.registry)

if TYPE_CHECKING:   # the result classes, for annotations; the math is imported where it is used
    from ..analyses.attention import AttentionResult
    from ..analyses.bias import BiasResult
    from ..analyses.dynamics import DynamicsResult
    from ..analyses.ood import OODResult
    from ..analyses.theory import TheoryResult


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
    path : str or os.PathLike
        A snapshot file written by ``probe-train``.
    tokens : str or sequence of int or str, optional
        The tokens: group names, ids (``"3,5,7"``), a half-open range (``"11:21"``) or a list of ids and group
        names. ``None`` (and no ``words``): the ``reasoning`` group.
    words : str or list of str, optional
        Words instead of ``tokens`` (comma-separated or a list), looked up in a text run's stored vocabulary or a
        checkpoint's tokenizer files.
    words_file : str, optional
        A text file of words, selected after ``words``.
    anchor : int, optional
        The token s0 of the profile, one of the chosen tokens (default: the middle one).
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    dim : int, optional
        Length of the reconstructed vectors (default: the vocabulary size, where the Gaussian bump of
        P^s lives).
    seed : int, default 0
        Seed of the reconstruction's noise.
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the tokens whose embedding row or row of P^s
        holds one are left out (the default anchor moves to the middle of the tokens left; a chosen anchor left
        out is an error). A ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

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
    from ..analyses.theory import theory as _theory

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
        Pmat = _whole(run.dataset("label_dist"))
        kinds = ["reasoning" if g == "reasoning" else "key" if g == "keys" else g
                 for g in _group_of(run.groups, ids, labels)]
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


@budgeted
def attention(path: str | os.PathLike, *, layer: int | None = None, step: str | int = "latest",
              allow_nonfinite: bool = False,
              max_memory: int | str | None = MAX_MEMORY) -> list[AttentionResult]:
    """How close attention on the stored probe batch is to causal averaging, per layer and head, per step.

    Causal averaging gives row i of an attention map 1/i on each of its i keys. The result holds the mean
    distance from it, the rows' entropy against the uniform one, and where the last position looks: at
    the key token, at the anchors after it, and at each position.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``.
    layer : int, optional
        One layer (default: every layer).
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the probe sequences holding one (in any layer
        or head) are left out. A ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[AttentionResult]
        One result per selected step: ``avg_dev``, ``entropy_ratio``, ``last_to_key`` and
        ``last_to_anchors`` of shape (L, H), ``last_profile`` (L, H, T) and ``mean_map`` (L, H, T, T),
        where L is the number of layers (1 with ``layer``), H of heads and T the sequence length.

    Raises
    ------
    ProbeError
        A run without attention maps (an Emb-MLP); ``layer`` out of range; an unknown step; NaN or inf
        (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.attention("run.h5", layer=1)
    >>> res[0].avg_dev                            # (1, H)
    >>> res[0].mean_map.shape                     # (1, H, T, T)
    """
    from ..analyses.attention import attention_stats

    if layer is not None:
        _number("layer", layer, integer=True)
    with Run(path) as run:
        if layer is not None:
            _layer_check(run, layer)
        if P["attention"] not in run.h5:
            raise ProbeError(f"{run.path}: holds no attention maps (an Emb-MLP run?)")
        indices = run.step_indices(step)
        maps = _read(run.dataset("attention"), indices)
        key_pos = _whole(run.dataset("probe_key_pos"))
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


@budgeted
def bias(path: str | os.PathLike, splits: tuple[str, str] | None = None, *, step: str | int = "latest",
         allow_nonfinite: bool = False,
         max_memory: int | str | None = MAX_MEMORY) -> list[BiasResult]:
    """Reasoning bias ΔL = (L_A - L_B) / L_B from the stored per-split losses, per step.

    ΔL > 0 when split B (reasoning) is learned faster than split A (memory). Below a loss of 1e-3 of
    split B the ratio divides by next to nothing, and a warning says so.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``.
    splits : tuple of (str, str), optional
        The splits (A, B); by default the task's pair (anchor task: ``mem``, ``rsn_train``; text runs:
        ``story``, ``logic``).
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the steps holding one are left out. A
        ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[BiasResult]
        One result per selected step (without the steps left out): ``split_a``, ``split_b``,
        ``loss_a``, ``loss_b`` and ``delta_L``.

    Raises
    ------
    ProbeError
        Not exactly two ``splits``; an unknown split or step; a loss that is NaN or inf (without
        ``allow_nonfinite``), or no step left with it.

    Examples
    --------
    >>> import probe
    >>> [(r.step, r.delta_L) for r in probe.bias("run.h5", step="all")]
    >>> probe.bias("run.h5", splits=("mem", "rsn_test"))[0].delta_L
    """
    from ..analyses.bias import reasoning_bias

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


@budgeted
def ood(path: str | os.PathLike, *, step: str | int = "latest", full: bool = False, threads: int = 0,
        progress=None, allow_nonfinite: bool = False,
        max_memory: int | str | None = MAX_MEMORY) -> list[OODResult]:
    """Evaluate the stored model on every split, and per anchor combination on the held-out data, per step.

    The model is rebuilt from the snapshot's weights (this needs ``torch``: ``probe_train`` evaluates it).
    By default each split is evaluated on the sequences the trainer used for its metrics, so the numbers
    equal the logged ones. For the composite task the result also holds the accuracy against the
    inferential and the symmetric target on the unseen anchor pair.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    full : bool, default False
        Evaluate every sequence of each split, not only the trainer's metric sequences.
    threads : int, default 0
        With several steps, snapshots evaluated at once, one torch thread each (0: one per CPU core);
        the numbers do not depend on it.
    progress : callable, optional
        Called with a label (``"step 400 (3/9)"``) as each snapshot is evaluated.
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the model runs with the weights as stored,
        and the sequences whose logits are not finite are left out of each split's loss and accuracy (a split left
        with none: NaN). A ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[OODResult]
        One result per selected step: ``splits`` ({split: {"loss", "acc", "n"}}), ``combos`` (the
        held-out split per anchor combination) and ``targets`` (composite task).

    Raises
    ------
    ProbeError
        An unknown step; a weight holding NaN or inf, or non-finite logits (finite weights can overflow
        in the forward pass; the message names the split and how many sequences), without
        ``allow_nonfinite``.

    Examples
    --------
    >>> import probe
    >>> res = probe.ood("run.h5", step="all")
    >>> [(r.step, r.splits["rsn_test"]["acc"]) for r in res]
    >>> res[-1].combos                            # {"11,13": {"loss": ..., "acc": ..., "n": ...}, ...}
    """
    _number("threads", threads, lo=0, integer=True)
    from probe_train import evaluate as E  # probe's one door into the trainer (torch is imported here)

    with Run(path) as run:
        cfg = E.run_config(run)
        indices = run.step_indices(step)
        _model_fits(run, min(threads or os.cpu_count() or 1, len(indices)))
        task = E.load_task(run)
        steps = run.steps
        held_out = "rsn_test" if cfg.task == "anchor" else "ood_inferential"
        inputs = {split: E.split_inputs(task, split, full) for split in task.splits}
        check, nonfinite_at = _Finite(run.path, allow_nonfinite), set()

        def check_weights(name, part, stack):   # as read, before a model is built from them
            for k, i in enumerate(part):
                if check(name, stack[k], int(steps[i]), "the model is evaluated with them") is not None:
                    nonfinite_at.add(int(i))

        done = []

        def evaluated(i):   # the progress label: the snapshot's step and how far along, not its index
            done.append(i)
            progress(f"step {int(steps[i])} ({len(done)}/{len(indices)})")

        out = E.map_models(run, indices, lambda i, model: _ood_one(E, model, task, cfg, held_out, inputs,
                                                                   int(steps[i]), check, i not in nonfinite_at),
                           threads=threads or os.cpu_count() or 1, progress=progress and evaluated,
                           check=check_weights)
    check.warn()
    return _warn(out)


def _model_fits(run: Run, workers: int) -> None:
    """The memory budget's check of the models ood rebuilds from the parameters, ``workers`` at once (each
    read as float32, then the model's own copy): its largest parameter by name, then all of them."""
    weights = run.weights()
    params = {n: shape for n, shape in run.tensors().items() if n not in weights}   # the links left out
    if not params:
        return
    largest = max(params, key=lambda n: math.prod(params[n]))
    _fits(run.tensor(largest), 1)
    check_total(run.path, f"the model rebuilt from its {len(params)} parameters ({workers} at once)",
                4 * 2 * workers * sum(math.prod(shape) for shape in params.values()))


def _ood_one(E, model, task, cfg, held_out: str, inputs: dict, step: int, check: _Finite,
             finite_weights: bool) -> OODResult:
    from ..analyses.ood import OODResult, loss_acc

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
    if held_out in logits_of:   # a text run's splits (story, logic) hold no anchor combinations
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


@budgeted
def dynamics(path: str | os.PathLike, *, step: str | int = "latest", delta: float = DELTA, smooth: int = SMOOTH,
             spike_factor: float = SPIKE_FACTOR, spike_window: int = SPIKE_WINDOW, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY
             ) -> list[DynamicsResult]:
    """When the loss escapes its initial plateau, and how often it spikes, from the per-step loss log.

    For each selected snapshot the log up to its step is read. The escape step is the first step at which
    the loss, averaged over ``smooth`` steps, is below ln V - ``delta`` (ln V: the loss of a uniform guess
    over the vocabulary). A spike is a loss above ``spike_factor`` times the median of the
    ``spike_window`` steps before it; a run of such steps is one spike.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    delta : float, default 0.5
        How far below ln V the smoothed loss must fall to have escaped (nats, at least 0).
    smooth : int, default 10
        Steps the loss is averaged over for the escape (at least 1).
    spike_factor : float, default 1.3
        A spike's loss over the running median (at least 1).
    spike_window : int, default 50
        Steps of the running median (at least 1).
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the log is cut before the first one (so every
        step keeps its place). A ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[DynamicsResult]
        One result per selected step: ``escape_step`` (``None``: not escaped), ``spikes``,
        ``spike_steps``, ``plateau``, ``initial_loss`` and ``final_loss``.

    Raises
    ------
    ProbeError
        A file without the per-step loss log (written before schema 1.3); a bad parameter or step; a
        loss that is NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> d = probe.dynamics("run.h5")[0]
    >>> d.escape_step, d.spikes, d.spike_steps
    """
    from ..analyses.dynamics import loss_dynamics

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
