"""Results to stdout: an aligned table, strict JSON or tidy CSV, for any Result.

JSON is strict (``allow_nan=False``): NaN and infinities are written as ``null``; a string holding
surrogate escapes (a file name that is not UTF-8) is written with ``\\xNN`` for each undecodable
byte (:func:`probe.printable.shown`), so the output is valid Unicode that any JSON parser takes. CSV is the
same ``step,metric,key,value`` for every probe (``Result.rows()``), with an empty cell where
a value is undefined, and both keep text from files exact. Tables show an undefined value as ``-``, integers
without decimals, and text (a tensor or group name, a path) through :func:`probe.printable.terminal`, its control
characters as ``\\xNN``: a name must not retitle or clear the terminal. Logs go to stderr.

A probe's table fits :data:`WIDTH` columns (``tests/test_output_readable.py`` runs every probe): a
wide table wraps its columns into blocks that repeat the row labels, a summary too wide for one
table splits into one table per keyed metric (``sv1[layer0/W_K]``: a table ``sv1:`` with a column
per key), steps are always rows, and a matrix shows its corner with a note. ``--wide`` prints
everything at full width; ``-f csv`` and ``-f json`` always hold every value. ``probe batch``'s table
shows an error or warning row's reason, its whole message on stderr (:func:`batch_table`).
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import sys
from typing import Iterable, Sequence

from .printable import shown, terminal
from .analyses.base import TIDY, jsonable, split_key, tidy_rows, tidy_value   # the one source of every CSV row

WIDTH = 80       # the terminal ls and git assume: every probe table fits it unless --wide
MAX_CELL = 40    # a longer label (a token's text, a checkpoint's tensor name) is cut with … to fit
MAX_KEYS = 24    # keys of one metric a summary shows (sink_mass of every head of a 12 x 12 model: 144)
MORE_HINT = "--wide: all; -f csv or json: every value"
REASON = 40      # a batch table's error or warning cell: the message's first clause; stderr gets all of it


def cell(v, small: bool = False) -> str:
    """A value as a table shows it; ``small``: a float column whose numbers are all below 1e-3, which
    keep three significant digits (an ε share of 4e-05 is not 0.0000)."""
    if tidy_value(v) is None:   # undefined: None, NaN, infinite
        return "-"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
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


def cut(text: str, n: int | None) -> str:
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
    rows = [[cut(cell(v, i in small), limit) for i, v in enumerate(r)] for r in rows]
    if not rows:
        return
    header = [cut(terminal(h), limit) for h in header]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    for b, cols in enumerate(_blocks(widths, keep, width)):
        if b:
            out.write("\n")
        for cells in [header] + rows:
            out.write("  ".join(cells[i].ljust(widths[i]) if i in left else cells[i].rjust(widths[i])
                                for i in cols).rstrip() + "\n")


def wrapped(prefix: str, items: Sequence[str], width: int | None) -> None:
    """``prefix`` and the items on one line, continued on indented lines past ``width`` (a prefix too
    long to share its line with the first item has the line to itself)."""
    line, pad = prefix, " " * min(4, len(prefix))
    for it in items:
        if width is not None and line.strip() and len(line) + 1 + len(it) > width:
            _line(line)
            line = pad + it
        else:
            line = f"{line} {it}" if line else it
    _line(line)


def note(text: str, hint: str, width: int | None) -> None:
    """``text (hint)`` on one line, or the hint in parentheses on the next where one line would pass
    ``width``: a note under a table fits its columns too."""
    if width is None or len(text) + len(hint) + 3 <= width:
        _line(f"{text} ({hint})")
    else:
        _line(text)
        _line(f"  ({hint})")


def _line(text: str) -> None:
    """A line of a table's text that may quote a file (a tensor's, a group's or a file's name)."""
    print(terminal(text))


def _fitted(text: str) -> None:
    """A line of ``probe info`` (its text escaped as :func:`_line`'s): one past the terminal's width
    (COLUMNS; 80 with no terminal) is broken between words, each further part indented under the first
    one's value; a word wider than that (a path, a tensor's name) stays whole."""
    import shutil
    import textwrap

    text = terminal(text).rstrip()
    width = shutil.get_terminal_size((80, 24)).columns
    if len(text) > width and len(text) > 11 and text[:11].strip() and not text[:11].startswith(" "):
        # the 11-column label stays with its value's first word: 'file' alone above a long path reads badly
        parts = textwrap.wrap(text[11:], max(width - 11, 20), break_long_words=False, break_on_hyphens=False)
        text = "\n".join(text[:11] + p if i == 0 else " " * 11 + p for i, p in enumerate(parts))
    elif len(text) > width:
        text = textwrap.fill(text, width, initial_indent="", subsequent_indent=" " * 11,
                             break_long_words=False, break_on_hyphens=False)
    print(text)


def _std(c: dict) -> str:
    """The embedding's initial std beside gamma: the same gamma is another regime at another width."""
    if c.get("init_std"):
        return f"std {c['init_std']:g} (init_std)"
    gamma, d = c.get("gamma_embed") or c.get("gamma"), c.get("d_model")
    if not isinstance(gamma, (int, float)) or not isinstance(d, int) or d < 1:
        return ""
    ref = c.get("gamma_ref_width")
    if isinstance(ref, int) and ref > 1:   # the std of width ref, at every width
        return f"init std {ref}^-{gamma:g} = {ref ** -gamma:.3g} (gamma_ref_width)"
    return f"init std {d}^-{gamma:g} = {d ** -gamma:.3g}"


def _shown(v):
    """Plain JSON data with every string (keys too) made valid Unicode (:func:`probe.printable.shown`)."""
    if isinstance(v, str):
        return shown(v)
    if isinstance(v, dict):
        return {shown(k) if isinstance(k, str) else k: _shown(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_shown(x) for x in v]
    return v


def write_json(obj, out=None) -> None:
    """``obj`` as strict JSON (numpy values converted, non-finite floats as null, strings valid Unicode)."""
    out = out or sys.stdout
    json.dump(_shown(jsonable(obj)), out, indent=2, allow_nan=False)
    out.write("\n")


def write_csv(header: Sequence[str], rows: Iterable[Sequence], out=None) -> None:
    w = csv.writer(out or sys.stdout, lineterminator="\n")
    w.writerow(header)
    w.writerows(["" if tidy_value(v) is None else v for v in r] for r in rows)


def _fits(header: Sequence[str], rows: list[list]) -> bool:
    small = _small_columns(rows)
    widths = [max([len(terminal(h))] + [len(cell(r[i], i in small)) for r in rows]) for i, h in enumerate(header)]
    return sum(widths) + 2 * (len(widths) - 1) <= WIDTH


def summary_table(results, wide: bool = False) -> None:
    """The summary numbers, one row per step (a trajectory reads down a column). Too wide for one
    table: the plain numbers first, then a table per keyed metric (``sv1[layer0/W_K]``: under ``sv1:``,
    a column per key, at most :data:`MAX_KEYS` of them), each wrapped to :data:`WIDTH`."""
    summaries = [r.summary() for r in results]
    keys = list(dict.fromkeys(k for s in summaries for k in s))
    if not keys:
        return
    def rows(ks):
        return [[r.step] + [s.get(k) for k in ks] for r, s in zip(results, summaries)]

    if wide or _fits(["step"] + keys, rows(keys)):
        table(["step"] + keys, rows(keys), width=None if wide else WIDTH)
        return
    plain = [k for k in keys if not split_key(k)[1]]
    families: dict[str, list[tuple[str, str]]] = {}
    for k in keys:
        metric, key = split_key(k)
        if key:
            families.setdefault(metric, []).append((k, key))
    if plain:
        table(["step"] + plain, rows(plain), width=WIDTH)
    for n, (metric, ks) in enumerate(families.items()):
        if plain or n:
            print()
        if len(ks) > MAX_KEYS:
            note(f"{metric}: the first {MAX_KEYS} of {len(ks)} keys", MORE_HINT, WIDTH)
        else:
            _line(f"{metric}:")
        table(["step"] + [key for _, key in ks[:MAX_KEYS]], rows([k for k, _ in ks[:MAX_KEYS]]), width=WIDTH)


# --- probe batch ----------------------------------------------------------------------------------

def reason(message: str, subject: str = "") -> str:
    """``message``'s first clause in at most :data:`REASON` columns (cut after a word, with …): a table
    cell. A message that starts with ``subject`` (the row's path, or a file in its folder) starts after
    it; one that is ``Type: text`` (not a ProbeError: :func:`probe.errors.failure`) gives its type."""
    text = terminal(message)
    if subject and text.startswith(terminal(subject)):
        text = text[len(terminal(subject)):].partition(": ")[2] or text
    first = re.split(r": |; | \(|\. ", text, maxsplit=1)[0].strip()
    if len(first) <= REASON:
        return first
    head = first[:REASON - 1]
    return (head.rsplit(" ", 1)[0] if " " in head[REASON // 2:] else head) + "…"


def _near(path: str) -> str:
    """A path below the working folder relative to it, as ``ls`` and ``git`` show one; any other path (a
    hub source, a path outside) as it is."""
    try:
        rel = os.path.relpath(path) if os.path.isabs(path) else path
    except (OSError, ValueError):   # no working folder any more; another drive
        return path
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def batch_table(header: Sequence[str], rows: list[Sequence]) -> None:
    """``probe batch``'s table: paths below the working folder relative to it; an error or warning row
    shows :func:`reason` (its message would make every row as wide as itself: up to 358 columns) and the
    whole message goes to stderr, a line per row, after the table. CSV and JSON keep the absolute path
    and the whole message in their columns."""
    path, probe, metric, value = (list(header).index(c) for c in ("path", "probe", "metric", "value"))
    shown_rows, notes = [], []
    for r in rows:
        r = list(r)
        full, r[path] = r[path], _near(r[path])
        if r[metric] in ("error", "warning"):
            message = str(r[value])
            rest = message[len(full) + 2:] if message.startswith(f"{full}: ") else message
            notes.append(f"{r[metric]}: {r[path]} ({r[probe]}): {rest}")
            r[value] = reason(message, full)
        shown_rows.append(r)
    table(header, shown_rows)
    for n in notes:
        print(terminal(n), file=sys.stderr)


# --- the per-probe detail shown above the summary when one step is selected ------------------------
def token_labels(r) -> list:
    """Row labels of a result's tokens: the id, with its text where the source has a vocabulary."""
    texts = r.texts.get() if r.texts is not None else None
    if texts is None:
        return [int(i) for i in r.ids]
    return [f"{int(i)} {t!r}" for i, t in zip(r.ids, texts)]


def emit(results, fmt: str, file: str, probe: str, wide: bool = False) -> None:
    """Results of probe ``probe`` (its name) on ``file`` to stdout in ``fmt`` (table / json / csv);
    ``wide``: tables at full width, every column of a matrix (else they fit :data:`WIDTH`)."""
    if fmt == "json":
        write_json({"file": file, "probe": probe, "results": [r.to_dict() for r in results]})
    elif fmt == "csv":
        write_csv(TIDY, tidy_rows(results))
    elif results:
        tables(results, probe, wide)


def tables(results, probe: str, wide: bool = False) -> None:
    """The tables of probe ``probe``'s results, as its declaration lays them out
    (:class:`probe.registry.Probe`: ``style``, ``detail``, ``tables``)."""
    from . import registry

    try:
        spec = registry.get(probe)
    except KeyError:   # sweep-summary's cells: the summary alone
        spec = None
    width = None if wide else WIDTH
    detail = spec.detail if spec else None
    if spec and spec.style == "steps":   # a table per step
        for r in results:
            print(f"step {r.step}")
            detail(r, width)
    elif len(results) > 1:
        spec.tables(results, width) if spec and spec.tables else summary_table(results, wide)
    elif detail is not None:
        detail(results[0], width)
        if spec.style == "summary":
            summary_table(results, wide)
    else:
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
    _fitted(f"file       {d['file']}  (schema {d['schema_version']}, written by {d['package_version']})")
    _fitted(f"task       {d['task'].get('kind')}: splits {', '.join(d['task'].get('splits', []))}")
    if d["task"].get("stories"):  # a text run: what its story source was (story_text since issue 38)
        _fitted(f"stories    {d['task'].get('story_text') or d['task']['stories']}")
    if d.get("written_by", "probe-train") != "probe-train":   # a model recorded from the user's own loop
        own = [f"{terminal(str(k))}={terminal(str(v))}" for k, v in d.get("own_config", {}).items()]
        every = c.get("every")   # (the file's text: escaped, as every string of it)
        _fitted(f"recorded   by {terminal(d['written_by'])}: {terminal(str(c.get('model')))}, "
              f"{terminal(str(c.get('layout')))} layout, "
              + ("every step" if every == 1 else f"every {terminal(str(every))} steps"))
        if own:   # the user's own settings (Recorder config=): a line of their own, as long as they are
            _fitted(f"config     {'  '.join(own)}")
        tied = c.get("tied") if isinstance(c.get("tied"), dict) else {}
        if tied:   # stored once: the probes read the tensor it is tied to
            _fitted("tied       " + ", ".join(f"{terminal(str(k))} is {terminal(str(v))}" for k, v in tied.items())
                  + " (stored once)")
        left = d["task"].get("left_out") or []
        if left:
            _fitted(f"left out   {len(left)} tensors (Recorder keep=): "
                  + ", ".join(terminal(str(n)) for n in left[:2]) + (", ..." if len(left) > 2 else ""))
    else:
        _fitted(f"model      {c.get('model')}  gamma={c.get('gamma')}  d_model={c.get('d_model')}  layers={c.get('layers')}"
                f"  heads={c.get('heads')}  d_ff={c.get('d_ff')}")
        extra = [f"{k}={c[k]}" for k in ("gamma_embed", "gamma_attn", "gamma_qk", "gamma_vo", "gamma_mlp", "gamma_head",
                                         "gamma_ref_width", "init_std", "d_ff_ratio", "kv_heads") if c.get(k)] \
            + [k for k in ("depth_scale", "tie_embeddings", "gated_attention") if c.get(k)] \
            + ([f"adam_eps={c['adam_eps']:g}"] if c.get("adam_eps", 1e-8) != 1e-8 else [])
        _fitted(f"           norm={c.get('norm')}  norm_eps={c.get('norm_eps', 1e-5):g}  {_std(c)}  " + "  ".join(extra))
        env = d.get("environment") or {}
        _fitted(f"training   {c.get('steps')} steps, batch {c.get('batch_size')}, lr {c.get('lr')}, "
                f"weight decay {c.get('weight_decay')}, seed {c.get('seed')}")
        if "stop_at" in env:
            _fitted(f"           stopped at step {env['stop_at']} as asked (--stop-at; --resume trains on)")
        if env:
            _fitted(f"trained    {env.get('device')}, {env.get('threads')} torch thread(s)"
                    + (f"; {env['precision']} matmuls" if "precision" in env else "")
                    + (f"; one of an ensemble of {env['ensemble']}" if env.get("ensemble", 1) != 1 else "")
                    + (f" (resumed at step {env['resumed_at']})" if "resumed_at" in env else ""))
            _fitted(f"           torch {env.get('torch')}, numpy {env.get('numpy')}, h5py {env.get('h5py')}, "
                    f"python {env.get('python')}")
            if env.get("device_name") or env.get("commit"):
                _fitted(f"           on {env.get('device_name') or env.get('device')}"
                      + (f", toolkit at commit {env['commit']}" if env.get("commit") else ""))
    _fitted(f"snapshots  {d['snapshots']}: steps {shown}")
    for split, m in d["metrics"].items():
        if m:
            _fitted(f"  {terminal(split):<10} loss {cell(m.get('loss'))}  acc {cell(m.get('acc'))}")
    _fitted("groups")
    for k, v in d["groups"].items():
        words = d["group_strings"].get(k)
        shown = " ".join(repr(w) for w in words[:10]) + (" ..." if len(words) > 10 else "") if words else _ids(v)
        _fitted(f"  {terminal(k):<10} {len(v):>4} tokens  {shown}")   # aligned as shown
    canonical = [k for k in d["tensors"] if k in d["canonical"]]
    parameters = [k for k in d["tensors"] if k not in d["canonical"]]
    # one dataset each, listed twice: the canonical names are links to the parameters' datasets
    for title, names in (("tensors (per snapshot), by canonical name", canonical),
                         ("every parameter by the model's own name (the tensors above are links to these)",
                          parameters)):
        _fitted(title)
        width = max([28, *(len(terminal(k)) for k in names)])   # a model's own names can be long
        for k in names:
            _fitted(f"  {terminal(k):<{width}} {' x '.join(map(str, d['tensors'][k]))}")


def _checkpoint_info(d: dict, fmt: str) -> None:
    if fmt == "csv":
        write_csv(TIDY,
                         [(d["step"], k, "", d[k]) for k in ("format", "layout", "layers", "heads", "parameters")]
                         + [(d["step"], "shape", n, "x".join(map(str, t["shape"]))) for n, t in d["tensors"].items()]
                         + [(d["step"], "dtype", n, t["dtype"]) for n, t in d["tensors"].items()])
        return
    _fitted(f"file       {d['file']}")
    _line(f"format     {d['format']}, step {d['step'] if d['step'] is not None else '-'}")
    if d.get("checkpoints"):   # a folder of one training's checkpoints: the newest is described
        steps = list(d["checkpoints"])
        shown = ", ".join(map(str, steps if len(steps) <= 10 else steps[:4] + ["..."] + steps[-2:]))
        _fitted(f"steps      {len(steps)} checkpoints: {shown} (the newest described)")
    if d["layout"]:
        heads = "no head count (no config.json)" if d["heads"] is None else f"{d['heads']} heads"
        _fitted(f"layout     {d['layout']}: {d['layers']} layers, {heads}, "
              f"{len(d['canonical'])} canonical tensors")
    else:
        _fitted(f"layout     unknown ({d['layout_error'].split('; tensors found')[0]})")
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
    from .analyses.uncertainty import verdict

    if fmt != "table":
        emit(res, fmt, folder, "sweep-summary")
        return
    rows = [[r.label, m, s["n"], s["mean"], s["std"], _interval(s)] for r in res for m, s in r.stats.items()]
    # not wrapped at WIDTH: a row holds one cell's statistic, and a verdict split from its interval was
    # harder to read than a long line (long cell and metric names: gamma=0.3,steps=1000, probe options)
    table(["cell", "metric", "seeds", "mean", "std", "95% CI (bootstrap)"], rows, left=(0, 1))
    if any(r.outcomes for r in res):
        print()
        # k/n says the fraction (CSV and JSON hold it as a number): ten columns fewer
        table(["cell", "outcome", "k/n", "95% CI (Wilson)", "vs 1/2"],
              [[r.label, o, f"{s['k']}/{s['n']}", _interval(s),
                verdict(s["ci_lo"], s["ci_hi"], 0.5)] for r in res for o, s in r.outcomes.items()], left=(0, 1))


def _interval(s: dict) -> str:
    lo, hi = s["ci_lo"], s["ci_hi"]
    return f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) and math.isfinite(hi) else "-"
