"""``probe``: analyse snapshot files and checkpoints. A thin layer over :mod:`probe.api`.

Every command parses its options (declared once, in :mod:`.options`), calls one API
function and hands the results to :mod:`.render`: data to stdout (``--format
table|json|csv``), logs, warnings and errors to stderr. Heavy modules (numpy, h5py, torch,
matplotlib) are imported inside the commands, so ``probe --help`` starts instantly.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import Interrupted, ProbeError, run_cli
from .options import (
    ALLOW_NONFINITE, AllowNonfinite,
    PRECISION, THREADS, Precision, Threads, BUCKETS, DELTA, SMOOTH, SPIKE_FACTOR, SPIKE_WINDOW, Delta, Smooth, SpikeFactor, SpikeWindow, FORMAT, FULL, JOBS, MAX_TOKENS, MIN_QUERY, N_COMPONENTS, NEURONS, SATURATION, SEED, SINK_THRESHOLD, STEP,
    TENSOR, THRESHOLD, TOP_K, WINDOW, Anchor, Buckets, Dim, File, Fmt, Format, Full, Groups, Head, Jobs, Layer,
    Mapping, MaxTokens, Probes, Revisions, Metric, MinQuery, NComponents, Neurons, Out, Outcome, Plot, Saturation, Seed, SinkThreshold,
    Source, Splits, Step, StepB, Tensor, Text, Threshold, Tokens, TopK, Window, Words, WordsFile,
)

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Probe training snapshots and checkpoints for reasoning vs memorizing structure.")


def _check_plot(plot: Optional[str]) -> None:
    if plot:
        from ..plotting import check_writable

        check_writable(plot)


def _labels(file: str):
    """Row labels for tables: the id, with its text where the run or checkpoint has a vocabulary."""
    def labels(ids):
        from .. import api

        text = api.token_text(file, ids)
        return [int(i) for i in ids] if text is None else [f"{int(i)} {t!r}" for i, t in zip(ids, text)]

    return labels


def _show(results, fmt: Format, file: str, probe: str, plot: Optional[str]) -> None:
    from . import render

    if plot:  # the figure first: if it cannot be written, the error comes alone
        from .. import plotting

        try:
            plotting.plot_results(probe, results, plot, title=f"{file}: {probe}")
        except OSError as exc:
            raise ProbeError(f"cannot write plot {plot}: {exc.strerror or exc}") from None
        print(f"wrote {plot}", file=sys.stderr)
    render.emit(results, fmt.value, file, probe, _labels(file))


@app.command()
def info(file: Source, fmt: Fmt = FORMAT) -> None:
    """A run: configuration, snapshot steps, token groups, tensors and shapes. A checkpoint: format,
    layout, layers, heads, step, and every tensor's shape and dtype."""
    from .. import api
    from . import render

    d = api.info(file)
    if fmt is Format.json:
        render.write_json(d)
        return
    if "format" in d:  # a checkpoint
        _checkpoint_info(d, fmt)
        return
    if fmt is Format.csv:  # the tidy shape of every command: step,metric,key,value
        last = d["steps"][-1] if d["steps"] else None
        render.write_csv(render.TIDY,
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
            print(f"  {split:<10} loss {render._cell(m.get('loss'))}  acc {render._cell(m.get('acc'))}")
    print("groups")
    for k, v in d["groups"].items():
        words = d["group_strings"].get(k)
        shown = " ".join(repr(w) for w in words[:10]) + (" ..." if len(words) > 10 else "") if words else _ids(v)
        print(f"  {k:<10} {len(v):>4} tokens  {shown}")
    print("tensors (per snapshot)")
    for k, v in d["tensors"].items():
        print(f"  {k:<28} {' x '.join(map(str, v))}")


def _checkpoint_info(d: dict, fmt: Format) -> None:
    from . import render

    if fmt is Format.csv:
        render.write_csv(render.TIDY,
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


@app.command()
def validate(file: File, fmt: Fmt = FORMAT) -> None:
    """Check FILE against the snapshot schema: exit 0 if it matches, else list findings and exit 1."""
    from .. import api
    from . import render

    findings = api.validate(file)
    if fmt is Format.json:
        render.write_json({"file": file, "valid": not findings, "findings": findings})
    elif fmt is Format.csv:
        render.write_csv(render.TIDY, [(None, "finding", file, x) for x in findings])
    else:
        for x in findings or ["valid"]:
            print(f"{file}: {x}")
    if findings:
        raise typer.Exit(1)


@app.command()
def similarity(file: Source, tokens: Tokens = None, words: Words = None, words_file: WordsFile = None,
               tensor: Tensor = TENSOR, groups: Groups = None, mapping: Mapping = None, step: Step = STEP,
               allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Cosine-similarity matrix of token vectors (default tokens: reasoning), with its mean and its
    fall-off with |i - j|; above 4096 tokens only the summaries, accumulated in blocks."""
    from .. import api

    _check_plot(plot)
    res = api.similarity(file, tokens, words=words, words_file=words_file, tensor=tensor, step=step,
                         groups=groups, mapping=mapping, allow_nonfinite=allow_nonfinite)
    _show(res, fmt, file, "similarity", plot)


@app.command()
def pca(file: Source, tokens: Tokens = None, words: Words = None, words_file: WordsFile = None,
        tensor: Tensor = TENSOR, n_components: NComponents = N_COMPONENTS, groups: Groups = None,
        mapping: Mapping = None, step: Step = STEP, allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE,
        fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """PCA of token vectors (default tokens: keys,reasoning,memory): explained variance, coordinates,
    and how ordered each group lies (the number line)."""
    from .. import api

    _check_plot(plot)
    res = api.pca(file, tokens, words=words, words_file=words_file, tensor=tensor, step=step,
                  n_components=n_components, groups=groups, mapping=mapping, allow_nonfinite=allow_nonfinite)
    _show(res, fmt, file, "pca", plot)


@app.command()
def align(file: Source, layer: Layer = None, head: Head = None, top_k: TopK = TOP_K, groups: Groups = None,
          mapping: Mapping = None, step: Step = STEP, allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE,
          fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Singular values of W_V and W_V W_O of one head (default: layer 0, head 0), and |cos| of W_V's
    top singular vectors with each token group."""
    from .. import api

    _check_plot(plot)
    res = api.align(file, layer, head, step=step, top_k=top_k, groups=groups, mapping=mapping,
                    allow_nonfinite=allow_nonfinite)
    _show(res, fmt, file, "align", plot)


@app.command()
def condense(file: Source, tokens: Tokens = None, words: Words = None, words_file: WordsFile = None,
             tensor: Tensor = TENSOR, neurons: Neurons = NEURONS, threshold: Threshold = THRESHOLD,
             groups: Groups = None, mapping: Mapping = None, step: Step = STEP,
             allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Condensation: covariance eigenvalues of token vectors (default: every row; centred, unscaled,
    / (k-1)), effective and stable rank, neuron groups, and the singular values of every weight matrix."""
    from .. import api

    _check_plot(plot)
    res = api.condense(file, tokens, words=words, words_file=words_file, tensor=tensor, neurons=neurons or None,
                       threshold=threshold, step=step, groups=groups, mapping=mapping,
                       allow_nonfinite=allow_nonfinite)
    _show(res, fmt, file, "condense", plot)


@app.command()
def theory(file: File, tokens: Tokens = None, words: Words = None, words_file: WordsFile = None,
           anchor: Anchor = None, dim: Dim = None, seed: Seed = SEED, groups: Groups = None, step: Step = STEP,
           allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Paper 1's theory (default tokens: reasoning): cos of P^s - 1/d_vob against the measured
    embedding cosines, and the eq. 14 reconstruction's cos(w(s0), w(s_j)) profile against the measured one."""
    from .. import api

    _check_plot(plot)
    res = api.theory(file, tokens, words=words, words_file=words_file, anchor=anchor, step=step, dim=dim,
                     seed=seed, groups=groups, allow_nonfinite=allow_nonfinite)
    _show(res, fmt, file, "theory", plot)


@app.command()
def ood(file: File, full: Full = FULL, step: Step = STEP, threads: Threads = THREADS,
        allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Rebuild the model from the stored weights; accuracy and loss per split and per held-out anchor
    combination (composite task: inferential vs symmetric accuracy on the unseen pair)."""
    from .. import api

    _check_plot(plot)
    with _progress("ood") as tick:
        res = api.ood(file, step=step, full=full, threads=threads, progress=tick, allow_nonfinite=allow_nonfinite)
    _show(res, fmt, file, "ood", plot)


@app.command()
def attention(file: File, layer: Layer = None, step: Step = STEP,
              allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Attention on the stored probe batch (default: every layer): distance from causal averaging
    (mean |A_ij - 1/i|, entropy relative to uniform) and where the last position attends (key, anchors)."""
    from .. import api

    _check_plot(plot)
    _show(api.attention(file, layer=layer, step=step, allow_nonfinite=allow_nonfinite), fmt, file, "attention", plot)


@app.command()
def bias(file: File, splits: Splits = None, step: Step = STEP, allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE,
         fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Reasoning bias Delta L = (L_A - L_B) / L_B from the stored per-split losses (--step all for the
    trajectory)."""
    from .. import api

    _check_plot(plot)
    _show(api.bias(file, tuple(splits) if splits else None, step=step, allow_nonfinite=allow_nonfinite), fmt, file,
          "bias", plot)


@app.command()
def spectrum(file: Source, precision: Precision = PRECISION, threads: Threads = THREADS, step: Step = STEP,
             allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Per linear layer: spectral norm, Frobenius norm, stable rank, entropy rank, and the power-law
    exponent alpha of the eigenvalue density with its fit range (WeightWatcher's metrics)."""
    from .. import api

    _check_plot(plot)
    with _progress("spectrum") as tick:
        res = api.spectrum(file, step=step, precision=precision, threads=threads, progress=tick,
                           allow_nonfinite=allow_nonfinite)
    _show(res, fmt, file, "spectrum", plot)


@app.command()
def norms(file: Source, saturation: Saturation = SATURATION, text: Text = None, window: Window = WINDOW,
          max_tokens: MaxTokens = MAX_TOKENS, step: Step = STEP, allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE,
          fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """ε-saturation of every norm site: ε share s = ε / (m + ε), m the mean over tokens of mean(x²)
    (var(x) for LayerNorm), and the effective gain; flags the saturated sites (--step all: site x step)."""
    from .. import api

    _check_plot(plot)
    _show(api.norms(file, step=step, saturation=saturation, text=text, window=window, max_tokens=max_tokens,
                    allow_nonfinite=allow_nonfinite), fmt, file, "norms", plot)


@app.command()
def sinks(file: Source, min_query: MinQuery = MIN_QUERY, sink_threshold: SinkThreshold = SINK_THRESHOLD,
          text: Text = None, window: Window = WINDOW, max_tokens: MaxTokens = MAX_TOKENS, step: Step = STEP,
          allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Attention sinks per layer and head: mean attention on the first position (queries past the first
    few), the fraction of sink heads, and the first position's residual norm over the median position's."""
    from .. import api

    _check_plot(plot)
    _show(api.sinks(file, step=step, min_query=min_query, sink_threshold=sink_threshold, text=text, window=window,
                    max_tokens=max_tokens, allow_nonfinite=allow_nonfinite), fmt, file, "sinks", plot)


@app.command()
def rank(file: Source, minima: Annotated[bool, typer.Option(
             help="report where each effective-rank trajectory bottoms out (its minimum, the step of it, the dip "
                  "and the rebound) over the selected steps (default: every step)")] = False,
         groups: Groups = None, mapping: Mapping = None, step: Step = STEP,
         allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Effective rank, stable rank and top-1/top-5 energy of the centred token embedding and of every weight
    matrix; with --step all a trajectory, with --minima the step where each one bottoms out."""
    from .. import api

    _check_plot(plot)
    if minima:
        res = api.rank_trajectory(file, step="all" if step == STEP else step, groups=groups, mapping=mapping,
                                  allow_nonfinite=allow_nonfinite)
        _show(res, fmt, file, "rank-minima", plot)
        return
    _show(api.rank(file, step=step, groups=groups, mapping=mapping, allow_nonfinite=allow_nonfinite), fmt, file,
          "rank", plot)


@app.command()
def tokens(file: Source, other: Annotated[Optional[str], typer.Argument(
               help="run B (default: FILE again, at --step-b)", show_default=False)] = None,
           step_b: StepB = None, buckets: Buckets = BUCKETS, text: Text = None, window: Window = WINDOW,
           max_tokens: MaxTokens = MAX_TOKENS, step: Step = STEP, allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE,
           fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """Per-token loss difference ΔL = L_A − L_B on identical held-out tokens, bucketed by token frequency,
    n-gram surprisal, how much the context lowers the loss and the predictive entropy: mean ΔL and share of
    the total gain per bucket."""
    from .. import api

    _check_plot(plot)
    _show(api.tokens(file, other, step=step, step_b=step_b, buckets=buckets, text=text, window=window,
                     max_tokens=max_tokens, allow_nonfinite=allow_nonfinite), fmt, file, "tokens", plot)


@app.command()
def dynamics(file: File, delta: Delta = DELTA, smooth: Smooth = SMOOTH, spike_factor: SpikeFactor = SPIKE_FACTOR,
             spike_window: SpikeWindow = SPIKE_WINDOW, step: Step = STEP,
             allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None) -> None:
    """From the per-step loss log: the escape step (loss below ln V - delta, smoothed) and the loss spikes."""
    from .. import api

    _check_plot(plot)
    _show(api.dynamics(file, step=step, delta=delta, smooth=smooth, spike_factor=spike_factor,
                       spike_window=spike_window, allow_nonfinite=allow_nonfinite), fmt, file, "dynamics", plot)


@app.command()
def batch(
    paths: Annotated[list[str], typer.Argument(help="checkpoints: files, folders (a model folder, or a folder "
                                                    "of checkpoints such as checkpoint-500/), globs, and hub "
                                                    "models hf:ORG/NAME[@REV]", show_default=False)],
    probes: Probes,
    out: Out = None, jobs: Jobs = JOBS,
    scheduler: Annotated[Optional[str], typer.Option(help="address of a running Dask scheduler "
                                                          "(tcp://host:8786)")] = None,
    tokens: Tokens = None, words: Words = None, words_file: WordsFile = None, tensor: Tensor = TENSOR,
    groups: Groups = None, mapping: Mapping = None, layer: Layer = None, head: Head = None, top_k: TopK = TOP_K,
    n_components: NComponents = N_COMPONENTS, neurons: Neurons = NEURONS, threshold: Threshold = THRESHOLD,
    anchor: Anchor = None, dim: Dim = None, seed: Seed = SEED, full: Full = FULL, splits: Splits = None,
    saturation: Saturation = SATURATION, min_query: MinQuery = MIN_QUERY, sink_threshold: SinkThreshold = SINK_THRESHOLD,
    text: Text = None, window: Window = WINDOW, max_tokens: MaxTokens = MAX_TOKENS, delta: Delta = DELTA,
    smooth: Smooth = SMOOTH, spike_factor: SpikeFactor = SPIKE_FACTOR, spike_window: SpikeWindow = SPIKE_WINDOW,
    precision: Precision = PRECISION, threads: Threads = THREADS, step: Step = STEP, revisions: Revisions = None,
    allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT,
) -> None:
    """Run probes over many checkpoints into one tidy table (path, step, probe, key, metric, value),
    sorted by step; each probe gets the options it takes; a failing checkpoint is an error row, the
    batch goes on and exits 1."""
    from .. import batch as B

    def absolute(p):
        return os.path.abspath(p) if p else None

    options = {"tokens": tokens, "words": words, "words_file": absolute(words_file), "tensor": tensor,
               "groups": absolute(groups), "mapping": absolute(mapping), "layer": layer, "head": head,
               "top_k": top_k, "n_components": n_components, "neurons": neurons or None, "threshold": threshold,
               "anchor": anchor, "dim": dim, "seed": seed, "full": full,
               "splits": tuple(splits) if splits else None, "saturation": saturation, "min_query": min_query,
               "sink_threshold": sink_threshold, "text": absolute(text), "window": window, "max_tokens": max_tokens,
               "delta": delta, "smooth": smooth, "spike_factor": spike_factor, "spike_window": spike_window,
               "precision": precision, "threads": threads, "step": step, "allow_nonfinite": allow_nonfinite}
    try:
        with _progress("batch") as tick:
            rows = B.batch(paths, probes, options, out=out, jobs=jobs, scheduler=scheduler,
                           progress=lambda n, total: tick(f"{n}/{total} tasks"), revisions=revisions)
    except Interrupted as exc:   # what finished is kept: in --out, else printed before the message
        if not out:
            _batch_rows(exc.rows, fmt)
        raise
    errors = sum(1 for r in rows if r[4] == "error")
    if out:
        print(f"wrote {out}: {len(rows)} rows, {errors} error rows", file=sys.stderr)
    else:
        _batch_rows(rows, fmt)
    if errors:   # the errors are rows of the table; the exit code says that not every task succeeded
        raise typer.Exit(1)


@app.command()
def report(
    paths: Annotated[list[str], typer.Argument(help="runs: snapshot files, checkpoint folders (a model folder, or a "
                                                    "folder of checkpoint-500/ ... folders) and hub models "
                                                    "hf:ORG/NAME[@REV]; several runs are shown side by side",
                                               show_default=False)],
    out: Out = None,
    probes: Probes = None,
    max_steps: Annotated[int, typer.Option(min=1, help="steps shown per probe, spread over training (the "
                                                       "first and the last among them)")] = 6,
    watch: Annotated[bool, typer.Option(help="rewrite the page whenever a run gains a snapshot (the page "
                                             "reloads itself) until every run is finished, or Ctrl-C")] = False,
    interval: Annotated[float, typer.Option(help="--watch: seconds between looks at the runs")] = 2.0,
    max_share: Annotated[float, typer.Option(help="--watch: this process's CPU time at most this share of "
                                                  "one core; what does not fit now is filled in later "
                                                  "(probe-train --report: 0.01)")] = 1.0,
    revisions: Revisions = None, allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE,
) -> None:
    """Write one HTML page for a run, or for runs side by side: configuration, curves, token groups and
    every probe's numbers and figures over training; e.g. probe report a.h5 b.h5 -o report.html."""
    from .. import report as R

    out = out or "report.html"

    def log(msg):
        print(msg, file=sys.stderr)

    if watch:
        from ..errors import STOP

        with STOP.caught():   # held open here, so the signal that ended the watch is still known below
            rep = R.watch(paths, out, probes=probes or None, max_steps=max_steps, revisions=revisions,
                          interval=interval, max_share=max_share, log=log,
                          allow_nonfinite=allow_nonfinite)
            if not rep.sources:
                raise Interrupted(f"Interrupted before any run could be read "
                                  f"({next(iter(rep.errors.values()), 'none yet')}); nothing was written")
            if STOP.asked:
                raise Interrupted(f"Interrupted: {out} holds the runs as they were (no longer reloading); the "
                                  "same command watches again")
        return
    with _progress("report") as tick:
        rep = R.report(paths, out, probes=probes or None, max_steps=max_steps, revisions=revisions, progress=tick,
                       allow_nonfinite=allow_nonfinite)
    for spec, err in rep.errors.items():
        print(f"warning: {spec}: {err}", file=sys.stderr)
    log(f"wrote {out}: {len(rep.sources)} run(s), {len(rep.probes)} probes")


def _batch_rows(rows, fmt: Format) -> None:
    from .. import batch as B
    from . import render

    if fmt is Format.json:
        render.write_json([dict(zip(B.COLUMNS, r)) for r in rows])
    elif fmt is Format.csv:
        render.write_csv(B.COLUMNS, rows)
    else:
        render.table(list(B.COLUMNS), rows)


@app.command("sweep-summary")
def sweep_summary(folder: Annotated[str, typer.Argument(help="a sweep's folder (probe-train sweep --out) or its "
                                                              "sweep.json", show_default=False)],
                  metric: Metric = None, outcome: Outcome = None, step: Step = STEP, fmt: Fmt = FORMAT) -> None:
    """Per grid cell over its seeds: mean, std and 95 % bootstrap interval of each metric, and the
    fraction of seeds with each outcome with its 95 % Wilson interval (verdict against 1/2: above,
    below, or not shown when the interval straddles it)."""
    from .. import api
    from ..analyses.uncertainty import verdict
    from . import render

    res = api.sweep_summary(folder, metric, outcome, step=step)
    if fmt is not Format.table:
        render.emit(res, fmt.value, folder, "sweep-summary")
        return
    rows = [[r.label, m, s["n"], s["mean"], s["std"], _interval(s)] for r in res for m, s in r.stats.items()]
    render.table(["cell", "metric", "seeds", "mean", "std", "95% CI (bootstrap)"], rows)
    if any(r.outcomes for r in res):
        print()
        render.table(["cell", "outcome", "k/n", "fraction", "95% CI (Wilson)", "vs 1/2"],
                     [[r.label, o, f"{s['k']}/{s['n']}", s["fraction"], _interval(s),
                       verdict(s["ci_lo"], s["ci_hi"], 0.5)] for r in res for o, s in r.outcomes.items()])


def _interval(s: dict) -> str:
    import math

    lo, hi = s["ci_lo"], s["ci_hi"]
    return f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) and math.isfinite(hi) else "-"


@app.command()
def figures(
    names: Annotated[Optional[list[str]],
                     typer.Argument(help="figures to make (see --list)", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="make every figure")] = False,
    quick: Annotated[bool, typer.Option(help="CPU sizes (minutes) instead of the papers' sizes (a GPU)")] = False,
    tiny: Annotated[bool, typer.Option(help="test sizes (seconds); the figures show little")] = False,
    out: Out = None,
    runs: Annotated[Optional[str], typer.Option(help="folder of trained runs, reused across calls "
                                                     "[default: OUT/runs]")] = None,
    jobs: Jobs = JOBS,
    seeds: Annotated[int, typer.Option(min=0, help="seeds per γ in the figures that compare γ (bands, intervals); "
                                       "0: --tiny 1, --quick 3, paper sizes 1")] = 0,
    examples: Annotated[Optional[str], typer.Option(help="folder of the fig_*.py scripts "
                                                         "[default: examples/ of this checkout]")] = None,
    list_: Annotated[bool, typer.Option("--list", help="list the figures and exit")] = False,
) -> None:
    """Regenerate the papers' figures: train the runs each needs (or reuse finished ones), probe them
    and draw PNG + PDF; e.g. probe figures --all --quick -o figures/."""
    from .. import figures as F

    folder = F.examples_dir(examples)
    scripts = F.load_scripts(folder)
    if list_:
        for name, sc in scripts.items():
            print(f"{name}\t{sc.title}")
        return
    if all_ == bool(names):
        raise ProbeError("name the figures to make, or pass --all (see --list)")
    if quick and tiny:
        raise ProbeError("--quick and --tiny exclude each other")
    unknown = [n for n in names or [] if n not in scripts]
    if unknown:   # before any folder is made
        raise ProbeError(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(scripts)}")
    size = "tiny" if tiny else "quick" if quick else "full"
    if size == "full" and not F.cuda_available():
        print("warning: no GPU found; the papers' sizes take days on a CPU (use --quick)", file=sys.stderr)
    ctx = F.FigureContext(Path(out or "figures"), size, runs, jobs, seeds)
    made, failed = F.make_figures(list(scripts) if all_ else list(names), ctx, folder)
    for paths in made.values():
        for p in paths:
            print(p)
    if failed:   # each failure was logged as it happened; exit 1: not every figure was made
        # one failure: its cause in the Error line too (scripts read that line alone); several: their names
        what = ", ".join(failed) if len(failed) > 1 else f"{next(iter(failed))} ({next(iter(failed.values()))})"
        print(f"Error: {len(failed)} of {len(made) + len(failed)} figure(s) failed: {what}", file=sys.stderr)
        raise typer.Exit(1)


class _progress:
    """A rich progress line on stderr (only when stderr is a terminal); yields a tick(label) callable."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        if not sys.stderr.isatty():
            return lambda label: None
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        self._p = Progress(SpinnerColumn(), TextColumn("{task.description}"), console=Console(stderr=True),
                           transient=True)
        self._p.__enter__()
        task = self._p.add_task(self.what)
        return lambda label: self._p.update(task, description=f"{self.what}: {label}")

    def __exit__(self, *exc):
        if hasattr(self, "_p"):
            self._p.__exit__(*exc)


def main() -> None:
    from ._lean import lean_command

    run_cli(lean_command(app))
