"""``probe``: analyse snapshot files and checkpoints. A thin layer over :mod:`probe.api`, in plain Click.

Every command parses its options (declared once, in :mod:`.options`), calls one API function and hands
the results to :mod:`probe.render`: data to stdout (``--format table|json|csv``), logs, status,
warnings and errors to stderr. The probe commands and ``probe batch`` are built from the probes'
declarations (:mod:`.probes`); the others are written here. Every command's help ends with examples.
Heavy modules (torch, matplotlib) are imported inside the commands.
"""
from __future__ import annotations

import inspect
import sys
import textwrap
from contextlib import ExitStack
from pathlib import Path

import click

from .. import registry
from ..jobs import TIMEOUT_HELP, TIMEOUT_S
from ..printable import terminal
from ..errors import EXIT_BAD_INPUT, Interrupted, ProbeError, closest, run_cli
from ..signals import stop_asked, stoppable
from . import options as O
from .probes import batch_options, command, converted, status_line, with_examples

HELP = with_examples("Probe training snapshots and checkpoints for reasoning vs memorizing structure. "
                     "probe COMMAND --help says what a command does, its options and examples.",
                     ("probe info run.h5", "probe similarity run.h5 --tokens reasoning --step all",
                      "probe report run.h5 -o report.html"))
CONTEXT = {"help_option_names": ["--help"], "max_content_width": 100}


def _show_version(ctx, param, value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        click.echo(f"probe {version('gamma-probe')}")
    except PackageNotFoundError:   # run from a checkout that was never installed
        click.echo("probe (version unknown: the gamma-probe distribution is not installed)")
    ctx.exit()


class Commands(click.Group):
    """The commands in the order a reader wants them (Click's own lists them sorted): ``info`` and
    ``validate``, a command per probe (:func:`.probes.command`), ``batch``, ``report``, ``sweep-summary``
    and ``figures``. The probe commands, batch and report are built when asked for (Click's lazy-group
    pattern), so ``probe --version`` and ``probe info`` import no probe."""

    def list_commands(self, ctx) -> list[str]:
        return ["info", "validate", *registry.names("command"), "batch", "report", "sweep-summary", "figures"]

    def get_command(self, ctx, name: str):
        if name not in self.commands:
            if name == "batch":
                self.add_command(_batch_command())
            elif name == "report":
                self.add_command(_report_command())
            elif name in registry.names("command"):
                self.add_command(command(registry.get(name)))
        return self.commands.get(name)

    def resolve_command(self, ctx, args):
        """Click's, with the closest command named when the word is none (``No such command 'simlarity'.
        Did you mean 'similarity'?``), as Click names the closest option."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            match = closest(name, self.list_commands(ctx))
            ctx.fail(f"No such command {name!r}." + (f" Did you mean '{match}'?" if match else ""))
        return super().resolve_command(ctx, args)


@click.group(cls=Commands, help=HELP, no_args_is_help=True, context_settings=CONTEXT)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="print the version and exit")
def app() -> None:
    """The options before the command word (--version runs before any command)."""


def _command(name: str | None = None, *, examples: tuple[str, ...], arguments: dict[str, str] | None = None):
    """``app.command``: the function's docstring, an Arguments and an Examples block as its help."""
    def register(fn):
        doc = inspect.getdoc(fn)
        return app.command(name or fn.__name__, help=with_examples(doc, examples, arguments),
                           short_help=doc.split(". ")[0].rstrip(".") + ".")(fn)
    return register


@_command(examples=("probe info run.h5", "probe info model/ --format json", "probe info model.safetensors"),
          arguments={"FILE": O.SOURCE})
@click.argument("file")
@O.fmt()
def info(file: str, fmt: str) -> None:
    """A run: configuration, snapshot steps, token groups, tensors and shapes. A checkpoint: format,
    layout, layers, heads, step, and every tensor's shape and dtype."""
    from .. import api, render

    render.info(api.info(file), fmt)


@_command(examples=("probe validate run.h5", "probe validate run.h5 --format json"),
          arguments={"FILE": f"file to check: a {O.SNAPSHOT_FILE}"})
@click.argument("file")
@O.fmt("table (a line per finding, or 'valid', then a 'note:' line per note), json ({file, valid, findings, "
       "notes}) or csv (tidy: step,metric,key,value, a finding or note per row)")
def validate(file: str, fmt: str) -> None:
    """Check FILE against the snapshot schema and read all its data once, verifying every checksum: exit 0
    if it matches, else list findings and exit 1. Notes (a file older than checksums) follow either way."""
    from .. import api, render

    findings = api.validate(file)
    if fmt == "json":
        render.write_json({"file": file, "valid": not findings, "findings": findings, "notes": findings.notes})
    elif fmt == "csv":
        render.write_csv(render.TIDY, [(None, "finding", file, x) for x in findings] +
                         [(None, "note", file, x) for x in findings.notes])
    else:
        for x in [*(findings or ["valid"]), *(f"note: {x}" for x in findings.notes)]:
            print(terminal(f"{file}: {x}"))   # a finding quotes the file's names
    if findings:
        raise click.exceptions.Exit(1)


# --- many checkpoints, a page, a sweep, the figures ----------------------------------------------

def _batch_command() -> click.Command:
    """``probe batch``: its own options, then the options of every batch probe (:func:`.probes.batch_options`)."""
    def run(paths, probes, out, jobs, scheduler, scheduler_timeout, revisions, fmt, tensorboard, **options) -> None:
        from .. import batch as B

        options = converted(options, absolute=True)
        try:
            with status_line("batch") as tick:
                rows = B.batch(paths, probes, options, out=out, jobs=jobs, scheduler=scheduler,
                               progress=lambda n, total: n < total and tick(f"{n}/{total} tasks done"),
                               revisions=revisions, tensorboard=tensorboard, scheduler_timeout=scheduler_timeout)
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
            raise click.exceptions.Exit(1)

    def listed(*reads):
        return ", ".join(registry.names("batch", reads))

    params = [
        click.Argument(["paths"], nargs=-1, required=True),
        click.Option(["--probe", "-p", "probes"], multiple=True, required=True, help=(
            f"probe to run (repeat for several): {listed(registry.WEIGHTS)}; {listed(registry.ACTIVATIONS)} "
            f"(checkpoints: with --text); on snapshot files also {listed(registry.SNAPSHOT)}")),
        click.Option(["--out", "-o", "out"], default=None, help="write the table to this .csv or .json instead of stdout; "
                                                  "re-running skips what it already holds"),
        click.Option(["--jobs", "-j", "jobs"], type=click.IntRange(min=0), default=0, show_default=True,
                     help="worker processes at once, one BLAS thread each; 0 or 1: this process, whose BLAS uses "
                          "every core"),
        click.Option(["--scheduler"], default=None, help="address of a running Dask scheduler (tcp://host:8786)"),
        click.Option(["--scheduler-timeout"], type=click.FloatRange(min=0, min_open=True), default=TIMEOUT_S,
                     show_default=True, help=TIMEOUT_HELP),
        click.Option(["--revisions"], default=None, help=O.REVISIONS),
        *batch_options(),
        click.Option(["--format", "-f", "fmt"], type=click.Choice(O.FORMATS), default="table", show_default=True,
                     help="of the table on stdout: table, json (a list of rows) or csv (path,step,probe,key,metric,"
                          "value); --out takes the format of its extension"),
        click.Option(["--tensorboard"], default=None, metavar="DIR", help=O.TENSORBOARD)]
    help = ("Run probes over many checkpoints into one tidy table (path, step, probe, key, metric, value), sorted "
            "by step; each probe gets the options it takes; a failing checkpoint is an error row, the batch goes "
            "on and exits 1.")
    return click.Command("batch", params=params, callback=run, short_help=help.split(";")[0] + ".", help=with_examples(
        help, ("probe batch checkpoints/ --probe spectrum --probe rank -o table.csv",
               "probe batch run.h5 --probe similarity --probe ood --step all",
               "probe batch 'ckpt/*.pt' --probe rank --jobs 4 --format json",
               "probe batch run.h5 --probe similarity --step all --tensorboard tb"),
        {"PATHS": "checkpoints: files, folders (a model folder, or a folder of checkpoints such as checkpoint-500/), "
                  "globs, and hub models hf:ORG/NAME[@REV]"}))


def _batch_rows(rows, fmt: str) -> None:
    from .. import batch as B, render

    if fmt == "table":   # error and warning rows short, their messages on stderr
        render.batch_table(B.COLUMNS, rows)
    else:
        _emit(fmt, list(B.COLUMNS), rows, [dict(zip(B.COLUMNS, r)) for r in rows])


def _emit(fmt: str, header: list, rows: list, json, left=()) -> None:
    """``rows`` on stdout in ``fmt``: a table (``left``: its text columns), CSV, or ``json`` as JSON."""
    from .. import render

    if fmt == "json":
        render.write_json(json)
    elif fmt == "csv":
        render.write_csv(header, rows)
    else:
        render.table(header, rows, left=left)


def _report_command() -> click.Command:
    from ..report import MAX_STEPS, SLIDER_MAX

    weights = ", ".join(registry.names("report", (registry.WEIGHTS,)))
    others = ", ".join(registry.names("report", (registry.ACTIVATIONS, registry.SNAPSHOT)))
    params = [
        click.Argument(["paths"], nargs=-1, required=True),
        click.Option(["--out", "-o", "out"], default=None, help="the page to write (.html) [default: report.html]"),
        click.Option(["--probe", "-p", "probes"], multiple=True, help=(
            f"probe whose section to show (repeat for several): {weights}; on snapshot files also {others} "
            "[default: every probe that applies to the run]")),
        click.Option(["--max-steps"], type=click.IntRange(min=1), default=MAX_STEPS, show_default=True,
                     help="steps in each probe's table, log-spaced over training (the first and the last among them)"),
        click.Option(["--slider-steps"], type=click.IntRange(min=0), default=SLIDER_MAX, show_default=True,
                     help="figures behind each probe's step slider, log-spaced over the snapshots (0: every "
                          "snapshot); the probes that run the model draw the table's steps only"),
        click.Option(["--watch"], is_flag=True, default=False,
                     help="rewrite the page whenever a run gains a snapshot (the page reloads itself) until every "
                          "run is finished, or Ctrl-C"),
        click.Option(["--interval"], type=float, default=2.0, show_default=True,
                     help="--watch: seconds between looks at the runs"),
        click.Option(["--max-share"], type=float, default=1.0, show_default=True,
                     help="--watch: this process's CPU time at most this share of one core; what does not fit now "
                          "is filled in later (probe-train --report: 0.01)"),
        click.Option(["--revisions"], default=None, help=O.REVISIONS),
        click.Option(["--allow-nonfinite"], is_flag=True, default=False,
                     help="go on past NaN or inf instead of stopping with an error: each probe computes on the "
                          "finite part (probe NAME --help says how) and its section notes what was left out"),
        click.Option(["--max-memory"], default=None, metavar="SIZE", help=(
            "memory budget of each probe's reads and math (512MB, 8GiB or bytes): a tensor that needs more is "
            "refused before it is read, and the probe's section says so [default: half of the memory this "
            "process can have: physical memory, or a lower cgroup or ulimit -v limit]")),
        click.Option(["--keep-going"], is_flag=True, default=False, help=(
            "write the page even where a probe fails (raises: a bug of the probe, not a run it does not apply "
            "to): its section says it failed, a warning line names it, exit 0 [default: an Error line per failed "
            "section, exit 2, the page not written]"))]
    help = ("Write one HTML page for a run, or for runs side by side: configuration, curves, token groups and "
            "every probe's numbers and figures over training; what it is doing goes to stderr.")
    return click.Command("report", params=params, callback=_report, short_help=help.split(":")[0] + ".",
                         help=with_examples(help, ("probe report run.h5", "probe report a.h5 b.h5 -o compare.html",
                                                   "probe report run.h5 --watch --max-steps 10"),
                                            {"PATHS": "runs: snapshot files, checkpoint folders (a model folder, or a "
                                                      "folder of checkpoint-500/ ... folders) and hub models "
                                                      "hf:ORG/NAME[@REV]; several runs are shown side by side"}))


def _report(paths, out, probes, max_steps, slider_steps, watch, interval, max_share, revisions, allow_nonfinite,
            max_memory, keep_going) -> None:
    from .. import report as R

    out = out or "report.html"
    options = dict(probes=list(probes) or None, max_steps=max_steps, revisions=revisions,
                   allow_nonfinite=allow_nonfinite, slider_steps=slider_steps, max_memory=max_memory,
                   keep_going=keep_going)
    def log(msg):   # it names runs, files and what went wrong with them
        print(terminal(msg), file=sys.stderr)

    try:
        rep = _report_written(paths, out, watch, interval, max_share, log, options)
    except R.Failed as exc:   # a line per failed section, as one Error line says one refusal
        kept = "keeps its last page" if watch and Path(out).exists() else "not written"
        for line in exc.failures:
            log(f"Error: report: {line}; {out} {kept} (--keep-going writes it with the section marked failed)")
        raise click.exceptions.Exit(EXIT_BAD_INPUT) from None
    for line in rep.failures():
        log(f"warning: report: {line} (its section says so)")
    for line in rep.left_out():   # the page shows the other steps, and says so too
        log(f"warning: report: {line}")
    if not watch:
        log(f"wrote {out}: {len(rep.sources)} run(s), {len(rep.probes)} probes")


def _report_written(paths, out, watch, interval, max_share, log, options):
    """The page written once, or watched (``probe report --watch``); the :class:`~probe.report.Report`."""
    from .. import report as R

    if watch:
        # the stoppable block held open here, so that the signal that ended the watch is still known below. The first page
        # takes as long as a report: its sections say so as they start; each later page is one log line.
        with stoppable(), ExitStack() as status:
            tick = status.enter_context(status_line("report", each=True))
            written = []

            def said(msg):
                status.close()
                written.append(msg)
                log(msg)

            rep = R.watch(list(paths), out, interval=interval, max_share=max_share, log=said,
                          progress=lambda label: None if written else tick(label), **options)
            if not rep.sources:
                raise Interrupted(f"Interrupted before any run could be read "
                                  f"({next(iter(rep.errors.values()), 'none yet')}); nothing was written")
            if stop_asked():
                raise Interrupted(f"Interrupted: {out} holds the runs as they were (no longer reloading); the "
                                  "same command watches again")
        return rep
    with status_line("report", each=True) as tick:   # a line per run and section: the sections take seconds each
        rep = R.report(list(paths), out, progress=tick, **options)
    for spec, err in rep.errors.items():
        log(f"warning: {spec}: {err}")
    return rep


@_command("sweep-summary", examples=(
    "probe sweep-summary sweep/",
    "probe sweep-summary sweep/ --metric similarity:mean_offdiag",
    "probe sweep-summary sweep/sweep.json --outcome 'acc[rsn_test]>0.5'"),
    arguments={"FOLDER": "a sweep's folder (probe-train sweep --out) or its sweep.json"})
@click.argument("folder")
@click.option("--metric", multiple=True, help=(
    "number per run (repeat): acc[SPLIT], loss[SPLIT], train_loss, or PROBE:NAME such as similarity:distance_corr "
    "or pca:order_pc1[reasoning], the probe's options in brackets: similarity(tokens=logic):mean_offdiag "
    "[default: every logged accuracy]"))
@click.option("--outcome", multiple=True, help=(
    "binary outcome per run (repeat): A>B, A<B, A>=B or A<=B with metrics or numbers [default: composite "
    "acc[ood_inferential]>acc[ood_symmetric]; anchor acc[rsn_test]>0.5]"))
@click.option("--step", "-s", default="latest", show_default=True,
              help="the step each run is read at: latest (finished runs only) or a step number every run has")
@O.fmt("table (per cell: each metric's mean, std and interval, then each outcome's fraction), json (strict: no "
       "NaN) or csv (tidy: step,metric,key,value)")
def sweep_summary(folder: str, metric: tuple, outcome: tuple, step: str, fmt: str) -> None:
    """Per grid cell over its seeds: mean, std and 95 % bootstrap interval of each metric, and the
    fraction of seeds with each outcome with its 95 % Wilson interval (verdict against 1/2: above,
    below, or not shown when the interval straddles it)."""
    from .. import api, render

    with status_line("sweep-summary") as tick:
        res = api.sweep_summary(folder, list(metric) or None, list(outcome) or None, step=step, progress=tick)
    render.sweep_summary(res, fmt, folder)


@_command(examples=("probe figures --list", "probe figures p1-cosine --quick",
                    "probe figures --all --quick --dry-run", "probe figures --all --quick -o figures/"),
          arguments={"NAMES": "figures to make (see --list)"})
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, default=False, help="make every figure")
@click.option("--quick", is_flag=True, default=False,
              help="CPU sizes (every figure in minutes on 2 cores) instead of the papers' sizes (a GPU)")
@click.option("--tiny", is_flag=True, default=False, help="test sizes (seconds); the figures show little")
@click.option("--out", "-o", default=None, help="folder of the figures [default: figures]")
@click.option("--runs", help="folder of trained runs, reused across calls [default: OUT/runs]")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, show_default=True,
              help="training runs at once; 0: one per CPU core")
@click.option("--seeds", type=click.IntRange(min=0), default=0, show_default=True,
              help="seeds per γ in the figures that compare γ (bands, intervals); 0: --tiny 1, --quick 3, paper sizes 1")
@click.option("--budget", type=click.FloatRange(min=0.1), help=(
    "minutes: give each figure the most seeds whose estimated time (each preset's measured speed) fits, said on "
    "stderr; replaces --seeds"))
@click.option("--stories", help=(
    "story text of the runs on logic + stories (p1-language, p4-*): kjv, synthetic, tinystories or a file or folder "
    "(probe-train --stories) [default: --quick kjv when installed, else each preset's own]"))
@click.option("--examples", help="folder of the fig_*.py scripts [default: examples/ of this checkout]")
@click.option("--list", "list_", is_flag=True, default=False, help="list the figures and exit")
@click.option("--dry-run", is_flag=True, default=False, help="list the runs each figure draws, whether each would be trained, resumed "
                                              "or reused, and the estimated time; train and draw nothing")
@click.option("--check", is_flag=True, default=False, help="instead of drawing: the effect each figure states and the fraction of its "
                                            "seeds that show it (trains what is missing)")
@O.fmt("of the --dry-run plan and the --check claims: table, json or csv (figures made: their files, a line each)")
def figures(names: tuple, all_: bool, quick: bool, tiny: bool, out, runs, jobs: int, seeds: int, budget, stories,
            examples, list_: bool, dry_run: bool, check: bool, fmt: str) -> None:
    """Regenerate the papers' figures: train the runs each needs (or reuse finished ones), probe them
    and draw PNG + PDF."""
    from .. import figures as F

    folder = F.examples_dir(examples)
    scripts = F.load_scripts(folder)
    if list_:
        for name, sc in scripts.items():
            print(f"{terminal(name)}\t{terminal(sc.title)}")
        return
    for wrong, msg in ((all_ == bool(names), "name the figures to make, or pass --all (see --list)"),
                       (quick and tiny, "--quick and --tiny exclude each other"),
                       (budget is not None and seeds, "--budget chooses the seeds: give it or --seeds, not both"),
                       (dry_run and check, "--dry-run and --check exclude each other")):
        if wrong:
            raise ProbeError(msg)
    F.check_known(list(names or []), scripts)   # before any folder is made
    names = list(scripts) if all_ else list(names)
    size = "tiny" if tiny else "quick" if quick else "full"
    if size == "full" and not F.cuda_available() and not dry_run:
        print("warning: no GPU found; the papers' sizes take days on a CPU (use --quick)", file=sys.stderr)
    per_figure = None
    if budget is not None:   # planned before any folder is made: a budget that cannot be planned leaves none
        planned = F.FigureContext(Path(out or "figures"), size, runs, jobs, seeds, create=False, stories=stories)
        plan = F.seeds_for_budget(names, planned, folder, budget)
        per_figure = plan.seeds
        _say_plan(plan, f"budget {budget:g} min: ")
        if plan.seconds > budget * 60:
            print(f"warning: even one seed per figure is estimated at {plan.seconds / 60:.1f} min, over the budget "
                  f"of {budget:g} min; going on with one seed each", file=sys.stderr)
    ctx = F.FigureContext(Path(out or "figures"), size, runs, jobs, seeds, create=not dry_run, stories=stories)
    if dry_run:
        plan = plan if budget is not None else F.plan_figures(names, ctx, folder)
        header = ["figure", "run", "preset", "action", "estimate_s", "file"]
        rows = [[r.figure, r.label, r.preset, r.action, None if r.seconds is None else round(r.seconds),
                 str(r.path) if r.path else "-"] for r in plan.rows]
        exact = [[*row[:4], r.seconds, row[5]] for row, r in zip(rows, plan.rows)]   # JSON: estimates unrounded
        _emit(fmt, header, rows, {"runs": [dict(zip(header, row)) for row in exact], "seeds": plan.seeds,
                                  "jobs": plan.jobs, "train_seconds": plan.train_seconds,
                                  "draw_seconds": plan.draw_seconds, "seconds": plan.seconds})
        if budget is None:
            _say_plan(plan, "")
        return
    if check:
        claims, failed = F.check_figures(names, ctx, folder, per_figure)
        header = ["figure", "shown", "fraction", "ci_lo", "ci_hi", "values", "claim"]
        rows = [[n, f"{d['k']}/{d['n']}", d["fraction"], d["ci_lo"], d["ci_hi"],
                 " ".join(f"{v:.3g}" for v in d["values"]),
                 d["claim"] if d["expected"] else f"{d['claim']} (a paper's direction this size was measured not to show)"]
                for n, cs in claims.items() for d in (c.summary() for c in cs)]
        if fmt == "table":   # the claims' words under the numbers, numbered: a row with them was 170 columns
            from .. import render

            render.table([*header[:-1], "#"], [[*r[:-1], i] for i, r in enumerate(rows, 1)], left=(0, 5),
                         width=render.WIDTH)
            print()
            for i, r in enumerate(rows, 1):
                print(textwrap.fill(terminal(r[-1]), render.WIDTH, initial_indent=f"{i:>3}  ", subsequent_indent=" " * 5))
        else:
            _emit(fmt, header, rows, {n: [c.summary() for c in cs] for n, cs in claims.items()}, left=(0, 5, 6))
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
        raise click.exceptions.Exit(1)


def _say_plan(plan, prefix: str) -> None:
    """The plan's totals on stderr: runs to train, runs reused, the estimated time and the seeds."""
    reuse = {r.path for r in plan.rows if r.action == "reuse"}
    secs = plan.seconds
    when = (f"estimated {secs / 60:.1f} min on a {plan.machine} with {plan.jobs} job(s) "
            f"({plan.train_seconds / 60:.1f} min of training, {plan.draw_seconds / 60:.1f} min of drawing beside it)"
            if secs is not None else f"no estimate: never measured on this machine class: {', '.join(plan.unmeasured)} "
            "(the papers' sizes are for a GPU)")
    seeded = ", ".join(f"{n} {k}" for n, k in plan.seeds.items())
    print(terminal(f"{prefix}{len(plan.todo)} run(s) to train or resume, {len(reuse)} to reuse; {when}; seeds per figure: "
                   f"{seeded}"), file=sys.stderr)


def main() -> None:
    """The ``probe`` entry point."""
    run_cli(app)
