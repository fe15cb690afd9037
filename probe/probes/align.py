"""The ``align`` probe: singular vectors of W_V against the embeddings."""
from __future__ import annotations

import os

import numpy as np

from ..limits import DECOMPOSITION, FLOAT64, MAX_MEMORY, budgeted
from ..analyses.align import AlignResult
from ..analyses.align import align as _align
from ..api.checks import layer_check, unconverged, with_warnings
from ..api.finite import Finite
from ..chart.panel import indexed, Panel
from ..errors import ProbeError
from ..format.tensors import read_at
from ..params import check_number
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from ..render import note, table, wrapped


@budgeted
def align(path: str | os.PathLike, layer: int | None = None, head: int | None = None, *,
          step: str | int = "latest", top_k: int = 3, groups: str | None = None, mapping: str | None = None,
          skip_damaged: bool = False, allow_nonfinite: bool = False,
          max_memory: int | str | None = MAX_MEMORY) -> list[AlignResult]:
    """Singular vectors of one head's value map W_V (and of W_V W_O) against every token embedding.

    The left singular vectors of W_V (d_model x d_head; under grouped-query attention the value head that
    query head ``head`` reads) live in embedding space; for the top ``top_k`` of them the result holds
    the |cos| with every token embedding and its mean over each token group. The singular values of
    W_V W_O come from a factored SVD, without forming the d_model x d_model product.

    Parameters
    ----------
    {path}
    layer : int, optional
        The layer (default: 0).
    {head}
    {step}
    {top_k}
    groups : str, optional
        A JSON or YAML file of token groups (name -> token ids or words) for the group means, added to the
        stored ones.
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

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
    layer = 0 if layer is None else check_number("layer", layer)
    head = 0 if head is None else check_number("head", head)
    check_number("top_k", top_k)
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        layer_check(run, layer, head)
        indices = run.step_indices(step)
        wv = read_at(run.tensor(f"layer{layer}/W_V"), indices, work=DECOMPOSITION)
        wo = read_at(run.tensor(f"layer{layer}/W_O"), indices, work=DECOMPOSITION)
        emb = read_at(run.tensor("token_embedding"), indices, work=FLOAT64)   # its unit rows, in float64
        groups = run.groups
        vocab = emb[0].shape[0]
        for g, ids in groups.items():
            if ids.size and (ids.min() < 0 or ids.max() >= vocab):
                raise ProbeError(f"token group '{g}' has ids outside the vocabulary (0..{vocab - 1})")
        steps = run.steps
        check, at = Finite(run.path, allow_nonfinite), [run.step_of(i) for i in indices]
        names = [run.label(n) for n in (f"layer{layer}/W_V", f"layer{layer}/W_O", "token_embedding")]
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
            raise unconverged(path, f"the SVD of {names[0]} head {kv} (and W_V W_O)", s, exc) from None
    check.warn()
    return with_warnings(out)


def detail(r, width) -> None:
    wrapped(f"layer {r.layer} head {r.head}: singular values of W_V",
           [f"{v:.3g}" for v in r.singular_values[:8]], width)
    wrapped("  of W_V W_O", [f"{v:.3g}" for v in r.ov_singular_values[:8]], width)
    if r.group_mean:
        k = len(next(iter(r.group_mean.values())))
        table(["group"] + [f"|cos| v{i + 1}" for i in range(k)], [[g] + v for g, v in r.group_mean.items()],
              width=width)
    else:   # a checkpoint, or a run without token groups: no table, and no header without rows
        note("no token groups to compare W_V's singular vectors with", "--groups FILE names some", width)
    print()


def chart(r) -> list[Panel]:
    sv = {"W_V": indexed(r.singular_values), "W_V W_O": indexed(r.ov_singular_values)}
    k = max((len(v) for v in r.group_mean.values()), default=0)
    panels = [Panel(f"step {r.step}: layer {r.layer}, head {r.head}", "index", "singular value", series=sv,
                    xscale="int", yscale="log")]
    if k:
        panels.append(Panel("groups on W_V's singular vectors", "singular vector of W_V", "mean |cos|", kind="bar",
                            series={g: list(map(float, v)) for g, v in r.group_mean.items()},
                            categories=[str(i + 1) for i in range(k)]))
    return panels


PROBE = Probe("align", WEIGHTS, "Singular vectors of W_V against the embeddings", function=align,
              options={"groups": "JSON/YAML file: group name -> token ids or words, the groups W_V's singular "
                                 "vectors are compared with [default: the run's stored groups]",
                       "layer": "attention layer of the head, 0-based [default: 0]"},
              result="align.AlignResult", metrics=("sv1", "sv1_share", "ov_sv1", "cos_top1"),
              example="probe align run.h5 --layer 0 --head 0 --step all",
              examples=("probe align run.h5 --layer 1 --top-k 5 --plot align.png",),
              nonfinite="the non-finite entries of W_V and W_O count as 0, and the embedding rows holding one are left "
                        "out of the group means",
              help="Singular values of W_V and W_V W_O of one head (default: layer 0, head 0), and |cos| of W_V's "
                   "top singular vectors with each token group.",
              detail=detail, chart=chart, cheap=True)
