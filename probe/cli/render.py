"""Results to stdout: an aligned table, strict JSON or tidy CSV, for any Result.

JSON is strict (``allow_nan=False``): NaN and infinities are written as ``null``; a string holding
surrogate escapes (a file name that is not UTF-8) is written with ``\\xNN`` for each undecodable
byte (:func:`probe._text.shown`), so the output is valid Unicode that any JSON parser takes. CSV is the
same ``step,metric,key,value`` for every probe (``Result.rows()``), with an empty cell where
a value is undefined. Tables show an undefined value as ``-``. Logs go to stderr.
"""
from __future__ import annotations

import csv
import json
import math
import sys
from typing import Iterable, Sequence

from .._text import shown

TIDY = ("step", "metric", "key", "value")


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}" if math.isfinite(v) else "-"
    return shown(str(v))   # as printed: \xNN is four columns wide


def table(header: Sequence[str], rows: Iterable[Sequence], out=None, left: Sequence[int] = ()) -> None:
    """An aligned table: numbers right-aligned, the columns in ``left`` (text) left-aligned."""
    out = out or sys.stdout
    rows = [[_cell(v) for v in r] for r in rows]
    header = [shown(h) for h in header]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out.write(line(header).rstrip() + "\n")
    for r in rows:
        out.write(line(r).rstrip() + "\n")


def _shown(v):
    """Plain JSON data with every string (keys too) made valid Unicode (:func:`probe._text.shown`)."""
    if isinstance(v, str):
        return shown(v)
    if isinstance(v, dict):
        return {shown(k) if isinstance(k, str) else k: _shown(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_shown(x) for x in v]
    return v


def write_json(obj, out=None) -> None:
    """``obj`` as strict JSON (numpy values converted, non-finite floats as null, strings valid Unicode)."""
    from ..analyses.base import jsonable

    out = out or sys.stdout
    json.dump(_shown(jsonable(obj)), out, indent=2, allow_nan=False)
    out.write("\n")


def _csv_value(v):
    if v is None:
        return ""
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    return v


def write_csv(header: Sequence[str], rows: Iterable[Sequence], out=None) -> None:
    w = csv.writer(out or sys.stdout, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([_csv_value(v) for v in r])


def tidy_rows(results) -> list[tuple]:
    """``step,metric,key,value`` rows of a list of results: :func:`probe.analyses.base.tidy_rows`, the
    rows of ``Results.to_frame()`` too, so the CSV and the DataFrame cannot differ."""
    from ..analyses.base import tidy_rows as rows

    return rows(results)


def summary_table(results) -> None:
    """One row per step with every summary number (transposed when there are many numbers)."""
    keys = list(dict.fromkeys(k for r in results for k in r.summary()))
    rows = [[r.step] + [r.summary().get(k) for k in keys] for r in results]
    if len(keys) > 8:  # long summaries read better transposed
        table(["metric"] + [f"step {r.step}" for r in results],
              [[k] + [row[1 + j] for row in rows] for j, k in enumerate(keys)])
    else:
        table(["step"] + keys, rows)


# --- the per-probe detail shown above the summary when one step is selected ------------------------
def _labels(r) -> list:
    """Row labels of a result's tokens: the id, with its text where the source has a vocabulary."""
    texts = r.texts.get() if r.texts is not None else None
    if texts is None:
        return [int(i) for i in r.ids]
    return [f"{int(i)} {t!r}" for i, t in zip(r.ids, texts)]


def _similarity(r) -> None:
    if r.matrix is None:
        return
    print(f"cosine similarity, step {r.step}")
    table(["token"] + [str(i) for i in r.ids],
          [[lab] + [f"{v:.2f}" for v in row] for lab, row in zip(_labels(r), r.matrix)])
    print()


def _pca(r) -> None:
    table(["token", "group"] + [f"PC{i + 1}" for i in range(r.coords.shape[1])],
          [[lab, g] + list(map(float, c)) for lab, g, c in zip(_labels(r), r.groups, r.coords)])
    print()


def _align(r) -> None:
    print(f"layer {r.layer} head {r.head}: singular values of W_V "
          + " ".join(f"{v:.3f}" for v in r.singular_values[:8]))
    print("  of W_V W_O " + " ".join(f"{v:.3f}" for v in r.ov_singular_values[:8]))
    table(["group"] + [f"|cos| v{i + 1}" for i in range(len(next(iter(r.group_mean.values()), [])))],
          [[g] + v for g, v in r.group_mean.items()])
    print()


def _condense(r) -> None:
    print("covariance eigenvalues: " + " ".join(f"{v:.3g}" for v in r.eigenvalues[:10]))
    if r.neuron_tensor:
        print(f"neuron groups of {r.neuron_tensor} (cos > {r.threshold}): sizes {r.neuron_groups[:10]}")
    print()


def _theory(r) -> None:
    print(f"profile cos(w({r.anchor}), w(s_j))")
    row0 = list(r.ids).index(r.anchor)
    table(["token", "measured", "eq14", "P^s theory"],
          [[int(t), float(a), float(b), float(c)] for t, a, b, c in
           zip(r.ids, r.profile_measured, r.profile_reconstructed, r.predicted[row0])])
    print()


def _ood(r) -> None:
    table(["split / combination", "n", "loss", "acc"],
          [[s, m["n"], m["loss"], m["acc"]] for s, m in r.splits.items()]
          + [[f"  held-out {c}", m["n"], m["loss"], m["acc"]] for c, m in r.combos.items()]
          + [[f"  target {t}", m["n"], None, m["acc"]] for t, m in r.targets.items()])
    print()


def _spectrum(r) -> None:
    table(["layer", "shape", "spectral_norm", "log_norm", "stable_rank", "entropy_rank", "alpha", "xmin", "xmax",
           "ks"],
          [[l.name, "x".join(map(str, l.shape)), l.spectral_norm, l.log_norm, l.stable_rank, l.entropy_rank,
            l.alpha, l.xmin, l.xmax, l.ks_distance] for l in r.layers])
    print()


def _norms(r) -> None:
    print(f"norm sites, step {r.step}: eps {r.eps:g}; saturated when the eps share s >= {r.saturation:g}")
    med = r.median_square if r.median_square is not None else [None] * len(r.sites)
    gain = r.gain if r.gain is not None else [None] * len(r.sites)
    table(["site", "mean m", "median m", "eps share s", "gain", "effective gain", "saturated"],
          [[s, f"{m:.3g}", "-" if md is None else f"{md:.3g}", float(e), None if g is None else float(g),
            f"{eg:.4g}", "yes" if s in r.saturated else ""]
           for s, m, md, e, g, eg in zip(r.sites, r.mean_square, med, r.eps_share, gain, r.effective_gain)])
    print(f"{len(r.saturated)} of {len(r.sites)} sites saturated")


def _sinks(r) -> None:
    H = r.mass.shape[1] if r.mass.ndim == 2 else 0
    print(f"attention on position 0, queries at positions >= {r.min_query}, step {r.step} "
          f"(causal averaging: {r.uniform_mass:.3f}; sink head: >= {r.threshold:g})")
    table(["layer"] + [f"head {h}" for h in range(H)] + ["sink heads"],
          [[l] + [float(v) for v in row] + [int(r.sink_heads[l].sum())] for l, row in enumerate(r.mass)])
    if r.norm_ratio is not None:
        print("first position's residual norm / median position's: "
              + "  ".join(f"{'block ' + str(b) if b < len(r.norm_ratio) - 1 else 'out'} {v:.2f}"
                          for b, v in enumerate(r.norm_ratio)))
    print(f"sink heads: {int(r.sink_heads.sum())} of {r.sink_heads.size}")


def _rank(r) -> None:
    metrics = list(next(iter(r.numbers.values()), {}))
    print(f"step {r.step}")
    table(["matrix"] + metrics, [[n] + [r.numbers[n][m] for m in metrics] for n in r.names])


def _rank_minima(r) -> None:
    print(f"{r.metric} over steps {r.steps[0]}..{r.steps[-1]} ({len(r.steps)} snapshots); condense then expand: "
          f"the minimum strictly inside, dip <= {1 - r.margin:g}, rebound >= {1 + r.margin:g}")
    table(["matrix", "initial", "minimum", "min_step", "final", "dip", "rebound", "condense_then_expand"],
          [[n, r.initial[n], r.minimum[n], r.min_step[n], r.final[n], r.dip(n), r.rebound(n),
            "yes" if r.condense_then_expand(n) else ""] for n in r.names])


def _tokens(r) -> None:
    print(f"A = {r.label_a}\nB = {r.label_b}")
    print(f"{r.n} tokens: mean loss A {r.mean_loss_a:.4f}, B {r.mean_loss_b:.4f}; mean ΔL = L_A − L_B "
          f"{r.mean_delta:+.4f}; total gain of A Σ(−ΔL) {r.total_gain:+.2f}")
    if r.groups:
        table(["group", "n", "mean ΔL", "gain share"],
              [[g, v["n"], v["mean_delta"], v["gain_share"]] for g, v in r.groups.items()])
    table(["feature", "bucket", "range", "n", "token share", "mean ΔL", "gain share"],
          [[f, f"q{b['bucket']}", f"{b['lo']:.3g}..{b['hi']:.3g}", b["n"], b["token_share"], b["mean_delta"],
            b["gain_share"]] for f, bs in r.buckets.items() for b in bs])


# the detail table of one step, by probe (the CLI calls rank_trajectory "rank-minima"); a probe
# without one shows the summary table alone
DETAILS = {"sinks": _sinks, "similarity": _similarity, "pca": _pca, "align": _align, "condense": _condense,
           "theory": _theory, "ood": _ood, "spectrum": _spectrum, "norms": _norms, "rank": _rank,
           "rank-minima": _rank_minima, "tokens": _tokens}


def _detail_only(probe: str) -> bool:
    """Whether the probe's detail table is the whole story (its summary would repeat it)."""
    from .. import registry

    spec = registry.BY_NAME.get({"rank-minima": "rank_trajectory"}.get(probe, probe))
    return spec is not None and spec.layout == "detail" and probe in DETAILS


def _similarity_summary(results) -> None:
    dists = sorted({d for r in results for d in r.by_distance})[:10]
    table(["step", "mean_offdiag", "std_offdiag", "distance_corr"] + [f"d={d}" for d in dists],
          [[r.step, r.mean_offdiag, r.std_offdiag, r.distance_corr] + [r.by_distance.get(d) for d in dists]
           for r in results])


def emit(results, fmt: str, file: str, probe: str) -> None:
    """Results of ``probe`` on ``file`` to stdout in ``fmt`` (table / json / csv)."""
    if fmt == "json":
        write_json({"file": file, "probe": probe, "results": [r.to_dict() for r in results]})
    elif fmt == "csv":
        write_csv(TIDY, tidy_rows(results))
    else:
        if probe == "norms" and len(results) > 1:   # site x step
            print(f"eps share s = eps / (m + eps) per norm site and step (eps {results[0].eps:g}; saturated: s >= "
                  f"{results[0].saturation:g})")
            table(["site"] + [f"step {r.step}" for r in results],
                  [[site] + [float(r.eps_share[k]) for r in results] for k, site in enumerate(results[0].sites)]
                  + [["saturated sites"] + [len(r.saturated) for r in results]])
            return
        if _detail_only(probe) and (len(results) == 1 or probe != "rank"):
            for i, r in enumerate(results):
                if i:
                    print()
                DETAILS[probe](r)
            return
        if probe == "spectrum":  # a table per step: one row per layer
            for r in results:
                print(f"step {r.step}")
                _spectrum(r)
            return
        if len(results) == 1 and probe in DETAILS:
            DETAILS[probe](results[0])
        (_similarity_summary if probe == "similarity" else summary_table)(results)


# --- probe info ----------------------------------------------------------------------------------

def info(d: dict, fmt: str) -> None:
    """``probe info``: a run's or a checkpoint's summary (:func:`probe.api.info`) in ``fmt``."""
    if fmt == "json":
        write_json(d)
        return
    if "format" in d:  # a checkpoint
        _checkpoint_info(d, fmt)
        return
    if fmt == "csv":  # the tidy shape of every command: step,metric,key,value
        last = d["steps"][-1] if d["steps"] else None
        write_csv(TIDY,
                         [(None, "config", k, v) for k, v in d["config"].items()]
                         + [(s, "snapshot", "", i) for i, s in enumerate(d["steps"])]
                         + [(None, "group", k, " ".join(map(str, v))) for k, v in d["groups"].items()]
                         + [(None, "tensor", k, "x".join(map(str, v))) for k, v in d["tensors"].items()]
                         + [(last, m, s, v) for s, ms in d["metrics"].items() for m, v in ms.items()])
        return
    c = d["config"]
    steps = d["steps"]
    shown = ", ".join(map(str, steps if len(steps) <= 16 else steps[:8] + ["..."] + steps[-4:]))
    print(f"file       {d['file']}  (schema {d['schema_version']}, written by {d['package_version']})")
    print(f"task       {d['task'].get('kind')}: splits {', '.join(d['task'].get('splits', []))}")
    print(f"model      {c.get('model')}  gamma={c.get('gamma')}  d_model={c.get('d_model')}  layers={c.get('layers')}"
          f"  heads={c.get('heads')}  d_ff={c.get('d_ff')}  norm={c.get('norm')}")
    extra = [f"{k}={c[k]}" for k in ("gamma_embed", "gamma_attn", "gamma_mlp", "gamma_head", "init_std", "kv_heads")
             if c.get(k)] + [k for k in ("tie_embeddings", "gated_attention") if c.get(k)]
    if c.get("model") == "llama" or extra or c.get("norm_eps", 1e-5) != 1e-5:
        print(f"           norm_eps={c.get('norm_eps', 1e-5):g}  " + "  ".join(extra))
    print(f"training   {c.get('steps')} steps, batch {c.get('batch_size')}, lr {c.get('lr')}, "
          f"weight decay {c.get('weight_decay')}, seed {c.get('seed')}")
    env = d.get("environment") or {}
    if env:
        print(f"trained    {env.get('device')}, {env.get('threads')} torch thread(s); torch {env.get('torch')}, "
              f"numpy {env.get('numpy')}, h5py {env.get('h5py')}, python {env.get('python')}"
              + (f" (resumed at step {env['resumed_at']})" if "resumed_at" in env else ""))
    print(f"snapshots  {d['snapshots']}: steps {shown}")
    for split, m in d["metrics"].items():
        if m:
            print(f"  {split:<10} loss {_cell(m.get('loss'))}  acc {_cell(m.get('acc'))}")
    print("groups")
    for k, v in d["groups"].items():
        words = d["group_strings"].get(k)
        shown = " ".join(repr(w) for w in words[:10]) + (" ..." if len(words) > 10 else "") if words else _ids(v)
        print(f"  {k:<10} {len(v):>4} tokens  {shown}")
    print("tensors (per snapshot)")
    for k, v in d["tensors"].items():
        print(f"  {k:<28} {' x '.join(map(str, v))}")


def _checkpoint_info(d: dict, fmt: str) -> None:
    if fmt == "csv":
        write_csv(TIDY,
                         [(d["step"], k, "", d[k]) for k in ("format", "layout", "layers", "heads", "parameters")]
                         + [(d["step"], "shape", n, "x".join(map(str, t["shape"]))) for n, t in d["tensors"].items()]
                         + [(d["step"], "dtype", n, t["dtype"]) for n, t in d["tensors"].items()])
        return
    print(f"file       {d['file']}")
    print(f"format     {d['format']}, step {d['step'] if d['step'] is not None else '-'}")
    if d["layout"]:
        print(f"layout     {d['layout']}: {d['layers']} layers, {d['heads']} heads, "
              f"{len(d['canonical'])} canonical tensors")
    else:
        print(f"layout     unknown ({d['layout_error'].split('; tensors found')[0]})")
    print(f"parameters {d['parameters']:,}")
    print("tensors")
    for n, t in d["tensors"].items():
        tied = f"  (tied to {t['tied_to']})" if "tied_to" in t else ""
        print(f"  {n:<48} {' x '.join(map(str, t['shape'])):>16}  {t['dtype']}{tied}")


def _ids(v) -> str:
    if len(v) > 1 and list(v) == list(range(v[0], v[-1] + 1)):
        return f"{v[0]}:{v[-1] + 1}"
    return ",".join(map(str, v[:12])) + (",..." if len(v) > 12 else "")


# --- probe sweep-summary -------------------------------------------------------------------------

def sweep_summary(res, fmt: str, folder: str) -> None:
    """``probe sweep-summary``: per cell, the metrics' statistics and the outcomes' fractions."""
    from ..analyses.uncertainty import verdict

    if fmt != "table":
        emit(res, fmt, folder, "sweep-summary")
        return
    rows = [[r.label, m, s["n"], s["mean"], s["std"], _interval(s)] for r in res for m, s in r.stats.items()]
    table(["cell", "metric", "seeds", "mean", "std", "95% CI (bootstrap)"], rows)
    if any(r.outcomes for r in res):
        print()
        table(["cell", "outcome", "k/n", "fraction", "95% CI (Wilson)", "vs 1/2"],
                     [[r.label, o, f"{s['k']}/{s['n']}", s["fraction"], _interval(s),
                       verdict(s["ci_lo"], s["ci_hi"], 0.5)] for r in res for o, s in r.outcomes.items()])


def _interval(s: dict) -> str:
    import math

    lo, hi = s["ci_lo"], s["ci_hi"]
    return f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) and math.isfinite(hi) else "-"
