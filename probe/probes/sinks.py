"""The ``sinks`` probe: attention sinks."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.sinks import MIN_QUERY, SINK_THRESHOLD, SinksResult, attention_sinks
from ..api.checks import with_warnings
from ..api.finite import Finite, finite_sequences
from ..chart.panel import Panel
from ..errors import ProbeError
from ..format.tensors import read_at
from ..params import check_number
from ..readers.activations import MAX_TOKENS, WINDOW
from ..readers.source import open_source
from ..registry import ACTIVATIONS, Probe
from ..render import table, wrapped


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
    {path}
    {step}
    {min_query}
    {sink_threshold}
    {text}
    {window}
    {max_tokens}
    {allow_nonfinite}
    {max_memory}

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
    check_number("min_query", min_query)
    check_number("sink_threshold", sink_threshold)
    with open_source(path, canonical=False) as run:   # a checkpoint of any layout: its model runs
        fw = run.forward(text, "sinks", step, window=window, max_tokens=max_tokens, attention=True)
        if fw is None:   # the stored probe batch
            if not run.has("attention"):
                raise ProbeError(f"{run.path}: holds no attention maps (an Emb-MLP run?)")
            indices = run.step_indices(step)
            maps = read_at(run.dataset("attention"), indices)
            hidden = read_at(run.dataset("hidden_norm"), indices) if run.has("hidden_norm") else [None] * len(indices)
            steps = run.steps
        check = Finite(run.path, allow_nonfinite)
    if fw is not None:   # the model run on the text
        A, h = fw.attention, fw.hidden_norm
        keep = finite_sequences(check, "attention (the model run on the text)", A, None,
                                 also=None if h is None else ("residual norms (the model run on the text)", h))
        if keep is not None:
            A, h = A[:, :, keep], None if h is None else h[:, keep]
        check.warn()
        return with_warnings([attention_sinks(A, h, min_query=min_query, threshold=sink_threshold)])
    out = []
    for A, h, i in zip(maps, hidden, indices):
        keep = finite_sequences(check, "attention", A, int(steps[i]), also=None if h is None else ("hidden_norm", h))
        if keep is not None:
            A, h = A[:, :, keep], None if h is None else h[:, keep]
        out.append(attention_sinks(A, h, min_query=min_query, threshold=sink_threshold, step=int(steps[i])))
    check.warn()
    return with_warnings(out)


def detail(r, width) -> None:
    m = r.sink_mass
    H = m.shape[1] if m.ndim == 2 else 0
    print(f"sink_mass: attention on position 0 of queries at positions >= {r.min_query}, step {r.step}")
    print(f"(causal averaging: {r.uniform_mass:.3f}; a sink head from {r.threshold:g})")
    table(["layer"] + [f"head {h}" for h in range(H)] + ["sink_heads"],
          [[l] + [float(v) for v in row] + [int(r.sink_heads[l].sum())] for l, row in enumerate(m)], width=width)
    if r.first_norm_ratio is not None:
        last = len(r.first_norm_ratio) - 1
        wrapped("first_norm_ratio (residual norm at position 0 / the median position's):",
               [f"{'block' + str(b) if b < last else 'out'} {v:.2f}" for b, v in enumerate(r.first_norm_ratio)],
               width)
    print(f"sink heads: {int(r.sink_heads.sum())} of {r.sink_heads.size}")
    print()


def chart(r) -> list[Panel]:
    m = np.asarray(r.sink_mass, dtype=float)
    return [Panel(f"step {r.step}: attention on position 0", "head", "layer", kind="heat", matrix=m,
                  rows=[f"L{i}" for i in range(m.shape[0])], cols=[f"h{h}" for h in range(m.shape[1])],
                  vmin=0.0, vmax=1.0, cmap="magma", clabel="attention on position 0")]


PROBE = Probe("sinks", ACTIVATIONS, "Attention sinks", function=sinks, result="sinks.SinksResult",
              metrics=("sink_head_fraction", "mean_sink_mass", "uniform_mass", "sink_mass", "first_norm_ratio"),
              example="probe sinks run.h5 --step all",
              examples=("probe sinks model/ --text corpus.txt --window 256",),
              nonfinite="the sequences (windows) whose maps or residual norms hold one are left out",
              help="Attention sinks per layer and head: mean attention on the first position (queries past the "
                   "first few), the fraction of sink heads, and the first position's residual norm over the "
                   "median position's.",
              detail=detail, chart=chart)
