"""Results to stdout: an aligned table, strict JSON or tidy CSV, for any Result.

JSON is strict (``allow_nan=False``): NaN and infinities are written as ``null``; a string holding
surrogate escapes (a file name that is not UTF-8) is written with ``\\xNN`` for each undecodable
byte (:func:`probe._text.shown`), so the output is valid Unicode that any JSON parser takes. CSV is the
same ``step,metric,key,value`` for every probe (``Result.rows()``), with an empty cell where
a value is undefined, and both keep text from files exact. Tables show an undefined value as ``-``, integers
without decimals, and text (a tensor or group name, a path) through :func:`probe._text.terminal`, its control
characters as ``\\xNN``: a name must not retitle or clear the terminal. Logs go to stderr.

A probe's table fits :data:`WIDTH` columns (``tests/test_output_readable.py`` runs every probe): a
wide table wraps its columns into blocks that repeat the row labels, a summary too wide for one
table splits into one table per keyed metric (``sv1[layer0/W_K]``: a table ``sv1:`` with a column
per key), steps are always rows, and a matrix shows its corner with a note. ``--wide`` prints
everything at full width; ``-f csv`` and ``-f json`` always hold every value.
"""
from __future__ import annotations

import csv
import json
import math
import sys
from typing import Iterable, Sequence

from .._text import shown, terminal

TIDY = ("step", "metric", "key", "value")
WIDTH = 100      # a terminal's columns: every probe table fits them unless --wide
MAX_CELL = 40    # a longer label (a token's text, a checkpoint's tensor name) is cut with … to fit
MAX_KEYS = 24    # keys of one metric a summary shows (sink_mass of every head of a 12 x 12 model: 144)
_MORE = "--wide: all; -f csv or json: every value"


def _cell(v, small: bool = False) -> str:
    """A value as a table shows it; ``small``: a float column whose numbers are all below 1e-3, which
    keep three significant digits (an ε share of 4e-05 is not 0.0000)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.3g}" if small else f"{v:.4f}"
    return terminal(str(v))   # as printed: \x1b is four columns wide; an int prints as an int


def _small_columns(rows: list) -> set[int]:
    """Columns of floats (and blanks) whose finite values are all below 1e-3 in size, not all zero."""
    out = set()
    for i in range(max((len(r) for r in rows), default=0)):
        vals = [r[i] for r in rows if i < len(r) and isinstance(r[i], float) and not isinstance(r[i], bool)
                and math.isfinite(r[i])]
        if vals and all(isinstance(r[i], float) or r[i] is None for r in rows if i < len(r)) \
                and max(abs(v) for v in vals) < 1e-3 and any(vals):
            out.add(i)
    return out


def _cut(text: str, n: int | None) -> str:
    """``text`` in at most ``n`` columns, its middle given up for …: both ends tell names apart
    (``transformer.h.11.mlp.c_proj.weight``: its layer and its matrix)."""
    if n is None or len(text) <= n:
        return text
    head = (n - 1) // 2
    return text[:head] + "…" + text[len(text) - (n - 1 - head):]


def _blocks(widths: list[int], keep: int, width: int | None) -> list[list[int]]:
    """Column indices per block: every block repeats the first ``keep`` columns (the row labels) and
    takes the other columns in order while its lines stay within ``width`` (None: one block)."""
    lead = list(range(min(keep, len(widths))))
    rest = list(range(len(lead), len(widths)))
    if width is None or not rest:
        return [lead + rest]
    used = sum(widths[i] for i in lead) + 2 * max(len(lead) - 1, 0)
    blocks, cur, w = [], [], used
    for i in rest:
        add = widths[i] + (2 if lead or cur else 0)
        if cur and w + add > width:
            blocks.append(lead + cur)
            cur, w = [], used
            add = widths[i] + (2 if lead else 0)
        cur.append(i)
        w += add
    return blocks + [lead + cur]


def table(header: Sequence[str], rows: Iterable[Sequence], out=None, left: Sequence[int] = (),
          width: int | None = None, keep: int = 1) -> None:
    """An aligned table: numbers right-aligned, the columns in ``left`` (text) left-aligned. With a
    ``width``, cells are cut to :data:`MAX_CELL` and columns past ``width`` wrap into further blocks
    (a blank line apart), each repeating the first ``keep`` columns. No rows: nothing is printed, never
    a header alone."""
    out = out or sys.stdout
    limit = None if width is None else MAX_CELL
    rows = list(rows)
    small = _small_columns(rows)
    rows = [[_cut(_cell(v, i in small), limit) for i, v in enumerate(r)] for r in rows]
    if not rows:
        return
    header = [_cut(terminal(h), limit) for h in header]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    for b, cols in enumerate(_blocks(widths, keep, width)):
        if b:
            out.write("\n")
        for cells in [header] + rows:
            out.write("  ".join(cells[i].ljust(widths[i]) if i in left else cells[i].rjust(widths[i])
                                for i in cols).rstrip() + "\n")


def _words(prefix: str, items: Sequence[str], width: int | None) -> None:
    """``prefix`` and the items on one line, continued on indented lines past ``width``."""
    line, pad = prefix, " " * min(4, len(prefix))
    for it in items:
        if width is not None and line.strip() and len(line) + 1 + len(it) > width and line != prefix:
            _line(line)
            line = pad + it
        else:
            line = f"{line} {it}" if line else it
    _line(line)


def _line(text: str = "") -> None:
    """A line of a table's text that may quote a file (a tensor's, a group's or a file's name)."""
    print(terminal(text))


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
    """``step,metric,key,value`` rows of a list of results."""
    return [(r.step, m, k, v) for r in results for m, k, v in r.rows()]


def _fits(header: Sequence[str], rows: list[list]) -> bool:
    small = _small_columns(rows)
    widths = [max([len(terminal(h))] + [len(_cell(r[i], i in small)) for r in rows]) for i, h in enumerate(header)]
    return sum(widths) + 2 * (len(widths) - 1) <= WIDTH


def summary_table(results, wide: bool = False) -> None:
    """The summary numbers, one row per step (a trajectory reads down a column). Too wide for one
    table: the plain numbers first, then a table per keyed metric (``sv1[layer0/W_K]``: under ``sv1:``,
    a column per key, at most :data:`MAX_KEYS` of them), each wrapped to :data:`WIDTH`."""
    from ..analyses.base import split_key

    summaries = [r.summary() for r in results]
    keys = list(dict.fromkeys(k for s in summaries for k in s))
    if not keys:
        return
    rows = [[r.step] + [s.get(k) for k in keys] for r, s in zip(results, summaries)]
    if wide or _fits(["step"] + keys, rows):
        table(["step"] + keys, rows, width=None if wide else WIDTH)
        return
    plain = [k for k in keys if not split_key(k)[1]]
    families: dict[str, list[tuple[str, str]]] = {}
    for k in keys:
        metric, key = split_key(k)
        if key:
            families.setdefault(metric, []).append((k, key))
    if plain:
        table(["step"] + plain, [[r.step] + [s.get(k) for k in plain] for r, s in zip(results, summaries)],
              width=WIDTH)
    for n, (metric, ks) in enumerate(families.items()):
        if plain or n:
            print()
        more = f" the first {MAX_KEYS} of {len(ks)} keys ({_MORE})" if len(ks) > MAX_KEYS else ""
        _line(f"{metric}:{more}")
        ks = ks[:MAX_KEYS]
        table(["step"] + [key for _, key in ks], [[r.step] + [s.get(k) for k, _ in ks]
                                                 for r, s in zip(results, summaries)], width=WIDTH)


# --- the per-probe detail shown above the summary when one step is selected ------------------------
def _labels(r) -> list:
    """Row labels of a result's tokens: the id, with its text where the source has a vocabulary."""
    texts = r.texts.get() if r.texts is not None else None
    if texts is None:
        return [int(i) for i in r.ids]
    return [f"{int(i)} {t!r}" for i, t in zip(r.ids, texts)]


def _similarity(r, width) -> None:
    if r.matrix is None:
        return
    k = len(r.ids)
    labels = [_cut(_cell(x), MAX_CELL) for x in _labels(r)]
    cw = max([5] + [len(str(int(i))) for i in r.ids])       # a cell: -0.47
    lw = max([5] + [len(x) for x in labels])
    show = list(range(k))
    if width is not None and lw + k * (cw + 2) > width:
        # the corner of the symmetric matrix: the first and last h tokens as rows and columns, a … between
        h = max(1, (width - lw - (cw + 2)) // (cw + 2) // 2)
        show = list(range(h)) + [None] + list(range(k - h, k))
    print(f"cosine similarity, step {r.step}")
    head = ["token"] + [str(int(r.ids[i])) if i is not None else "…" for i in show]
    rows = [[labels[i]] + [f"{r.matrix[i, j]:.2f}" if j is not None else "…" for j in show] if i is not None
            else ["…"] + [""] * len(show) for i in show]
    table(head, rows, width=width)
    if len(show) < k:
        print(f"matrix {k}×{k}: its first and last {(len(show) - 1) // 2} tokens shown ({_MORE})")
    print()


def _pca(r, width) -> None:
    table(["token", "group"] + [f"PC{i + 1}" for i in range(r.coords.shape[1])],
          [[lab, g] + list(map(float, c)) for lab, g, c in zip(_labels(r), r.groups, r.coords)],
          width=width, keep=2)
    print()


def _align(r, width) -> None:
    _words(f"layer {r.layer} head {r.head}: singular values of W_V",
           [f"{v:.3g}" for v in r.singular_values[:8]], width)
    if len(r.ov_singular_values):
        _words("  of W_V W_O", [f"{v:.3g}" for v in r.ov_singular_values[:8]], width)
    if r.group_mean:
        k = len(next(iter(r.group_mean.values())))
        table(["group"] + [f"|cos| v{i + 1}" for i in range(k)], [[g] + v for g, v in r.group_mean.items()],
              width=width)
    else:   # a checkpoint, or a run without token groups: no table, and no header without rows
        print("no token groups to compare W_V's singular vectors with (--groups FILE names some)")
    print()


def _condense(r, width) -> None:
    _words("covariance eigenvalues:", [f"{v:.3g}" for v in r.eigenvalues[:10]], width)
    if r.neuron_tensor:
        sizes = r.neuron_group_sizes
        _words(f"neuron groups of {r.neuron_tensor} (cos > {r.threshold:g}): {len(sizes)}; sizes",
               [str(n) for n in sizes[:10]] + (["…"] if len(sizes) > 10 else []), width)
    print()


def _theory(r, width) -> None:
    print(f"profile cos(w({r.anchor}), w(s_j))")
    row0 = list(r.ids).index(r.anchor)
    table(["token", "measured", "eq14", "P^s theory"],
          [[int(t), float(a), float(b), float(c)] for t, a, b, c in
           zip(r.ids, r.profile_measured, r.profile_reconstructed, r.predicted[row0])], width=width)
    print()


def _ood(r, width) -> None:
    table(["split / combination", "n", "loss", "acc"],
          [[s, m["n"], m["loss"], m["acc"]] for s, m in r.splits.items()]
          + [[f"  held-out {c}", m["n"], m["loss"], m["acc"]] for c, m in r.combos.items()]
          + [[f"  target {t}", m["n"], None, m["acc"]] for t, m in r.targets.items()], width=width)
    print()


def _spectrum(r, width) -> None:
    # the columns are LayerSpectrum's attributes and the CSV's metric names
    table(["layer", "shape", "spectral_norm", "log_norm", "stable_rank", "entropy_rank", "alpha", "xmin", "xmax",
           "ks_distance"],
          [[l.name, "x".join(map(str, l.shape)), l.spectral_norm, l.log_norm, l.stable_rank, l.entropy_rank,
            l.alpha, l.xmin, l.xmax, l.ks_distance] for l in r.layers], width=width)
    print()


def _norms_head(r, step: bool = True) -> None:
    print(f"norm sites{f', step {r.step}' if step else ''}: eps {r.eps:g}; eps_share s = eps / (m + eps); "
          f"saturated from s >= {r.saturation:g}")


def _norms(r, width) -> None:
    _norms_head(r)
    med = r.median_square if r.median_square is not None else [None] * len(r.sites)
    gain = r.gain if r.gain is not None else [None] * len(r.sites)
    # the columns are NormsResult's attributes (m: mean_square)
    table(["site", "mean_square", "median_square", "eps_share", "gain", "effective_gain", "saturated"],
          [[s, f"{m:.3g}", "-" if md is None else f"{md:.3g}", float(e), None if g is None else float(g),
            f"{eg:.4g}", s in r.saturated]
           for s, m, md, e, g, eg in zip(r.sites, r.mean_square, med, r.eps_share, gain, r.effective_gain)],
          width=width)
    print(f"{len(r.saturated)} of {len(r.sites)} sites saturated")


def _sinks(r, width) -> None:
    m = r.sink_mass
    H = m.shape[1] if m.ndim == 2 else 0
    print(f"sink_mass: attention on position 0 of queries at positions >= {r.min_query}, step {r.step}")
    print(f"(causal averaging: {r.uniform_mass:.3f}; a sink head from {r.threshold:g})")
    table(["layer"] + [f"head {h}" for h in range(H)] + ["sink_heads"],
          [[l] + [float(v) for v in row] + [int(r.sink_heads[l].sum())] for l, row in enumerate(m)], width=width)
    if r.first_norm_ratio is not None:
        last = len(r.first_norm_ratio) - 1
        _words("first_norm_ratio (residual norm at position 0 / the median position's):",
               [f"{'block' + str(b) if b < last else 'out'} {v:.2f}" for b, v in enumerate(r.first_norm_ratio)],
               width)
    print(f"sink heads: {int(r.sink_heads.sum())} of {r.sink_heads.size}")
    print()


def _rank(r, width) -> None:
    metrics = list(next(iter(r.numbers.values()), {}))
    print(f"step {r.step}")
    table(["matrix"] + metrics, [[n] + [r.numbers[n][m] for m in metrics] for n in r.names], width=width)


def _rank_minima(r, width) -> None:
    print(f"{r.metric} over steps {r.steps[0]}..{r.steps[-1]} ({len(r.steps)} snapshots)")
    print(f"condense then expand: the minimum strictly inside, dip <= {1 - r.margin:g}, rebound >= {1 + r.margin:g}")
    table(["matrix", "initial", "minimum", "min_step", "final", "dip", "rebound", "condense_then_expand"],
          [[n, r.initial[n], r.minimum[n], r.min_step[n], r.final[n], r.dip(n), r.rebound(n),
            r.condense_then_expand(n)] for n in r.names], width=width)


def _tokens(r, width) -> None:
    print(f"A = {terminal(r.label_a)}\nB = {terminal(r.label_b)}")   # paths: may hold any character
    print(f"{r.n} tokens: mean_loss_a {r.mean_loss_a:.4f}, mean_loss_b {r.mean_loss_b:.4f}")
    print(f"mean_delta (ΔL = L_A − L_B) {r.mean_delta:+.4f}; total_gain of A Σ(−ΔL) {r.total_gain:+.2f}")
    # the columns are the result's keys (groups[g]["gain_share"], buckets[f][i]["token_share"], ...)
    if r.groups:
        table(["group", "n", "mean_delta", "gain_share"],
              [[g, v["n"], v["mean_delta"], v["gain_share"]] for g, v in r.groups.items()], width=width)
        print()
    table(["feature", "bucket", "range", "n", "token_share", "mean_delta", "gain_share"],
          [[f, f"q{b['bucket']}", f"{b['lo']:.3g}..{b['hi']:.3g}", b["n"], b["token_share"], b["mean_delta"],
            b["gain_share"]] for f, bs in r.buckets.items() for b in bs], width=width)


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


def emit(results, fmt: str, file: str, probe: str, wide: bool = False) -> None:
    """Results of ``probe`` on ``file`` to stdout in ``fmt`` (table / json / csv); ``wide``: tables at
    full width, every column of a matrix (else they fit :data:`WIDTH`)."""
    if fmt == "json":
        write_json({"file": file, "probe": probe, "results": [r.to_dict() for r in results]})
    elif fmt == "csv":
        write_csv(TIDY, tidy_rows(results))
    elif results:
        _tables(results, probe, wide)


def _tables(results, probe: str, wide: bool) -> None:
    width = None if wide else WIDTH
    if probe == "spectrum":  # a table per step: one row per layer
        for r in results:
            print(f"step {r.step}")
            _spectrum(r, width)
        return
    if probe in ("norms", "rank") and len(results) > 1:   # the trajectory: one row per step
        if probe == "norms":
            _norms_head(results[-1], step=False)
            print()
        summary_table(results, wide)
        return
    if _detail_only(probe):
        for i, r in enumerate(results):
            if i:
                print()
            DETAILS[probe](r, width)
        return
    if len(results) == 1 and probe in DETAILS:
        DETAILS[probe](results[0], width)
    summary_table(results, wide)


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
    _line(f"file       {d['file']}  (schema {d['schema_version']}, written by {d['package_version']})")
    _line(f"task       {d['task'].get('kind')}: splits {', '.join(d['task'].get('splits', []))}")
    _line(f"model      {c.get('model')}  gamma={c.get('gamma')}  d_model={c.get('d_model')}  layers={c.get('layers')}"
          f"  heads={c.get('heads')}  d_ff={c.get('d_ff')}  norm={c.get('norm')}")
    extra = [f"{k}={c[k]}" for k in ("gamma_embed", "gamma_attn", "gamma_mlp", "gamma_head", "init_std", "kv_heads")
             if c.get(k)] + [k for k in ("tie_embeddings", "gated_attention") if c.get(k)]
    if c.get("model") == "llama" or extra or c.get("norm_eps", 1e-5) != 1e-5:
        _line(f"           norm_eps={c.get('norm_eps', 1e-5):g}  " + "  ".join(extra))
    _line(f"training   {c.get('steps')} steps, batch {c.get('batch_size')}, lr {c.get('lr')}, "
          f"weight decay {c.get('weight_decay')}, seed {c.get('seed')}")
    env = d.get("environment") or {}
    if env:
        _line(f"trained    {env.get('device')}, {env.get('threads')} torch thread(s); torch {env.get('torch')}, "
              f"numpy {env.get('numpy')}, h5py {env.get('h5py')}, python {env.get('python')}"
              + (f" (resumed at step {env['resumed_at']})" if "resumed_at" in env else ""))
    _line(f"snapshots  {d['snapshots']}: steps {shown}")
    for split, m in d["metrics"].items():
        if m:
            _line(f"  {terminal(split):<10} loss {_cell(m.get('loss'))}  acc {_cell(m.get('acc'))}")
    _line("groups")
    for k, v in d["groups"].items():
        words = d["group_strings"].get(k)
        shown = " ".join(repr(w) for w in words[:10]) + (" ..." if len(words) > 10 else "") if words else _ids(v)
        _line(f"  {terminal(k):<10} {len(v):>4} tokens  {shown}")   # aligned as shown
    _line("tensors (per snapshot)")
    for k, v in d["tensors"].items():
        _line(f"  {terminal(k):<28} {' x '.join(map(str, v))}")


def _checkpoint_info(d: dict, fmt: str) -> None:
    if fmt == "csv":
        write_csv(TIDY,
                         [(d["step"], k, "", d[k]) for k in ("format", "layout", "layers", "heads", "parameters")]
                         + [(d["step"], "shape", n, "x".join(map(str, t["shape"]))) for n, t in d["tensors"].items()]
                         + [(d["step"], "dtype", n, t["dtype"]) for n, t in d["tensors"].items()])
        return
    _line(f"file       {d['file']}")
    _line(f"format     {d['format']}, step {d['step'] if d['step'] is not None else '-'}")
    if d["layout"]:
        heads = "no head count (no config.json)" if d["heads"] is None else f"{d['heads']} heads"
        _line(f"layout     {d['layout']}: {d['layers']} layers, {heads}, "
              f"{len(d['canonical'])} canonical tensors")
    else:
        _line(f"layout     unknown ({d['layout_error'].split('; tensors found')[0]})")
    _line(f"parameters {d['parameters']:,}")
    _line("tensors")
    for n, t in d["tensors"].items():
        tied = f"  (tied to {t['tied_to']})" if "tied_to" in t else ""
        _line(f"  {terminal(n):<48} {' x '.join(map(str, t['shape'])):>16}  {t['dtype']}{tied}")


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
