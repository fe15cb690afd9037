"""``probe``: analyse snapshot files. A thin layer over :mod:`probe.api`.

Data goes to stdout (``--format table|json|csv``), logs and errors to stderr.
Heavy modules (h5py, numpy, matplotlib) are imported inside the commands so
``probe --help`` starts instantly.
"""
from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .cli_util import run_cli
from .errors import ProbeError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Probe training snapshots for reasoning vs memorizing structure.")


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


FILE = typer.Argument(..., help="snapshot file (.h5) written by probe-train")
SOURCE = typer.Argument(..., help="snapshot file, or a checkpoint: Hugging Face folder, .safetensors, "
                                  ".pt/.pth/.bin state dict, nanoGPT ckpt.pt")
GROUPS = typer.Option(None, "--groups", help="JSON/YAML file: group name -> token ids (adds --tokens names)")
MAPPING = typer.Option(None, "--mapping", help="JSON name-mapping file for an unknown checkpoint layout")
WORDS = typer.Option(None, "--words", help="comma-separated words, turned into ids by the checkpoint's tokenizer "
                                           "(replaces --tokens)")
WORDS_FILE = typer.Option(None, "--words-file", help="file of words (one per line or comma-separated)")


def _words_tokens(file: str, tokens, words, words_file):
    """--words / --words-file as a --tokens id list (multi-token words left out with a warning)."""
    if not words and not words_file:
        return tokens
    from .words import read_words_file, words_to_ids

    wl = (words.split(",") if words else []) + (read_words_file(words_file) if words_file else [])
    return ",".join(str(i) for i in words_to_ids(file, wl))
FORMAT = typer.Option(Format.table, "--format", "-f", help="output format")
STEP = typer.Option("latest", "--step", "-s", help="latest, all, a step number, or A:B (half-open step range)")


@app.command()
def info(file: str = FILE, fmt: Format = FORMAT) -> None:
    """Configuration, snapshot steps, token groups, tensors and shapes of a run."""
    from . import api, output

    d = api.info(file)
    if fmt is Format.json:
        output.write_json(d)
        return
    if fmt is Format.csv:
        output.write_csv(["section", "name", "value"],
                         [("config", k, v) for k, v in d["config"].items()]
                         + [("step", i, s) for i, s in enumerate(d["steps"])]
                         + [("group", k, " ".join(map(str, v))) for k, v in d["groups"].items()]
                         + [("tensor", k, "x".join(map(str, v))) for k, v in d["tensors"].items()])
        return
    c = d["config"]
    steps = d["steps"]
    shown = ", ".join(map(str, steps if len(steps) <= 16 else steps[:8] + ["..."] + steps[-4:]))
    print(f"file       {d['file']}  (schema {d['schema_version']}, written by {d['package_version']})")
    print(f"task       {d['task'].get('kind')}: splits {', '.join(d['task'].get('splits', []))}")
    print(f"model      {c.get('model')}  gamma={c.get('gamma')}  d_model={c.get('d_model')}  layers={c.get('layers')}"
          f"  heads={c.get('heads')}  d_ff={c.get('d_ff')}  norm={c.get('norm')}")
    print(f"training   {c.get('steps')} steps, batch {c.get('batch_size')}, lr {c.get('lr')}, "
          f"weight decay {c.get('weight_decay')}, seed {c.get('seed')}")
    print(f"snapshots  {d['snapshots']}: steps {shown}")
    for split, m in d["metrics"].items():
        if m:
            print(f"  {split:<10} loss {m.get('loss', float('nan')):.4f}  acc {m.get('acc', float('nan')):.4f}")
    print("groups")
    for k, v in d["groups"].items():
        words = d["group_strings"].get(k)
        shown = " ".join(repr(w) for w in words[:10]) + (" ..." if len(words) > 10 else "") if words else _ids(v)
        print(f"  {k:<10} {len(v):>4} tokens  {shown}")
    print("tensors (per snapshot)")
    for k, v in d["tensors"].items():
        print(f"  {k:<28} {' x '.join(map(str, v))}")


def _ids(v) -> str:
    if len(v) > 1 and list(v) == list(range(v[0], v[-1] + 1)):
        return f"{v[0]}:{v[-1] + 1}"
    return ",".join(map(str, v[:12])) + (",..." if len(v) > 12 else "")


@app.command()
def validate(file: str = FILE, fmt: Format = FORMAT) -> None:
    """Check FILE against the snapshot schema: exit 0 if it matches, else list findings and exit 1."""
    from . import api, output

    findings = api.validate(file)
    if fmt is Format.json:
        output.write_json({"file": file, "valid": not findings, "findings": findings})
    elif fmt is Format.csv:
        output.write_csv(["file", "finding"], [(file, x) for x in findings])
    else:
        if findings:
            for x in findings:
                print(f"{file}: {x}")
        else:
            print(f"{file}: valid")
    if findings:
        raise typer.Exit(1)


@app.command()
def similarity(
    file: str = SOURCE, groups: Optional[str] = GROUPS, mapping: Optional[str] = MAPPING,
    tokens: str = typer.Option("reasoning", "--tokens", "-t",
                               help="group name(s) (reasoning, memory, keys), ids 3,5,7 or a half-open range 11:21"),
    tensor: str = typer.Option("token_embedding", help="tensor whose rows are compared (see probe info)"),
    step: str = STEP,
    fmt: Format = FORMAT,
    plot: Optional[str] = typer.Option(None, help="write heat map(s) to this .png/.pdf/.svg"),
    words: Optional[str] = WORDS, words_file: Optional[str] = WORDS_FILE,
) -> None:
    """Cosine-similarity matrix of token vectors, with its mean and its fall-off with |i - j|."""
    from . import api, output

    tokens = _words_tokens(file, tokens, words, words_file)
    if plot:
        from .plotting import check_writable

        check_writable(plot)
    results = api.similarity(file, tokens, tensor=tensor, step=step, groups=groups, mapping=mapping)
    if fmt is Format.json:
        output.write_json({"file": file, "tensor": tensor, "tokens": tokens,
                           "results": [r.to_dict() for r in results]})
    elif fmt is Format.csv:
        rows = []
        for r in results:
            k = len(r.ids) if r.matrix is not None else 0   # large selections: summaries only
            for i in range(k):
                for j in range(k):
                    rows.append((r.step, "cosine", r.ids[i], r.ids[j], abs(int(r.ids[i]) - int(r.ids[j])),
                                 float(r.matrix[i, j])))
            for d, v in r.by_distance.items():
                rows.append((r.step, "mean_by_distance", None, None, d, v))
            for name in ("mean_offdiag", "std_offdiag", "distance_corr"):
                rows.append((r.step, name, None, None, None, getattr(r, name)))
        output.write_csv(["step", "metric", "token_i", "token_j", "distance", "value"], rows)
    else:
        _similarity_table(results, tokens, tensor, file)
    if plot:
        from .plotting import similarity_heatmaps

        similarity_heatmaps(results, plot, f"{file}: {tensor}, tokens {tokens}")
        print(f"wrote {plot}", file=sys.stderr)


def _token_labels(file: str, ids) -> list:
    """Row labels: the id, with its text where the run or checkpoint has a vocabulary."""
    from . import api

    text = api.token_text(file, ids)
    if text is None:
        return [int(i) for i in ids]
    return [f"{int(i)} {t!r}" for i, t in zip(ids, text)]


def _similarity_table(results, tokens: str, tensor: str, file: str) -> None:
    from . import output

    max_d = 10
    if len(results) == 1 and results[0].matrix is not None:
        r = results[0]
        print(f"cosine similarity of {tensor} rows, tokens {tokens}, step {r.step}")
        output.table(["token"] + [str(i) for i in r.ids],
                     [[lab] + [f"{v:.2f}" for v in row] for lab, row in zip(_token_labels(file, r.ids), r.matrix)])
        print()
    dists = sorted({d for r in results for d in r.by_distance})[:max_d]
    output.table(["step", "mean_offdiag", "std_offdiag", "distance_corr"] + [f"d={d}" for d in dists],
                 [[r.step, r.mean_offdiag, r.std_offdiag, r.distance_corr]
                  + [r.by_distance.get(d, float("nan")) for d in dists] for r in results])


# --- the probe suite: one generic renderer for every result type -------------------------

TOKENS_ALL = typer.Option("keys,reasoning,memory", "--tokens", "-t",
                          help="group name(s), ids 3,5,7 or a half-open range 11:21")
PLOT = typer.Option(None, help="write a figure to this .png/.pdf/.svg")


def _emit(results, fmt: Format, file: str, probe_name: str, plot: Optional[str], single_table=None) -> None:
    """Results to stdout as a table (one row per step), JSON or tidy CSV; the figure to --plot."""
    from . import output

    if fmt is Format.json:
        output.write_json({"file": file, "probe": probe_name, "results": [r.to_dict() for r in results]})
    elif fmt is Format.csv:
        output.write_csv(["step", "metric", "key", "value"],
                         [(r.step, m, k, v) for r in results for m, k, v in r.rows()])
    else:
        if len(results) == 1 and single_table is not None:
            single_table(results[0])
            print()
        keys = list(dict.fromkeys(k for r in results for k in r.summary()))
        rows = [[r.step] + [r.summary().get(k, float("nan")) for k in keys] for r in results]
        if len(keys) > 8:  # long summaries read better transposed
            output.table(["metric"] + [f"step {r.step}" for r in results],
                         [[k] + [row[1 + j] for row in rows] for j, k in enumerate(keys)])
        else:
            output.table(["step"] + keys, rows)
    if plot:
        from . import plotting

        plotting.plot_results(probe_name, results, plot, title=f"{file}: {probe_name}")
        print(f"wrote {plot}", file=sys.stderr)


def _check_plot(plot: Optional[str]) -> None:
    if plot:
        from .plotting import check_writable

        check_writable(plot)


@app.command()
def pca(file: str = SOURCE, groups: Optional[str] = GROUPS, mapping: Optional[str] = MAPPING, tokens: str = TOKENS_ALL,
        tensor: str = typer.Option("token_embedding", help="tensor whose rows are analysed"),
        components: int = typer.Option(3, min=1, help="principal components to report"),
        step: str = STEP, fmt: Format = FORMAT, plot: Optional[str] = PLOT,
        words: Optional[str] = WORDS, words_file: Optional[str] = WORDS_FILE) -> None:
    """PCA of token vectors: explained variance, coordinates, and how ordered each group lies (number line)."""
    from . import api

    tokens = _words_tokens(file, tokens, words, words_file)
    _check_plot(plot)
    res = api.pca(file, tokens, tensor=tensor, step=step, n_components=components, groups=groups, mapping=mapping)

    def coords(r):
        from . import output

        output.table(["token", "group"] + [f"PC{i + 1}" for i in range(r.coords.shape[1])],
                     [[lab, g] + list(map(float, c)) for lab, g, c in zip(_token_labels(file, r.ids), r.groups, r.coords)])

    _emit(res, fmt, file, "pca", plot, coords)


@app.command()
def align(file: str = SOURCE, groups: Optional[str] = GROUPS, mapping: Optional[str] = MAPPING, layer: int = typer.Option(0, "--layer", "-l", help="attention layer"),
          head: int = typer.Option(0, "--head", help="attention head"),
          top: int = typer.Option(3, min=1, help="singular vectors compared with the embeddings"),
          step: str = STEP, fmt: Format = FORMAT, plot: Optional[str] = PLOT) -> None:
    """Singular values of W_V and W_V W_O, and |cos| of W_V's top singular vectors with each token group."""
    from . import api

    _check_plot(plot)
    res = api.align(file, layer, head, step=step, top_k=top, groups=groups, mapping=mapping)

    def detail(r):
        from . import output

        print(f"layer {r.layer} head {r.head}: singular values of W_V " +
              " ".join(f"{v:.3f}" for v in r.singular_values[:8]))
        print("  of W_V W_O " + " ".join(f"{v:.3f}" for v in r.ov_singular_values[:8]))
        output.table(["group"] + [f"|cos| v{i + 1}" for i in range(len(next(iter(r.group_mean.values()), [])))],
                     [[g] + v for g, v in r.group_mean.items()])

    _emit(res, fmt, file, "align", plot, detail)


@app.command()
def condense(file: str = SOURCE, groups: Optional[str] = GROUPS, mapping: Optional[str] = MAPPING,
             tensor: str = typer.Option("token_embedding", help="vectors whose covariance spectrum is taken"),
             tokens: Optional[str] = typer.Option(None, "--tokens", "-t", help="only these rows (default: all)"),
             neurons: str = typer.Option("layer0/W_Q", help="weight whose neurons are grouped by cosine ('' : none)"),
             threshold: float = typer.Option(0.7, help="cosine above which two neurons are grouped"),
             step: str = STEP, fmt: Format = FORMAT, plot: Optional[str] = PLOT) -> None:
    """Condensation: covariance eigenvalues (centred, unscaled, / (k-1)), effective and stable rank,
    neuron groups, and the singular values of every weight matrix."""
    from . import api

    _check_plot(plot)
    res = api.condense(file, tensor=tensor, tokens=tokens, neurons=neurons or None, threshold=threshold, step=step,
                       groups=groups, mapping=mapping)

    def detail(r):
        print("covariance eigenvalues: " + " ".join(f"{v:.3g}" for v in r.eigenvalues[:10]))
        if r.neuron_tensor:
            print(f"neuron groups of {r.neuron_tensor} (cos > {r.threshold}): sizes {r.neuron_groups[:10]}")

    _emit(res, fmt, file, "condense", plot, detail)


@app.command()
def theory(file: str = FILE, tokens: str = typer.Option("reasoning", "--tokens", "-t", help="tokens compared"),
           anchor: Optional[int] = typer.Option(None, help="s0 of the cos(w(s0), w(s_j)) profile (default: middle token)"),
           dim: Optional[int] = typer.Option(None, help="length of the eq. 14 vectors (default: vocabulary size)"),
           seed: int = typer.Option(0, help="seed of the eq. 14 noise"),
           step: str = STEP, fmt: Format = FORMAT, plot: Optional[str] = PLOT) -> None:
    """Paper 1's theory: cos of P^s - 1/d_vob against the measured embedding cosines, and the eq. 14
    reconstruction's cos(w(s0), w(s_j)) profile against the measured one."""
    from . import api

    _check_plot(plot)
    res = api.theory(file, tokens, anchor=anchor, step=step, dim=dim, seed=seed)

    def detail(r):
        from . import output

        print(f"profile cos(w({r.anchor}), w(s_j))")
        output.table(["token", "measured", "eq14", "P^s theory"],
                     [[int(t), float(a), float(b), float(c)] for t, a, b, c in
                      zip(r.ids, r.profile_measured, r.profile_reconstructed,
                          r.predicted[list(r.ids).index(r.anchor)])])

    _emit(res, fmt, file, "theory", plot, detail)


@app.command()
def ood(file: str = FILE, full: bool = typer.Option(False, help="every sequence of each split, not the logged subset"),
        step: str = STEP, fmt: Format = FORMAT, plot: Optional[str] = PLOT) -> None:
    """Rebuild the model from the stored weights; accuracy and loss per split and per held-out anchor
    combination (composite task: inferential vs symmetric accuracy on the unseen pair)."""
    from . import api

    _check_plot(plot)
    res = api.ood(file, step=step, full=full)

    def detail(r):
        from . import output

        output.table(["split / combination", "n", "loss", "acc"],
                     [[s, m["n"], m["loss"], m["acc"]] for s, m in r.splits.items()]
                     + [[f"  held-out {c}", m["n"], m["loss"], m["acc"]] for c, m in r.combos.items()]
                     + [[f"  target {t}", m["n"], float("nan"), m["acc"]] for t, m in r.targets.items()])

    _emit(res, fmt, file, "ood", plot, detail)


@app.command()
def attention(file: str = FILE, layer: Optional[int] = typer.Option(None, "--layer", "-l", help="only this layer"),
              step: str = STEP, fmt: Format = FORMAT, plot: Optional[str] = PLOT) -> None:
    """Attention on the stored probe batch: distance from causal averaging (mean |A_ij - 1/i|, entropy
    relative to uniform) and where the last position attends (key, anchors)."""
    from . import api

    _check_plot(plot)
    _emit(api.attention(file, layer=layer, step=step), fmt, file, "attention", plot)


@app.command()
def bias(file: str = FILE,
         splits: Optional[list[str]] = typer.Option(None, "--splits", help="split A then split B (give twice); "
                                                    "default: the task's pair (anchor: mem then rsn_train; "
                                                    "lm: story then logic)"),
         step: str = typer.Option("all", "--step", "-s", help="latest, all, a step number, or A:B"),
         fmt: Format = FORMAT, plot: Optional[str] = PLOT) -> None:
    """Reasoning bias Delta L = (L_A - L_B) / L_B over training, from the stored per-split losses."""
    from . import api

    if splits is not None and len(splits) != 2:
        raise ProbeError("--splits takes exactly two splits: --splits A --splits B")
    _check_plot(plot)
    _emit(api.bias(file, tuple(splits) if splits else None, step=step), fmt, file, "bias", plot)


@app.command()
def batch(
    paths: list[str] = typer.Argument(..., help="checkpoints: files, folders (a model folder, or a folder of "
                                                "checkpoints) and globs"),
    probes: list[str] = typer.Option(..., "--probe", "-p", help="probe to run (repeat for several): similarity, "
                                     "pca, align, condense, spectrum; on snapshot files also theory, attention, "
                                     "bias, ood"),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="results .csv or .json; re-running skips "
                                      "checkpoints already in it"),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="local worker processes"),
    scheduler: Optional[str] = typer.Option(None, help="address of a running Dask scheduler (tcp://host:8786)"),
    tokens: Optional[str] = typer.Option(None, "--tokens", "-t", help="token selection for similarity/pca/condense"),
    tensor: Optional[str] = typer.Option(None, help="tensor for similarity/pca/condense"),
    layer: Optional[int] = typer.Option(None, "--layer", "-l", help="layer for align/attention"),
    head: Optional[int] = typer.Option(None, help="head for align"),
    neurons: Optional[str] = typer.Option(None, help="weight whose neurons condense groups"),
    groups: Optional[str] = GROUPS, mapping: Optional[str] = MAPPING,
    step: Optional[str] = typer.Option(None, "--step", "-s", help="snapshot files: which steps (default latest)"),
    fmt: Format = typer.Option(Format.csv, "--format", "-f", help="stdout format when no --out is given"),
) -> None:
    """Run probes over many checkpoints into one tidy table (path, step, probe, key, metric, value),
    sorted by step; a failing checkpoint is recorded as an error row and the batch goes on."""
    from . import batch as B, output

    options = {"tokens": tokens, "tensor": tensor, "layer": layer, "head": head, "neurons": neurons,
               "groups": os.path.abspath(groups) if groups else None,
               "mapping": os.path.abspath(mapping) if mapping else None, "step": step}
    with _progress("batch") as tick:
        rows = B.batch(paths, probes, options, out=out, jobs=jobs, scheduler=scheduler,
                       progress=lambda n, total: tick(f"{n}/{total} tasks"))
    errors = sum(1 for r in rows if r[4] == "error")
    if out:
        print(f"wrote {out}: {len(rows)} rows, {errors} error rows", file=sys.stderr)
    elif fmt is Format.json:
        output.write_json([dict(zip(B.COLUMNS, r)) for r in rows])
    else:
        output.write_csv(B.COLUMNS, rows)


@app.command()
def spectrum(file: str = SOURCE, step: str = STEP, fmt: Format = FORMAT, plot: Optional[str] = PLOT) -> None:
    """Per linear layer: spectral norm, Frobenius norm, stable and effective rank, and the power-law
    exponent alpha of the eigenvalue density with its fit range (WeightWatcher's metrics)."""
    from . import api, output

    _check_plot(plot)
    with _progress("spectrum") as tick:
        res = api.spectrum(file, step=step, progress=tick)
    if fmt is Format.table:
        for r in res:
            print(f"step {r.step}")
            output.table(["layer", "shape", "spectral_norm", "log_norm", "stable_rank", "eff_rank", "alpha",
                          "xmin", "xmax", "ks"],
                         [[l.name, "x".join(map(str, l.shape)), l.spectral_norm, l.log_norm, l.stable_rank,
                           l.effective_rank, l.alpha, l.xmin, l.xmax, l.ks_distance] for l in r.layers])
        if plot:
            from . import plotting

            plotting.plot_results("spectrum", res, plot, title=f"{file}: spectrum")
            print(f"wrote {plot}", file=sys.stderr)
        return
    _emit(res, fmt, file, "spectrum", plot)


@app.command()
def figures(
    names: Optional[list[str]] = typer.Argument(None, help="figures to make (see --list)", show_default=False),
    all_: bool = typer.Option(False, "--all", help="make every figure"),
    quick: bool = typer.Option(False, "--quick", help="CPU sizes (minutes) instead of the papers' sizes (a GPU)"),
    tiny: bool = typer.Option(False, "--tiny", help="test sizes (seconds); the figures show little"),
    out: str = typer.Option("figures", "--out", "-o", help="folder for the PNG and PDF files"),
    runs: Optional[str] = typer.Option(None, "--runs", help="folder of trained runs, reused across calls "
                                       "[default: OUT/runs]"),
    jobs: int = typer.Option(2, "--jobs", "-j", help="runs trained at once on a CPU"),
    examples: Optional[str] = typer.Option(None, "--examples", help="folder of the fig_*.py scripts "
                                           "[default: examples/ of this checkout]"),
    list_: bool = typer.Option(False, "--list", help="list the figures and exit"),
) -> None:
    """Regenerate the papers' figures: train the runs each needs (or reuse finished ones), probe them
    and draw PNG + PDF; e.g. probe figures --all --quick -o figures/."""
    from . import figures as F

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
    if jobs < 1:
        raise ProbeError("--jobs must be at least 1")
    size = "tiny" if tiny else "quick" if quick else "full"
    if size == "full" and not F.cuda_available():
        print("warning: no GPU found; the papers' sizes take days on a CPU (use --quick)", file=sys.stderr)
    ctx = F.FigureContext(Path(out), size, runs, jobs)
    made = F.make_figures(list(scripts) if all_ else list(names), ctx, folder)
    for name, paths in made.items():
        for p in paths:
            print(p)


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
    run_cli(app)


if __name__ == "__main__":
    main()
