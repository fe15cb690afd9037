"""Where a gain comes from, token by token (paper 4): the per-token loss difference between two
models on identical held-out tokens, split into buckets of token features.

Δℓ = ℓ_A − ℓ_B per token (negative: A predicts it better); the gain of A is −Δℓ. For each
feature the tokens are cut into ``buckets`` quantile bins (bucket 1 the lowest values) and each
bin reports its token count, its mean Δℓ and its share of the total gain Σ(−Δℓ). A gain that
concentrates where the context matters puts more than its token share into the top
``context_benefit`` bins.

Features (each one value per token):
  frequency        training count of the token being predicted
  unigram          its unigram surprisal −ln P(token) (nats)
  bigram           its bigram surprisal −ln P(token | previous token) (nats)
  context_benefit  unigram surprisal minus the mean model loss of A and B: how much the
                   context lowers the loss (both models averaged, so neither is favoured)
  entropy          the mean predictive entropy of A and B (nats): how unsure the models are
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import Result

BUCKETS = 4
#: a total gain under this fraction of Σ|Δℓ| is a near-cancellation: a bucket's share of it can be any size
#: (a share of 20 from a total of 0.05 nats), so the shares are flagged as not meaningful
CANCEL = 0.05


@dataclass
class TokensResult(Result):
    """Per-token comparison of model A with model B.

    Returned by [`probe.tokens`][probe.probes.tokens.tokens]. Δℓ = ℓ_A - ℓ_B per token (nats; negative: A predicts
    it better); A's gain is -Δℓ. Besides the attributes below, every result has ``step`` and ``warnings``
    ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    label_a : str
        Model A (``path@step`` for a snapshot file).
    label_b : str
        Model B.
    n : int
        Tokens compared.
    mean_delta : float
        Mean Δℓ.
    mean_loss_a : float
        Mean loss of A.
    mean_loss_b : float
        Mean loss of B.
    total_gain : float
        Σ(-Δℓ).
    buckets : dict of str to list of dict
        Per feature (``frequency``, ``unigram``, ``bigram``, ``context_benefit``, ``entropy``), one dict per
        quantile bin: ``bucket`` (1 = the lowest values), ``lo``, ``hi``, ``n``, ``token_share``,
        ``mean_delta`` and ``gain_share`` (its share of ``total_gain``).
    groups : dict of str to dict
        Per source of the tokens (a text run's splits): ``n``, ``mean_delta`` and ``gain_share``.
    """

    label_a: str = "A"
    label_b: str = "B"
    n: int = 0
    mean_delta: float = float("nan")
    mean_loss_a: float = float("nan")
    mean_loss_b: float = float("nan")
    total_gain: float = float("nan")
    buckets: dict[str, list[dict]] = field(default_factory=dict)
    groups: dict[str, dict] = field(default_factory=dict)

    def summary(self) -> dict[str, float | int]:
        out = {"n": int(self.n), "mean_loss_a": self.mean_loss_a, "mean_loss_b": self.mean_loss_b,
               "mean_delta": self.mean_delta, "total_gain": self.total_gain}
        out.update({f"{key}[{g}]": v[key] for g, v in self.groups.items() for key in ("mean_delta", "gain_share")})
        for feat, bs in self.buckets.items():
            for key in ("mean_delta", "gain_share"):
                out.update({f"{key}[{feat}:q{b['bucket']}]": b[key] for b in bs})
        return out


def quantile_buckets(x: np.ndarray, n: int) -> np.ndarray:
    """Bucket 1..n of each value by its rank (ties broken by order, so buckets hold equal counts)."""
    order = np.argsort(x, kind="stable")
    b = np.empty(len(x), dtype=np.int64)
    b[order] = (np.arange(len(x)) * n) // max(len(x), 1) + 1
    return b


def token_gains(loss_a: np.ndarray, loss_b: np.ndarray, features: dict[str, np.ndarray], *,
                groups: np.ndarray | None = None, group_names: list[str] | None = None,
                buckets: int = BUCKETS, label_a: str = "A", label_b: str = "B",
                step: int | None = None) -> TokensResult:
    """loss_a, loss_b (N,) per-token losses of the two models on the same tokens; features
    name -> (N,) values; groups (N,) an index into ``group_names`` (or None)."""
    a = np.asarray(loss_a, dtype=np.float64).ravel()
    b = np.asarray(loss_b, dtype=np.float64).ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    warnings = [] if ok.all() else [f"{int((~ok).sum())} token(s) with a non-finite loss left out"]
    a, b = a[ok], b[ok]
    delta = a - b
    gain = -delta
    total = float(gain.sum())
    gross = float(np.abs(gain).sum())
    if abs(total) < 1e-12:
        warnings.append("the two models' total loss is equal: gain shares are undefined")
    # the words carry no numbers (total_gain is in the result), so a trajectory says each once
    elif total < 0:
        warnings.append("A's total gain Σ(−Δℓ) is negative (A predicts these tokens worse than B): the gain shares "
                        "are shares of a loss and are not meaningful (swap A and B for B's gain)")
    elif total < CANCEL * gross:
        warnings.append(f"A's total gain Σ(−Δℓ) is under {CANCEL:.0%} of Σ|Δℓ| (gains and losses nearly cancel): "
                        "the gain shares divide by a near-zero total and are not meaningful")

    def share(mask):
        return float(gain[mask].sum() / total) if abs(total) >= 1e-12 else float("nan")

    out = TokensResult(step=step, label_a=label_a, label_b=label_b, n=int(len(a)),
                       mean_delta=float(delta.mean()) if len(a) else float("nan"),
                       mean_loss_a=float(a.mean()) if len(a) else float("nan"),
                       mean_loss_b=float(b.mean()) if len(a) else float("nan"), total_gain=total,
                       warnings=warnings)
    for name, values in features.items():
        v = np.asarray(values, dtype=np.float64).ravel()[ok]
        q = quantile_buckets(v, buckets)
        masks = [(k, q == k) for k in range(1, buckets + 1)]
        out.buckets[name] = [{"bucket": k, "lo": float(v[m].min()), "hi": float(v[m].max()), "n": int(m.sum()),
                              "token_share": float(m.mean()), "mean_delta": float(delta[m].mean()),
                              "gain_share": share(m)} for k, m in masks if m.any()]
    if groups is not None:
        g = np.asarray(groups).ravel()[ok]
        for k in np.unique(g):
            m = g == k
            name = group_names[int(k)] if group_names is not None else str(k)
            out.groups[name] = {"n": int(m.sum()), "mean_delta": float(delta[m].mean()), "gain_share": share(m)}
    return out


def token_features(counts_of_target: np.ndarray, unigram: np.ndarray, bigram: np.ndarray, loss_a: np.ndarray,
                   loss_b: np.ndarray, entropy_a: np.ndarray, entropy_b: np.ndarray) -> dict[str, np.ndarray]:
    """The features of the module docstring from their ingredients (each (N,))."""
    mean_loss = (np.asarray(loss_a, np.float64) + np.asarray(loss_b, np.float64)) / 2
    return {"frequency": np.asarray(counts_of_target, np.float64), "unigram": np.asarray(unigram, np.float64),
            "bigram": np.asarray(bigram, np.float64), "context_benefit": np.asarray(unigram, np.float64) - mean_loss,
            "entropy": (np.asarray(entropy_a, np.float64) + np.asarray(entropy_b, np.float64)) / 2}


def ngram_surprisal(tokens: np.ndarray, targets: np.ndarray, vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N-gram statistics of a text from the text itself, for each (token, next token) pair of
    ``tokens`` / ``targets`` (same shape): the next token's count, its unigram surprisal
    -log((c + 1) / (N + V)) (add-one) and its bigram surprisal -log((c_ab + 0.01) / (c_a + 0.01 V));
    each flattened, (n,). Used where no training counts exist (two checkpoints run on one text)."""
    prev, tgt = np.ravel(tokens), np.ravel(targets)
    counts = np.bincount(tgt, minlength=vocab).astype(np.float64)
    first = np.bincount(prev, minlength=vocab).astype(np.float64)
    pairs = prev.astype(np.int64) * vocab + tgt
    codes, pair_counts = np.unique(pairs, return_counts=True)
    c_ab = pair_counts[np.searchsorted(codes, pairs)].astype(np.float64)
    unigram = -np.log((counts[tgt] + 1.0) / (counts.sum() + vocab))
    bigram = -np.log((c_ab + 0.01) / (first[prev] + 0.01 * vocab))
    return counts[tgt], unigram, bigram
