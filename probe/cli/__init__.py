"""``probe``: analyse snapshot files and checkpoints. A thin layer over :mod:`probe.api`.

Every command parses its options (declared once, in :mod:`.options`, each command's help about that
command), calls one API function and hands the results to :mod:`.render`: data to stdout
(``--format table|json|csv``), logs, status, warnings and errors to stderr. The probe commands are
derived from :mod:`probe.registry` (:mod:`.probes`). Every command's help ends with examples. Heavy
modules (numpy, h5py, torch, matplotlib) are imported inside the commands, so ``probe --help`` and
``probe --version`` start instantly.
"""
from __future__ import annotations

import inspect
import sys
import typing
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import registry
from .._text import terminal
from ..report import MAX_STEPS, SLIDER_MAX
from ..errors import Interrupted, ProbeError, run_cli
from .options import (
    ALLOW_NONFINITE, FORMAT, JOBS, STEP, AllowNonfinite, File, Fmt, Format, Groups, Jobs, Mapping, Metric, Out,
    Outcome, Plot, Probes, Revisions, Source, Step, TensorBoard, about,
)
from .options import MAX_MEMORY, WIDE, MaxMemory, Wide
from .probes import LazyCallback, ProbeCommand, parameter, batch_options, converted, progress, show, with_examples

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                  help=with_examples("Probe training snapshots and checkpoints for reasoning vs memorizing structure. "
                                     "probe COMMAND --help says what a command does, its options and examples.",
                                     ("probe info run.h5", "probe similarity run.h5 --tokens reasoning --step all",
                                      "probe report run.h5 -o report.html")))


def _version_line() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"probe {version('gamma-probe')}"
    except PackageNotFoundError:   # run from a checkout that was never installed
        return "probe (version unknown: the gamma-probe distribution is not installed)"


def _show_version(value: bool) -> None:
    if value:
        print(_version_line())
        raise typer.Exit()


@app.callback()
def _probe(version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                                 help="print the version and exit")] = False) -> None:
    """The options before the command word (its callback runs at --version, before any command)."""


class _Own(LazyCallback):
    """A command written here, its shared options' help about it (:func:`.options.about`). Its
    signature is made when the command is built (only the command that runs is: :mod:`._lean`), since
    resolving the annotations costs ``probe --help`` a few ms per command."""

    def __init__(self, fn, command: str, help: str):
        super().__init__(fn.__name__, help)
        self.fn, self.command = fn, command

    def parameters(self) -> list[inspect.Parameter]:
        hints = typing.get_type_hints(self.fn, include_extras=True)
        return [p.replace(annotation=about(hints[p.name], self.command))
                for p in inspect.signature(self.fn).parameters.values()]

    def run(self, **options) -> None:
        self.fn(**options)


def _command(name: str | None = None, *, examples: tuple[str, ...]):
    """``app.command``: the docstring and an Examples block as its help, its options about it."""
    def register(fn):
        command, help = name or fn.__name__, with_examples(inspect.getdoc(fn), examples)
        app.command(command, help=help)(_Own(fn, command, help))
        return fn
    return register


@_command(examples=("probe info run.h5", "probe info model/ --format json", "probe info model.safetensors"))
def info(file: Source, fmt: Fmt = FORMAT) -> None:
    """A run: configuration, snapshot steps, token groups, tensors and shapes. A checkpoint: format,
    layout, layers, heads, step, and every tensor's shape and dtype."""
    from .. import api
    from . import render

    render.info(api.info(file), fmt.value)


@_command(examples=("probe validate run.h5", "probe validate run.h5 --format json"))
def validate(file: File, fmt: Fmt = FORMAT) -> None:
    """Check FILE against the snapshot schema and read all its data once, verifying every checksum: exit 0
    if it matches, else list findings and exit 1. Notes (a file older than checksums) follow either way."""
    from .. import api
    from . import render

    findings = api.validate(file)
    if fmt is Format.json:
        render.write_json({"file": file, "valid": not findings, "findings": findings, "notes": findings.notes})
    elif fmt is Format.csv:
        render.write_csv(render.TIDY, [(None, "finding", file, x) for x in findings] +
                         [(None, "note", file, x) for x in findings.notes])
    else:
        for x in [*(findings or ["valid"]), *(f"note: {x}" for x in findings.notes)]:
            print(terminal(f"{file}: {x}"))   # a finding quotes the file's names
    if findings:
        raise typer.Exit(1)


def rank(file: Source, minima: Annotated[bool, typer.Option(
             help="report where each effective-rank trajectory bottoms out (its minimum, the step of it, the dip "
                  "and the rebound) over the selected steps (default: every step)")] = False,
         groups: Groups = None, mapping: Mapping = None, max_memory: MaxMemory = MAX_MEMORY, step: Step = STEP,
         allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, fmt: Fmt = FORMAT, plot: Plot = None,
         wide: Wide = WIDE) -> None:
    """Effective rank, stable rank and top-1/top-5 energy of the centred token embedding and of every weight
    matrix; with --step all a trajectory, with --minima the step where each one bottoms out."""
    from .. import api

    if plot:
        from ..plotting import check_writable

        check_writable(plot)
    if minima:
        res = api.rank_trajectory(file, step="all" if step == STEP else step, groups=groups, mapping=mapping,
                                  allow_nonfinite=allow_nonfinite, max_memory=max_memory)
        show(res, fmt, file, "rank-minima", plot, wide)
        return
    show(api.rank(file, step=step, groups=groups, mapping=mapping, allow_nonfinite=allow_nonfinite,
                  max_memory=max_memory), fmt, file, "rank", plot, wide)


# --- the probes: one command each, in the registry's order ----------------------------------------

_OWN = {"rank": rank}   # probe commands written here (rank --minima also reaches rank_trajectory)
for _spec in registry.PROBES:
    if _spec.command == "":
        app.command(_spec.name, help=with_examples(_spec.help, registry.examples(_spec.name)))(ProbeCommand(_spec))
    elif _spec.command == _spec.name:
        _help = with_examples(_spec.help, registry.examples(_spec.name))
        app.command(_spec.name, help=_help)(_Own(_OWN[_spec.name], _spec.name, _help))


# --- many checkpoints, a page, a sweep, the figures ----------------------------------------------

BATCH_HELP = with_examples(
    "Run probes over many checkpoints into one tidy table (path, step, probe, key, metric, value), sorted by "
    "step; each probe gets the options it takes; a failing checkpoint is an error row, the batch goes on and "
    "exits 1.",
    ("probe batch checkpoints/ --probe spectrum --probe rank -o table.csv",
     "probe batch run.h5 --probe similarity --probe ood --step all",
     "probe batch 'ckpt/*.pt' --probe rank --jobs 4 --format json",
     "probe batch run.h5 --probe similarity --probe pca --step all --tensorboard tb"))


class _Batch(LazyCallback):
    """``probe batch``: the options of every batch probe (:func:`.probes.batch_options`)."""

    def parameters(self):
        return [
            parameter("paths", Annotated[list[str], typer.Argument(
                help="checkpoints: files, folders (a model folder, or a folder of checkpoints such as "
                     "checkpoint-500/), globs, and hub models hf:ORG/NAME[@REV]", show_default=False)]),
            parameter("probes", about(Probes, "batch")), parameter("out", about(Out, "batch"), None),
            parameter("jobs", about(Jobs, "batch"), JOBS),
            parameter("scheduler", Annotated[Optional[str], typer.Option(
                help="address of a running Dask scheduler (tcp://host:8786)")], None),
            *batch_options(), parameter("step", about(Step, "batch"), STEP), parameter("revisions", Revisions, None),
            parameter("allow_nonfinite", about(AllowNonfinite, "batch"), ALLOW_NONFINITE),
            parameter("fmt", about(Fmt, "batch"), FORMAT), parameter("tensorboard", TensorBoard, None)]

    def run(self, paths, probes, out, jobs, scheduler, revisions, fmt, tensorboard, **options) -> None:
        from .. import batch as B

        options = converted(options, absolute=True)
        try:
            with progress("batch") as tick:
                rows = B.batch(paths, probes, options, out=out, jobs=jobs, scheduler=scheduler,
                               progress=lambda n, total: n < total and tick(f"{n}/{total} tasks done"),
                               revisions=revisions, tensorboard=tensorboard)
        except Interrupted as exc:   # what finished is kept: in --out, else printed before the message
            if not out:
                _batch_rows(exc.rows, fmt)
            raise
        errors = sum(1 for r in rows if r[4] == "error")
        if tensorboard is not None:
            runs = sorted(set(B.run_names(r[0] for r in rows).values()))
            print(terminal(f"wrote {tensorboard}: TensorBoard run{'s' * (len(runs) != 1)} {', '.join(runs)} "
                           f"(tensorboard --logdir {tensorboard})"), file=sys.stderr)
        if out:
            print(terminal(f"wrote {out}: {len(rows)} rows, {errors} error rows"), file=sys.stderr)
        else:
            _batch_rows(rows, fmt)
        if errors:   # the errors are rows of the table; the exit code says that not every task succeeded
            raise typer.Exit(1)


app.command("batch", help=BATCH_HELP)(_Batch("batch", BATCH_HELP))


@_command(examples=("probe report run.h5", "probe report a.h5 b.h5 -o compare.html",
                    "probe report run.h5 --watch --max-steps 10"))
def report(
    paths: Annotated[list[str], typer.Argument(help="runs: snapshot files, checkpoint folders (a model folder, or a "
                                                    "folder of checkpoint-500/ ... folders) and hub models "
                                                    "hf:ORG/NAME[@REV]; several runs are shown side by side",
                                               show_default=False)],
    out: Out = None,
    probes: Probes = None,
    max_steps: Annotated[int, typer.Option(min=1, help="steps in each probe's table, log-spaced over training "
                                                       "(the first and the last among them)")] = MAX_STEPS,
    slider_steps: Annotated[int, typer.Option(min=0, help="figures behind each probe's step slider, log-spaced "
                                                          "over the snapshots (0: every snapshot); the probes "
                                                          "that run the model draw the table's steps only")
                            ] = SLIDER_MAX,
    watch: Annotated[bool, typer.Option(help="rewrite the page whenever a run gains a snapshot (the page "
                                             "reloads itself) until every run is finished, or Ctrl-C")] = False,
    interval: Annotated[float, typer.Option(help="--watch: seconds between looks at the runs")] = 2.0,
    max_share: Annotated[float, typer.Option(help="--watch: this process's CPU time at most this share of "
                                                  "one core; what does not fit now is filled in later "
                                                  "(probe-train --report: 0.01)")] = 1.0,
    revisions: Revisions = None, allow_nonfinite: AllowNonfinite = ALLOW_NONFINITE, max_memory: MaxMemory = MAX_MEMORY,
) -> None:
    """Write one HTML page for a run, or for runs side by side: configuration, curves, token groups and
    every probe's numbers and figures over training; what it is doing goes to stderr."""
    from .. import report as R

    out = out or "report.html"

    def log(msg):   # it names runs, files and what went wrong with them
        print(terminal(msg), file=sys.stderr)

    if watch:
        from ..signals import STOP

        # STOP held open here, so that the signal that ended the watch is still known below. The first page
        # takes as long as a report: its sections say so as they start; each later page is one log line.
        with STOP.caught(), ExitStack() as status:
            tick = status.enter_context(progress("report", each=True))
            written = []

            def said(msg):
                status.close()
                written.append(msg)
                log(msg)

            rep = R.watch(paths, out, probes=probes or None, max_steps=max_steps, revisions=revisions,
                          interval=interval, max_share=max_share, log=said, allow_nonfinite=allow_nonfinite,
                          progress=lambda label: None if written else tick(label), slider_steps=slider_steps,
                          max_memory=max_memory)
            if not rep.sources:
                raise Interrupted(f"Interrupted before any run could be read "
                                  f"({next(iter(rep.errors.values()), 'none yet')}); nothing was written")
            if STOP.asked:
                raise Interrupted(f"Interrupted: {out} holds the runs as they were (no longer reloading); the "
                                  "same command watches again")
        return
    with progress("report", each=True) as tick:   # a line per run and section: the sections take seconds each
        rep = R.report(paths, out, probes=probes or None, max_steps=max_steps, revisions=revisions, progress=tick,
                       allow_nonfinite=allow_nonfinite, slider_steps=slider_steps, max_memory=max_memory)
    for spec, err in rep.errors.items():
        log(f"warning: {spec}: {err}")
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


@_command("sweep-summary", examples=(
    "probe sweep-summary sweep/",
    "probe sweep-summary sweep/ --metric 'acc[rsn_test]' --metric similarity:mean_offdiag",
    "probe sweep-summary sweep/sweep.json --outcome 'acc[rsn_test]>0.5' --format csv"))
def sweep_summary(folder: Annotated[str, typer.Argument(help="a sweep's folder (probe-train sweep --out) or its "
                                                              "sweep.json", show_default=False)],
                  metric: Metric = None, outcome: Outcome = None, step: Step = STEP, fmt: Fmt = FORMAT) -> None:
    """Per grid cell over its seeds: mean, std and 95 % bootstrap interval of each metric, and the
    fraction of seeds with each outcome with its 95 % Wilson interval (verdict against 1/2: above,
    below, or not shown when the interval straddles it)."""
    from .. import api
    from . import render

    with progress("sweep-summary") as tick:
        res = api.sweep_summary(folder, metric, outcome, step=step, progress=tick)
    render.sweep_summary(res, fmt.value, folder)


@_command(examples=("probe figures --list", "probe figures p1-cosine --quick",
                    "probe figures --all --quick --dry-run", "probe figures --all --quick -o figures/"))
def figures(
    names: Annotated[Optional[list[str]],
                     typer.Argument(help="figures to make (see --list)", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="make every figure")] = False,
    quick: Annotated[bool, typer.Option(help="CPU sizes (every figure in minutes on 2 cores) instead of the "
                                             "papers' sizes (a GPU)")] = False,
    tiny: Annotated[bool, typer.Option(help="test sizes (seconds); the figures show little")] = False,
    out: Out = None,
    runs: Annotated[Optional[str], typer.Option(help="folder of trained runs, reused across calls "
                                                     "[default: OUT/runs]")] = None,
    jobs: Jobs = JOBS,
    seeds: Annotated[int, typer.Option(min=0, help="seeds per γ in the figures that compare γ (bands, intervals); "
                                       "0: --tiny 1, --quick 3, paper sizes 1")] = 0,
    budget: Annotated[Optional[float], typer.Option(
        min=0.1, help="minutes: give each figure the most seeds whose estimated time (each preset's measured "
                      "speed) fits, said on stderr; replaces --seeds")] = None,
    examples: Annotated[Optional[str], typer.Option(help="folder of the fig_*.py scripts "
                                                         "[default: examples/ of this checkout]")] = None,
    list_: Annotated[bool, typer.Option("--list", help="list the figures and exit")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list the runs each figure draws, whether each would "
                                                            "be trained, resumed or reused, and the estimated "
                                                            "time; train and draw nothing")] = False,
    check: Annotated[bool, typer.Option("--check", help="instead of drawing: the effect each figure states and "
                                                        "the fraction of its seeds that show it (trains what "
                                                        "is missing)")] = False,
    fmt: Fmt = FORMAT,
) -> None:
    """Regenerate the papers' figures: train the runs each needs (or reuse finished ones), probe them
    and draw PNG + PDF."""
    from .. import figures as F

    folder = F.examples_dir(examples)
    scripts = F.load_scripts(folder)
    if list_:
        for name, sc in scripts.items():
            print(f"{terminal(name)}\t{terminal(sc.title)}")
        return
    if all_ == bool(names):
        raise ProbeError("name the figures to make, or pass --all (see --list)")
    if quick and tiny:
        raise ProbeError("--quick and --tiny exclude each other")
    if budget is not None and seeds:
        raise ProbeError("--budget chooses the seeds: give it or --seeds, not both")
    if dry_run and check:
        raise ProbeError("--dry-run and --check exclude each other")
    unknown = [n for n in names or [] if n not in scripts]
    if unknown:   # before any folder is made
        raise ProbeError(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(scripts)}")
    names = list(scripts) if all_ else list(names)
    size = "tiny" if tiny else "quick" if quick else "full"
    if size == "full" and not F.cuda_available() and not dry_run:
        print("warning: no GPU found; the papers' sizes take days on a CPU (use --quick)", file=sys.stderr)
    per_figure = None
    if budget is not None:   # planned before any folder is made: a budget that cannot be planned leaves none
        plan = F.seeds_for_budget(names, F.FigureContext(Path(out or "figures"), size, runs, jobs, seeds, create=False),
                                  folder, budget)
        per_figure = plan.seeds
        _say_plan(plan, f"budget {budget:g} min: ")
        if plan.seconds > budget * 60:
            print(f"warning: even one seed per figure is estimated at {plan.seconds / 60:.1f} min, over the budget "
                  f"of {budget:g} min; going on with one seed each", file=sys.stderr)
    ctx = F.FigureContext(Path(out or "figures"), size, runs, jobs, seeds, create=not dry_run)
    if dry_run:
        from . import render

        plan = plan if budget is not None else F.plan_figures(names, ctx, folder)
        header = ["figure", "run", "preset", "action", "estimate_s", "file"]
        rows = [[r.figure, r.label, r.preset, r.action, None if r.seconds is None else round(r.seconds),
                 str(r.path) if r.path else "-"] for r in plan.rows]
        if fmt is Format.json:   # estimates unrounded
            exact = [[*row[:4], r.seconds, row[5]] for row, r in zip(rows, plan.rows)]
            render.write_json({"runs": [dict(zip(header, row)) for row in exact], "seeds": plan.seeds,
                               "jobs": plan.jobs, "train_seconds": plan.train_seconds,
                               "draw_seconds": plan.draw_seconds, "seconds": plan.seconds})
        elif fmt is Format.csv:
            render.write_csv(header, rows)
        else:
            render.table(header, rows)
        if budget is None:
            _say_plan(plan, "")
        return
    if check:
        from . import render

        claims, failed = F.check_figures(names, ctx, folder, per_figure)
        header = ["figure", "shown", "fraction", "ci_lo", "ci_hi", "values", "claim"]
        rows = [[n, f"{d['k']}/{d['n']}", d["fraction"], d["ci_lo"], d["ci_hi"],
                 " ".join(f"{v:.3g}" for v in d["values"]), d["claim"]]
                for n, cs in claims.items() for d in (c.summary() for c in cs)]
        if fmt is Format.json:
            render.write_json({n: [c.summary() for c in cs] for n, cs in claims.items()})
        elif fmt is Format.csv:
            render.write_csv(header, rows)
        else:
            render.table(header, rows, left=(0, 5, 6))
    else:
        made, failed = F.make_figures(names, ctx, folder, per_figure)
        for paths in made.values():
            for p in paths:
                print(terminal(str(p)))
    if failed:   # each failure was logged as it happened; exit 1: not every figure was made
        # one failure: its cause in the Error line too (scripts read that line alone); several: their names
        done = len(names) - len(failed)
        what = ", ".join(failed) if len(failed) > 1 else f"{next(iter(failed))} ({next(iter(failed.values()))})"
        print(terminal(f"Error: {len(failed)} of {done + len(failed)} figure(s) failed: {what}"), file=sys.stderr)
        raise typer.Exit(1)


def _say_plan(plan, prefix: str) -> None:
    """The plan's totals on stderr: runs to train, runs reused, the estimated time and the seeds."""
    todo = plan.todo
    reuse = {r.path for r in plan.rows if r.action == "reuse"}
    secs = plan.seconds
    when = (f"estimated {secs / 60:.1f} min on a {plan.machine} with {plan.jobs} job(s) "
            f"({plan.train_seconds / 60:.1f} min of training, {plan.draw_seconds / 60:.1f} min of drawing beside it)"
            if secs is not None else f"no estimate: never measured on this machine class: {', '.join(plan.unmeasured)} "
            "(the papers' sizes are for a GPU)")
    seeded = ", ".join(f"{n} {k}" for n, k in plan.seeds.items())
    print(terminal(f"{prefix}{len(todo)} run(s) to train or resume, {len(reuse)} to reuse; {when}; seeds per figure: "
                   f"{seeded}"), file=sys.stderr)


def main() -> None:
    from ._lean import lean_command

    run_cli(lean_command(app))
