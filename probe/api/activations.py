"""The probes of a forward pass (a snapshot's stored activations, or a checkpoint run over a
text): norms, sinks and tokens."""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

import numpy as np

from ..analyses.norms import SATURATION
from ..analyses.sinks import MIN_QUERY, SINK_THRESHOLD
from ..analyses.tokens import BUCKETS
from .._limits import MAX_MEMORY, budgeted
from ..errors import ProbeError, ProbeWarning, param
from ..format import P, Run, is_snapshot_file
from ..readers.source import open_source

from ._common import (
    MAX_TOKENS, WINDOW, _Finite, _finite_sequences, _finite_sites, _finite_tokens_of, _forward, _number, _read,
    _text_only_for_checkpoints, _warn, _whole
)


__all__ = ["norms", "sinks", "tokens"]   # the probes of this module (probe.registry)

if TYPE_CHECKING:   # the result classes, for annotations; the math is imported where it is used
    from ..analyses.norms import NormsResult
    from ..analyses.sinks import SinksResult
    from ..analyses.tokens import TokensResult


@budgeted
def norms(path: str | os.PathLike, *, step: str | int = "latest", saturation: float = SATURATION,
          text: str | None = None, window: int = WINDOW, max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False,
          max_memory: int | str | None = MAX_MEMORY
          ) -> list[NormsResult]:
    """ε share and effective gain of every normalisation site, per step (paper 4's ε-saturation).

    A norm divides its input by sqrt(m + ε), with m = mean(x²) per token for RMSNorm (var(x) for
    LayerNorm). With tiny activations ε is no longer negligible and the layer scales its input down
    instead of normalising it. The ε share s = ε / (m + ε), with m the mean over the probe tokens, is 0
    for a clean norm and 1 for a layer that only divides by sqrt(ε). Snapshot files: from the stored
    norm statistics; checkpoints: by running the model on ``text``.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, or a checkpoint file or folder (with ``text``), or
        ``hf:ORG/NAME@REV``.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    saturation : float, default 0.1
        ε share at or above which a site counts as saturated (between 0 and 1).
    text : str, optional
        Checkpoints only: a text file to run the model on (with its tokenizer files); a snapshot file
        stores what it needs, and ``text`` is ignored there (with a warning).
    window : int, default 128
        Checkpoints: tokens per window the text is cut into (at least 2).
    max_tokens : int, default 4096
        Checkpoints: tokens of the text used at most (at least 2).
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: a site whose statistics or gain hold one is
        left out. A ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[NormsResult]
        One result per selected step: ``sites`` (k,), ``mean_square`` (k,), ``eps_share`` (k,),
        ``effective_gain`` (k,), ``gain`` (k,) or ``None``, and ``saturated`` (the saturated sites), where
        k is the number of norm sites.

    Raises
    ------
    ProbeError
        A snapshot file without norm statistics (a run without norms, or written before schema 1.3); a
        checkpoint without ``text`` or without normalisation layers; a bad parameter or step; NaN or inf
        (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.norms("run.h5", step="all")
    >>> [(r.step, r.summary()["max_eps_share"]) for r in res]
    >>> probe.norms("model/", text="corpus.txt")[0].saturated
    """
    from ..analyses.norms import gain_rms, norm_saturation

    _number("saturation", saturation, lo=0.0, hi=1.0)
    path = os.fspath(path)
    if not is_snapshot_file(path):
        fw = _forward(path, text, "norms", step, window=window, max_tokens=max_tokens)
        if not fw.norm_sites:
            raise ProbeError(f"{path}: the model has no normalisation layers")
        eps = set(fw.norm_eps)
        if len(eps) > 1:
            warnings.warn(f"{path}: the norms use several epsilons ({sorted(eps)}); the largest is reported",
                          ProbeWarning, stacklevel=3)
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
        g = np.array([gain_rms(gains[s][k]) if s in gains else 1.0 for s in sites])
        for s in gains:   # a gain is a weight: named as stored, like every tensor
            ok = check(s, gains[s][k], int(steps[i]), "its site left out")
            if ok is not None:
                g[sites.index(s)] = np.nan
        kept, m, gk, mk = _finite_sites(check, int(steps[i]), sites, ms[k], g, med[k], "")
        out.append(norm_saturation(kept, m, eps, gain=gk, median_square=mk, saturation=saturation,
                                   step=int(steps[i])))
    check.warn()
    return _warn(out)


@budgeted
def sinks(path: str | os.PathLike, *, step: str | int = "latest", min_query: int = MIN_QUERY,
          sink_threshold: float = SINK_THRESHOLD, text: str | None = None, window: int = WINDOW,
          max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False,
          max_memory: int | str | None = MAX_MEMORY) -> list[SinksResult]:
    """Attention sinks per layer and head: attention parked on the first position, per step.

    For queries at positions i >= ``min_query`` the sink mass is the attention on position 0 (causal
    averaging would give 1 / (i + 1)); a head is a sink head when its mean sink mass reaches
    ``sink_threshold``. Sinks come with a first position whose residual-stream norm stands far above the
    others' (the "massive activation"), reported against the median of the other positions. Snapshot
    files: the stored probe batch; checkpoints: the model run on ``text``.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``, or a checkpoint file or folder (with ``text``), or
        ``hf:ORG/NAME@REV``.
    step : str or int, default "latest"
        The snapshots: ``"latest"``, ``"all"``, a step number, a half-open range ``"A:B"`` or a comma list of
        these (``"100,500,latest"``). A checkpoint holds one step.
    min_query : int, default 4
        The first query position counted (at least 1).
    sink_threshold : float, default 0.3
        Mean sink mass at or above which a head is a sink head (between 0 and 1).
    text : str, optional
        Checkpoints only: a text file to run the model on (with its tokenizer files); a snapshot file
        stores what it needs, and ``text`` is ignored there (with a warning).
    window : int, default 128
        Checkpoints: tokens per window the text is cut into (at least 2).
    max_tokens : int, default 4096
        Checkpoints: tokens of the text used at most (at least 2).
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the sequences (windows) holding one in the
        maps or the residual norms are left out. A ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[SinksResult]
        One result per selected step: ``sink_mass`` and ``sink_heads`` of shape (layers, heads),
        ``uniform_mass``, and ``first_norm_ratio`` of shape (blocks,) (``None`` where the residual norms
        are not stored).

    Raises
    ------
    ProbeError
        A run without attention maps (an Emb-MLP); a checkpoint without ``text``; a bad parameter or
        step; NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> r = probe.sinks("run.h5")[0]
    >>> r.sink_mass.shape                         # (layers, heads)
    >>> r.summary()["sink_head_fraction"]
    """
    from ..analyses.sinks import attention_sinks

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


@budgeted
def tokens(path: str | os.PathLike, other: str | os.PathLike | None = None, *, step: str | int = "latest",
           step_b: str | int | None = None, buckets: int = BUCKETS, text: str | None = None, window: int = WINDOW,
           max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False,
           max_memory: int | str | None = MAX_MEMORY) -> list[TokensResult]:
    """Where a gain comes from, token by token: the per-token loss difference of two models, bucketed.

    ΔL = L_A - L_B per token between run A (``path`` at ``step``) and run B (``other``, or ``path`` again at
    ``step_b``) on identical held-out tokens (negative: A predicts the token better). The tokens are cut
    into ``buckets`` quantile bins of each feature (token frequency, unigram and bigram surprisal, how much
    the context lowers the loss, the models' predictive entropy); each bin reports its mean ΔL and its
    share of the total gain Σ(-ΔL). Snapshot files: the stored token-probe windows (a text run trained
    with ``--token-probe N``); checkpoints (two Hugging Face folders): the models run on ``text``.

    Parameters
    ----------
    path : str or os.PathLike
        Run A: a snapshot file, or a checkpoint (with ``other`` and ``text``).
    other : str or os.PathLike, optional
        Run B, of the same kind as A; ``None``: ``path`` again, at ``step_b``.
    step : str or int, default "latest"
        A's snapshots (see [`similarity`][probe.api.weights.similarity]); several, or a numbered one, make a trajectory.
    step_b : str or int, optional
        B's step; by default B's latest step, or with several or a numbered ``step`` the same steps as A.
    buckets : int, default 4
        Quantile bins per feature (at least 1).
    text : str, optional
        Checkpoints only: a text file to run the model on (with its tokenizer files); a snapshot file
        stores what it needs, and ``text`` is ignored there (with a warning).
    window : int, default 128
        Checkpoints: tokens per window the text is cut into (at least 2).
    max_tokens : int, default 4096
        Checkpoints: tokens of the text used at most (at least 2).
    allow_nonfinite : bool, default False
        Compute on the finite part instead of raising on NaN or inf: the tokens holding one (a loss, an entropy or
        an n-gram surprisal, in either model) are left out. A ``ProbeWarning`` says what was left out.
    max_memory : int or str, optional
        The memory budget of what the probe reads and computes (bytes, or ``"8GiB"``, ``"512MB"``): a tensor that
        needs more is refused before it is read. ``None``: half of the memory this process can have (physical
        memory, or a lower cgroup or ``ulimit -v`` limit).

    Returns
    -------
    Results[TokensResult]
        One result per step of A: ``n``, ``mean_delta``, ``total_gain``, ``buckets`` ({feature: one dict
        per bin}) and ``groups`` ({source: numbers}).

    Raises
    ------
    ProbeError
        One model only (no ``other`` and no ``step_b``); a snapshot file and a checkpoint; windows or
        tokenizations that differ; a run without per-token losses; NaN or inf (without
        ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> r = probe.tokens("run.h5", step=2000, step_b=500)[0]
    >>> r.mean_delta, r.total_gain
    >>> [(b["bucket"], b["gain_share"]) for b in r.buckets["context_benefit"]]
    >>> probe.tokens("model-a/", "model-b/", text="corpus.txt")[0].summary()
    """
    from ..analyses.tokens import ngram_surprisal, token_features, token_gains

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
        count, unigram, bigram = ngram_surprisal(fa.tokens, fa.targets, fa.vocab_size)
        warnings.warn("n-gram statistics of a checkpoint comparison come from the text itself (no training counts)",
                      ProbeWarning, stacklevel=3)
        la, lb = fa.token_loss.ravel(), fb.token_loss.ravel()
        feats = token_features(count, unigram, bigram, la, lb, fa.token_entropy.ravel(), fb.token_entropy.ravel())
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


def _token_runs(path: str, step) -> list[dict]:
    """The token-probe windows of a run with their per-token loss and entropy at each selected step."""
    with Run(path) as run:
        if not run.has("token_loss"):
            raise ProbeError(f"{run.path}: stores no per-token losses (train a text run with --token-probe N)")
        indices = run.step_indices(step)
        fixed = {"tokens": _whole(run.dataset("token_probe_tokens")),
                 "targets": _whole(run.dataset("token_probe_targets")),
                 "source": _whole(run.dataset("token_probe_source")),
                 "unigram": _whole(run.dataset("token_probe_unigram")),
                 "bigram": _whole(run.dataset("token_probe_bigram")),
                 "counts": _whole(run.dataset("token_counts")), "splits": run.splits}
        loss, ent = _read(run.dataset("token_loss"), indices), _read(run.dataset("token_entropy"), indices)
        steps = run.steps
    return [{**fixed, "loss": np.asarray(l), "entropy": np.asarray(e), "step": int(steps[i])}
            for l, e, i in zip(loss, ent, indices)]
