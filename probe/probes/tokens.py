"""The ``tokens`` probe: per-token loss difference."""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..printable import terminal
from ..analyses.tokens import BUCKETS, TokensResult, ngram_surprisal, token_features, token_gains
from ..api.checks import with_warnings
from ..api.finite import Finite
from ..chart.panel import Panel
from ..errors import param, ProbeError, ProbeWarning
from ..format.tensors import read_at, read_whole
from ..params import STEP_GRAMMAR, check_number
from ..readers.activations import MAX_TOKENS, WINDOW
from ..readers.source import open_source
from ..registry import ACTIVATIONS, Probe
from ..render import table


@budgeted
def tokens(path: str | os.PathLike, other: str | os.PathLike | None = None, *, step: str | int = "latest",
           step_b: str | int | None = None, buckets: int = BUCKETS, text: str | None = None, window: int = WINDOW,
           max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False,
           max_memory: int | str | None = MAX_MEMORY) -> list[TokensResult]:
    """Where a gain comes from, token by token: the per-token loss difference of two models, bucketed.

    Δℓ = ℓ_A - ℓ_B per token (not the relative ΔL of ``bias``) between run A (``path`` at ``step``) and
    run B (``other``, or ``path`` again at ``step_b``) on identical held-out tokens (negative: A
    predicts the token better). The tokens are cut into ``buckets`` quantile bins of each feature (token
    frequency, unigram and bigram surprisal, how much the context lowers the loss, the models'
    predictive entropy); each bin reports its mean Δℓ and its share of the total gain Σ(-Δℓ). Snapshot
    files: the stored token-probe windows (a text run trained with ``--token-probe N``); checkpoints
    (two Hugging Face folders): the models run on ``text``.

    Parameters
    ----------
    path : str or os.PathLike
        Run A: a snapshot file, or a checkpoint (with ``other`` and ``text``).
    other : str or os.PathLike, optional
        Run B, of the same kind as A; ``None``: ``path`` again, at ``step_b``.
    step : str or int, default "latest"
        A's snapshots (see [`similarity`][probe.probes.similarity.similarity]); several, or a numbered one, make a trajectory.
    {step_b}
    {buckets}
    {text}
    {window}
    {max_tokens}
    {allow_nonfinite}
    {max_memory}

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
    check_number("buckets", buckets)
    path = os.fspath(path)
    other = os.fspath(other) if other is not None else None
    stored = []   # whether each source stores its token losses (a snapshot file) or runs its model on the text
    for p in (path, other):
        if p is not None:
            with open_source(p) as src:   # a broken file is named before anything else is said
                stored.append(src.stores_activations)
    if other is None and step_b is None:
        raise ProbeError(f"tokens compares two models: give a second run, or a second step of the same run "
                         f"with {param('step_b')}")
    b_path = other if other is not None else path
    checks = Finite(path, allow_nonfinite), Finite(b_path, allow_nonfinite)
    same_steps = step_b is None and str(step) != "latest"
    step_b = step if step_b is None else step_b
    if not all(stored):
        if any(stored):
            raise ProbeError("tokens compares two snapshot files or two checkpoints, not one of each")
        if other is None:
            raise ProbeError(f"{path}: a checkpoint holds one step; give a second checkpoint to compare with")
        with open_source(path) as a, open_source(b_path) as b:
            fa = a.forward(text, "tokens", step, window=window, max_tokens=max_tokens)
            fb = b.forward(text, "tokens", step_b, window=window, max_tokens=max_tokens)
        if fa.vocab_size != fb.vocab_size or not np.array_equal(fa.tokens, fb.tokens):
            raise ProbeError(f"{path} and {b_path} tokenize the text differently; the per-token comparison needs "
                             "one vocabulary")
        # checked before anything else is said: an error comes alone
        keep = finite_tokens_of(checks, [(0, "token_loss", fa.token_loss, None),
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
        return with_warnings([token_gains(la, lb, feats, buckets=buckets, label_a=path, label_b=b_path)])
    with open_source(path) as run:
        run.forward(text, "tokens", step, window=window, max_tokens=max_tokens)   # None: text ignored, said once
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
    a = runs_a[0]   # what does not change with the step (the windows' n-gram numbers): checked once
    fixed = finite_tokens_of(checks, [(0, "token_probe_unigram", a["unigram"], None),
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
        keep = finite_tokens_of(checks, [(0, "token_loss", la, a["step"]), (1, "token_loss", lb, b["step"]),
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
    return with_warnings(out)


def finite_tokens_of(checks: tuple, arrays: list[tuple], where: str) -> np.ndarray | None:
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
    with open_source(path) as run:
        if not run.has("token_loss"):
            raise ProbeError(f"{run.path}: stores no per-token losses (train a text run with --token-probe N)")
        indices = run.step_indices(step)
        fixed = {k: read_whole(run.dataset(f"token_probe_{k}"))
                 for k in ("tokens", "targets", "source", "unigram", "bigram")}
        fixed.update(counts=read_whole(run.dataset("token_counts")), splits=run.splits)
        loss, ent = read_at(run.dataset("token_loss"), indices), read_at(run.dataset("token_entropy"), indices)
        steps = run.steps
    return [{**fixed, "loss": np.asarray(l), "entropy": np.asarray(e), "step": int(steps[i])}
            for l, e, i in zip(loss, ent, indices)]


def detail(r, width) -> None:
    print(f"A = {terminal(r.label_a)}\nB = {terminal(r.label_b)}")   # paths: may hold any character
    print(f"{r.n} tokens: mean_loss_a {r.mean_loss_a:.4f}, mean_loss_b {r.mean_loss_b:.4f}")
    print(f"mean_delta (Δℓ = ℓ_A − ℓ_B) {r.mean_delta:+.4f}; total_gain of A Σ(−Δℓ) {r.total_gain:+.2f}")
    # the columns are the result's keys (groups[g]["gain_share"], buckets[f][i]["token_share"], ...)
    if r.groups:
        table(["group", "n", "mean_delta", "gain_share"],
              [[g, v["n"], v["mean_delta"], v["gain_share"]] for g, v in r.groups.items()], width=width)
        print()
    table(["feature", "bucket", "range", "n", "token_share", "mean_delta", "gain_share"],
          [[f, f"q{b['bucket']}", f"{b['lo']:.3g}..{b['hi']:.3g}", b["n"], b["token_share"], b["mean_delta"],
            b["gain_share"]] for f, bs in r.buckets.items() for b in bs], width=width)


def chart(r) -> list[Panel]:
    return [Panel(str(f), "bucket (quantile of the feature)", "share (A over B)", kind="bar",
                  categories=[f"q{b['bucket']}" for b in bs],
                  series={"share of the gain": [b["gain_share"] for b in bs],
                          "share of the tokens": [b["token_share"] for b in bs]}) for f, bs in r.buckets.items()]


PROBE = Probe("tokens", ACTIVATIONS, "Per-token loss difference", function=tokens,
              options={"path": "run A: a snapshot file, or (with --text) a Hugging Face model folder or a hub "
                               "model hf:ORG/NAME[@REVISION]",
                       "other": "run B (default: FILE again, at --step-b)",
                       "step": f"step of run A: {STEP_GRAMMAR}",
                       "text": "for two checkpoints: a text file to run both models on, with their tokenizer files"
                               " (snapshot files store their token-probe windows)"},
              style="detail", report=False, batch=False, sweeps=False, result="tokens.TokensResult",
              metrics=("n", "mean_loss_a", "mean_loss_b", "mean_delta", "total_gain", "gain_share"),
              example="probe tokens a.h5 b.h5",
              examples=("probe tokens run.h5 --step 1000 --step-b 3000 --buckets 5",
                        "probe tokens a/ b/ --text corpus.txt"),
              nonfinite="the tokens whose loss, entropy or n-gram surprisal is not finite (in either model) are left out",
              help="Per-token loss difference Δℓ = ℓ_A − ℓ_B on identical held-out tokens, bucketed by token "
                   "frequency, n-gram surprisal, how much the context lowers the loss and the predictive "
                   "entropy: mean Δℓ and share of the total gain per bucket.",
              detail=detail, chart=chart)
