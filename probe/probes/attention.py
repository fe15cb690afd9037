"""The ``attention`` probe: attention against causal averaging."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.attention import AttentionResult, attention_stats
from ..api.checks import layer_check, with_warnings
from ..api.finite import Finite, finite_sequences
from ..chart.panel import Panel
from ..errors import ProbeError
from ..format import P
from ..format.tensors import read_at, read_whole
from ..params import check_number
from ..registry import SNAPSHOT, Probe
from ..readers.source import open_snapshot


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
    {path}
    layer : int, optional
        One layer (default: every layer).
    {step}
    {allow_nonfinite}
    {max_memory}

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
    if layer is not None:
        check_number("layer", layer)
    with open_snapshot(path, "attention") as run:
        if layer is not None:
            layer_check(run, layer)
        if P["attention"] not in run.h5:
            raise ProbeError(f"{run.path}: holds no attention maps (an Emb-MLP run?)")
        indices = run.step_indices(step)
        maps = read_at(run.dataset("attention"), indices)
        key_pos = read_whole(run.dataset("probe_key_pos"))
        n_anchors = int(run.task.get("n_anchors", 2))
        steps = run.steps
        check = Finite(run.path, allow_nonfinite)
    out = []
    for A, i in zip(maps, indices):
        if layer is not None:
            A = A[layer:layer + 1]
        keep = finite_sequences(check, "attention" if layer is None else f"attention of layer {layer}", A,
                                 int(steps[i]))
        out.append(attention_stats(A if keep is None else A[:, :, keep], key_pos if keep is None else key_pos[keep],
                                   n_anchors, step=int(steps[i])))
    check.warn()
    return with_warnings(out)


def chart(r) -> list[Panel]:
    prof = np.asarray(r.last_profile, dtype=float)
    L, H, T = prof.shape
    return [Panel(f"layer {l}: mean |A − 1/i| {np.asarray(r.avg_dev)[l].mean():.3f}", "key position",
                  "attention of the last position", series={f"head {h}": (list(range(T)), list(prof[l, h]))
                                                            for h in range(H)},
                  xscale="int", hline=(1.0 / T, "uniform")) for l in range(L)]


PROBE = Probe("attention", SNAPSHOT, "Attention against causal averaging", function=attention,
              options={"layer": "attention layer, 0-based [default: every layer]"},
              result="attention.AttentionResult",
              metrics=("avg_dev", "entropy_ratio", "last_to_key", "last_to_anchors"),
              example="probe attention run.h5 --layer 0 --step 0:1000",
              examples=("probe attention run.h5 --plot attention.png",),
              nonfinite="the probe sequences whose maps hold one are left out",
              help="Attention on the stored probe batch (default: every layer): distance from causal averaging "
                   "(mean |A_ij - 1/i|, entropy relative to uniform) and where the last position attends (key, "
                   "anchors).",
              chart=chart, cheap=True)
