"""``probe-train``: train a run and write its snapshot file; ``probe-train sweep`` trains a grid of
runs, ``probe-train presets`` lists the presets. Plain Click, like ``probe``.

Every :class:`~probe_train.config.RunConfig` field is a flag; a flag left out keeps
the preset's value (``--print-config`` shows the result).
"""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import fields
from functools import partial
from typing import Optional

import click

from probe.jobs import TIMEOUT_HELP, TIMEOUT_S
from probe.children import child_env, entry_command, idle_priority, normal_priority, start
from probe.errors import did_you_mean, fail, param, run_cli, terminal
from probe.signals import stop_signals

from .config import GROUPS, PRESETS, PURPOSES, RunConfig, preset as make_preset
from .options import CONTEXT, PRESET_HELP, StderrBar, known_preset


# The commands besides training; main() dispatches on the first word, so that training keeps its
# plain form (probe-train --preset quick --out run.h5) with no command word.
COMMANDS = {"sweep": "train a grid of runs, one per point (probe-train sweep --help)",
            "presets": "list the presets: what each is for, task, model size, steps",
            "ensemble": "train runs differing only in seed and gamma as one batched model (sweep's)",
            "coord-check": "mup's coordinate check: each module's output size against the width"}

def _show_version(ctx, _param, value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        click.echo(f"probe-train {version('gamma-probe')}")
    except PackageNotFoundError:   # a source tree that was never installed
        click.echo("probe-train (version unknown: the gamma-probe distribution is not installed)")
    ctx.exit()


def config_text(cfg: RunConfig, fmt: str = "json") -> str:
    """The configuration as JSON, or as YAML (PyYAML's ``safe_dump``, in the fields' order; a string
    holding what is not printable ASCII, a path from a resumed file with ESC or a bidi override that a
    terminal would obey, is written in double-quoted escapes)."""
    d = cfg.to_dict()
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(d, sort_keys=False, width=float("inf"))   # one line a field, however long
    return json.dumps(d, indent=2) + "\n"


class _LiveReport:
    """``--report PAGE``: a ``probe report --watch`` process, started at the first snapshot, at idle
    priority, on one BLAS thread and held to 1 % of a core, so the page follows the run without slowing it
    (bench/bench_report.py). At the last step it writes the last page by itself; if training stops
    early it is asked to (SIGTERM). Either way it is waited for, so the page is never left
    half-written or still reloading; if the trainer is killed outright, the kernel sends the watcher
    SIGTERM."""

    def __init__(self, run: str, page: str):
        self.run, self.page, self.proc, self.log = run, page, None, None

    def __call__(self, step: int) -> None:
        if self.proc is not None:
            return
        # SIGTERM from the kernel if this trainer dies without a word (SIGKILL): the watcher writes its
        # last page and ends, instead of watching a run that no longer grows
        env = child_env(signal.SIGTERM, {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                         "OPENBLAS_NUM_THREADS": "1"})
        self.log = tempfile.TemporaryFile()
        self.proc = start(
            [*entry_command("probe"), "report", self.run, "-o", self.page, "--watch", "--max-share", "0.01"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log, env=env,
            preexec_fn=idle_priority)

    def finish(self, completed: bool) -> None:
        if self.proc is None:
            return
        # a finished run: the watcher sees the last step within its --interval and writes the last page
        # (and exits 0); a stopped run: ask it (heard even while it still imports: entry_command)
        if not completed and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        normal_priority(self.proc.pid)   # training is over: the last page need not wait for idle CPU
        try:
            code = self.proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        except KeyboardInterrupt:   # a second Ctrl-C: the user will not wait for the last page either
            self.proc.kill()
            self.proc.wait()
            raise
        # stopped by a signal (ours, or the terminal's Ctrl-C / hangup, which reach it too), it wrote its
        # last page and says so with the signal's exit code
        # (a watcher may also have seen this trainer let go of the run before the signal came: it then ends
        # by itself, with the same last page, and says that no process writes the run)
        stopped = (code in {128 + int(s) for s in stop_signals()} or not completed) and os.path.exists(self.page)
        if code != 0 and not stopped:
            self.log.seek(0)
            msg = self.log.read().decode(errors="replace").strip().splitlines()
            print(terminal(f"warning: the report process stopped ({msg[-1] if msg else f'exit {code}'})"),
                  file=sys.stderr)
        else:
            print(terminal(f"wrote {self.page}"), file=sys.stderr)


class _TensorBoard:
    """``--tensorboard DIR``: what the trainer logs, as TensorBoard scalars in ``DIR/RUN`` (RUN: the run
    file's stem), written through :mod:`probe.format.tensorboard` at every snapshot and flushed, so that
    TensorBoard follows the run. A fresh run starts the folder afresh (``--overwrite``: its old event
    files go; without it a folder that holds some is refused); a resumed one first adds what the file
    holds and the folder lacks (the folder only grows, so nothing is written twice). With
    ``--tensorboard-probes``, the probes' numbers follow once training is done, from a ``probe batch OUT
    --step all --tensorboard DIR`` process: probe's probes, and a folder per run named as batch names it."""

    def __init__(self, folder: str, out: str, probes: Optional[str], resume: bool, overwrite: bool):
        from probe import registry
        from probe.format import tensorboard as tb

        tb.require()
        self.probes = [p.strip() for p in (probes or "").split(",") if p.strip()]
        known = registry.names("batch")
        for p in self.probes:
            if p not in known:
                fail(f"{param('tensorboard_probes', probes)}: unknown probe '{p}'{did_you_mean(p, known)} "
                     f"(probe batch's: {', '.join(known)})")
        self.folder, self.out = tb.prepare(folder), out
        self.run = os.path.join(folder, os.path.splitext(os.path.basename(out))[0])
        if not resume and not overwrite and tb.event_files(self.run):
            fail(f"{param('tensorboard', folder)}: {self.run} holds the TensorBoard events of an earlier run; "
                 f"pass {param('overwrite')} to replace them or choose another folder")
        self.events = None

    def start(self, trainer, stored: Optional[RunConfig]) -> None:
        """Before the first step: the folder of a fresh run emptied, that of a resumed one filled in."""
        from probe.format import tensorboard as tb

        from .trainer import lr_at

        if not trainer.resume:
            tb.remove_events(self.run)
        self.events = tb.Events(self.run)
        self.lr = partial(lr_at, trainer.cfg)
        if trainer.resume:   # the schedule the file was trained with (--steps may change it from here on)
            tb.add_run(self.events, self.out, partial(lr_at, stored or trainer.cfg))
            self.events.flush()

    def __call__(self, step: int, metrics: dict, train_loss: float, losses) -> None:
        from probe.format import tensorboard as tb

        tb.add_snapshot(self.events, step, metrics, train_loss, () if losses is None else losses, self.lr)
        self.events.flush()

    def finish(self, completed: bool) -> None:
        if self.events is None:
            return
        self.events.close()
        probes = self._probes() if completed and self.probes else ""
        print(terminal(f"wrote {self.run}: {self.events.written} TensorBoard points{probes} (tensorboard --logdir "
                       f"{self.folder})"), file=sys.stderr)

    def _probes(self) -> str:
        """Run probe batch for the probes; its warnings and error rows as warning lines. What it added."""
        cmd = [*entry_command("probe"), "batch", self.out, *[a for p in self.probes for a in ("--probe", p)],
               "--step", "all", "--tensorboard", self.folder, "--format", "csv"]
        proc = start(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     env=child_env(signal.SIGTERM))
        table, log = proc.communicate()
        for line in log.splitlines():
            if line.startswith(("warning: ", "Error: ")):
                print(terminal(line.replace("Error: ", "warning: --tensorboard-probes: ", 1)), file=sys.stderr)
        for row in csv.DictReader(table.splitlines()):
            if row["metric"] == "error":
                at = f" at step {row['step']}" if row["step"] else ""
                # the CSV holds the exact text of an error that may quote the run's names
                print(terminal(f"warning: --tensorboard-probes: {row['probe']}{at}: {row['value']}"), file=sys.stderr)
        if proc.returncode in (0, 1):
            return f" and the numbers of {', '.join(self.probes)}"
        print(terminal(f"warning: the probes for TensorBoard stopped (exit {proc.returncode}); probe batch {self.out} "
                       f"--step all --tensorboard {self.folder} adds them"), file=sys.stderr)
        return ""


def _train(preset: str, out: Optional[str], resume: bool, overwrite: bool, quiet: bool, report: Optional[str] = None,
           tensorboard: Optional[str] = None, tensorboard_probes: Optional[str] = None,
           print_config: bool = False, fmt: str = "json", stop_at: Optional[int] = None, **overrides) -> None:
    if fmt != "json" and not print_config:
        fail(f"{param('format', fmt)} is the format of {param('print_config')}; give both")
    if out is None and (resume or not print_config):
        # Click's wording for a missing option, as before --out became optional
        fail("Missing option '--out' / '-o': " + ("the run to continue" if resume else
             "the snapshot file to write (or --print-config to show the configuration only)")
             + "; see 'probe-train --help'")
    if report is not None and not print_config:
        if not report.endswith((".html", ".htm")):
            fail(f"{param('report', report)}: use a .html name")
        folder = os.path.dirname(os.path.abspath(report))
        if not os.path.isdir(folder) or os.path.isdir(report):
            fail(f"{param('report', report)}: cannot write there (no folder {folder}, or it is a folder)")

    if tensorboard_probes is not None and tensorboard is None:
        fail(f"{param('tensorboard_probes', tensorboard_probes)} adds to {param('tensorboard')}; give both")
    given = {k: v for k, v in overrides.items() if v is not None}
    stored_cfg = None
    if resume:
        # continue with the configuration stored in the file, plus explicit overrides of steps etc.
        from probe.format import Run

        with Run(out) as run:
            stored = {k: v for k, v in run.config.items() if k in {f.name for f in fields(RunConfig)}}
        changed = {k for k, v in given.items() if stored.get(k) != v and k not in ("steps", "device", "threads")}
        if changed:
            fail(f"{param('resume')} keeps the run's configuration; cannot change {', '.join(sorted(changed))}")
        cfg = RunConfig(**{**stored, **given})
        stored_cfg = RunConfig(**stored)
    else:
        cfg = make_preset(preset, **given)
    if print_config:   # what would be trained, and nothing else: no file is opened for writing
        sys.stdout.write(config_text(cfg, fmt))
        return
    board = _TensorBoard(tensorboard, out, tensorboard_probes, resume, overwrite) if tensorboard else None
    from .trainer import Trainer   # torch: only once there is something to train

    live = _LiveReport(out, report) if report else None
    completed = False
    try:
        trainer = Trainer(cfg, out, resume=resume, overwrite=overwrite, show_progress=not quiet, on_snapshot=live,
                          on_metrics=board, stop_at=stop_at)
        if board is not None:
            board.start(trainer, stored_cfg)
        result = trainer.run()
        completed = True
    finally:
        if live is not None:
            # a run stopped by --stop-at never reaches the last step the watcher waits for: it is asked for
            # its last page, as when training stops early
            live.finish(completed and result.steps == cfg.steps)
        if board is not None:
            board.finish(completed)
    stopped = (f"; stopped at step {result.steps} of {cfg.steps} as asked (--stop-at): probe-train --resume "
               f"--out {result.path} trains the rest") if result.steps < cfg.steps else ""
    print(terminal(f"wrote {result.path}: {result.snapshots} snapshots, {result.steps} steps in "
                   f"{result.seconds:.1f} s{stopped}"), file=sys.stderr)
    for split, m in result.metrics.items():
        print(f"{split}\tloss {m['loss']:.4f}\tacc {m['acc']:.4f}")


# \b: Click keeps the lines of the paragraph it starts, so the blocks stay lists; lines under 78
# characters, so that an 80-column help (a pipe's) does not wrap a command in two
_TRAIN_HELP = "\n\n".join([
    "Train a run and write its snapshot file (.h5). Snapshots are appended under SWMR, so probes "
    "can read OUT while it is written. Options under Task, Model, Optimisation and Snapshots "
    "default to the preset's value; --print-config shows them all.",
    "\b\nCommands (the first word; without one, probe-train trains):\n"
    + "\n".join(f"  {name.ljust(max(map(len, COMMANDS)))}  {text}" for name, text in COMMANDS.items()),
    "\b\nExamples:\n"
    "  probe-train --preset quick --gamma 0.8 --out run.h5 --tensorboard tb\n"
    "  probe-train presets\n"
    "  probe-train --preset quick --gamma 0.8 --print-config\n"
    "  probe-train --resume --out run.h5 --steps 8000\n"
    "  probe-train sweep --preset tiny --grid gamma=0.3,0.8 --grid seed=0:3 -o demo",
])


RUN, OUTPUT = "Run control", "Output"   # the headings of the command's own options; then config.GROUPS


class _Option(click.Option):
    """An option and the heading of ``probe-train --help`` it is listed under."""

    def __init__(self, *args, group: str, **kw):
        super().__init__(*args, **kw)
        self.group = group


class _Grouped(click.Command):
    """probe-train's command: --help lists its options under headings (they were 186 lines of one list),
    the command's own under Run control and Output, a RunConfig field's under the group it is declared
    in (config.GROUPS); one column of terms across the headings."""

    def format_options(self, ctx, formatter) -> None:
        # every option has its group but --help, which click adds: under Run control
        rows = [(getattr(p, "group", RUN), p.get_help_record(ctx)) for p in self.get_params(ctx)]
        width = min(30, max(len(r[0]) for _, r in rows if r))   # 30: click's widest first column
        for title in (RUN, OUTPUT, *GROUPS):
            with formatter.section(title):
                formatter.write_dl([(term.ljust(width), text) for g, (term, text) in rows if g == title])


def _config_option(f) -> click.Option:
    """The flag of RunConfig field ``f``, default None: a flag left out keeps the preset's value."""
    flag = "--" + f.name.replace("_", "-")
    decl = f"{flag}/--no-{flag[2:]}" if f.type == "bool" else flag   # a bool: a flag and its --no- form
    return _Option([decl, f.name], type={"int": int, "float": float, "str": str}.get(f.type), default=None,
                   help=f.metadata["help"], group=f.metadata["group"])


train_command = _Grouped("probe-train", callback=_train, help=_TRAIN_HELP, context_settings=CONTEXT, params=[
    _Option(["--preset"], group=RUN, default="quick", show_default=True, help=PRESET_HELP, callback=known_preset),
    _Option(["--out", "-o", "out"], group=OUTPUT,
            help="snapshot file to write (.h5); required unless --print-config"),
    _Option(["--resume/--no-resume"], group=RUN, default=False, show_default=True,
            help="continue OUT from its last snapshot"),
    _Option(["--overwrite/--no-overwrite"], group=OUTPUT, default=False, show_default=True,
            help="replace OUT if it exists"),
    _Option(["--quiet", "-q"], group=OUTPUT, is_flag=True, help="no progress bar"),
    _Option(["--stop-at"], group=RUN, type=click.IntRange(min=1), metavar="STEP", help=(
        "train the configured schedule (warm-up and cosine over --steps) but stop after STEP steps, with a "
        "snapshot there; --resume later trains on to --steps, as if never stopped")),
    _Option(["--report"], group=OUTPUT,
            help="keep this HTML run report up to date while training (probe report --watch)"),
    _Option(["--tensorboard"], group=OUTPUT, metavar="DIR", help=(
        "write what training logs as TensorBoard scalars into DIR/RUN (RUN: OUT's name without .h5) at every "
        "snapshot: loss/SPLIT and acc/SPLIT, train/loss, and per update train/batch_loss and train/lr; --resume "
        "adds to them, --overwrite replaces them (needs pip install 'gamma-probe[tensorboard]')")),
    _Option(["--tensorboard-probes"], group=OUTPUT, metavar="PROBES", help=(
        "with --tensorboard, these probes' numbers too, PROBE/METRIC[KEY] at every snapshot: a comma list of "
        "probe batch's probes (similarity,pca), computed once training is done (probe batch OUT --step all "
        "--tensorboard DIR); default: none")),
    _Option(["--print-config"], group=RUN, is_flag=True, help=(
        "print the configuration the preset and the flags give (every field, as JSON; --format yaml for YAML) "
        "and exit: nothing is trained or written")),
    _Option(["--format", "fmt"], group=RUN, type=click.Choice(["json", "yaml"]), default="json", show_default=True,
            help="format of --print-config"),
    _Option(["--version"], group=RUN, is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
            help="print the version and exit"),
    *(_config_option(f) for f in fields(RunConfig))])


@click.command(context_settings=CONTEXT)
@click.option("--grid", "-g", multiple=True, required=True, help=(
    "config field and its values: gamma=0.3,0.5,0.8, layers=2,3, seed=0:5 (a half-open range); repeat for a "
    "product. The fields: probe-train --print-config"))
@click.option("--preset", default="quick", show_default=True, help=PRESET_HELP, callback=known_preset)
@click.option("--out", "-o", required=True, help="folder for the runs and the manifest sweep.json")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, show_default=True,
              help="runs trained at once, one torch thread each (0: one per CPU core)")
@click.option("--scheduler", help="address of a running Dask scheduler (tcp://host:8786): one task per run, "
              "written to OUT, which the workers must reach")
@click.option("--scheduler-timeout", type=click.FloatRange(min=0, min_open=True), default=TIMEOUT_S,
              show_default=True, help=TIMEOUT_HELP)
@click.option("--tensorboard", metavar="DIR", help=(
    "TensorBoard event files of every run in DIR/RUN, written as each trains (probe-train --tensorboard); runs "
    "reused from an earlier sweep are filled in from their files (needs pip install 'gamma-probe[tensorboard]'); "
    "the runs then train one by one"))
@click.option("--ensemble/--no-ensemble", default=None, help=(
    "train the points that differ only in seed and gamma as seed ensembles: one batched model per process "
    "(one per shape on a GPU, one per core on a CPU), each run still its own file; --no-ensemble: one process "
    "per run. Default: ensembles where CUDA is, one process per run on a CPU (there ensembles were 1.16x "
    "slower: bench/RESULTS.md)"))
@click.option("--stop-at", type=click.IntRange(min=1), metavar="STEP", help=(
    "train each run's schedule only up to STEP (probe-train --stop-at); the same sweep without it trains on"))
def sweep(grid: tuple[str, ...], preset: str, out: str, jobs: int, scheduler: Optional[str], scheduler_timeout: float,
          tensorboard: Optional[str], ensemble: Optional[bool], stop_at: Optional[int]) -> None:
    """Train one run per point of a grid of config values (any field of probe-train's configuration):
    finished runs are reused, killed ones resumed, changed ones retrained; failed runs are recorded in
    OUT/sweep.json and the others go on. Summarise with probe sweep-summary OUT.

    \b
    Examples:
      probe-train sweep --preset tiny --grid gamma=0.3,0.8 --grid seed=0:3 -o demo
      probe-train sweep --preset composite-quick --grid seed=0:5 -o seeds -j 2
      probe-train sweep --preset quick --grid layers=1,2 -o depth --tensorboard tb
      probe sweep-summary demo --outcome "acc[rsn_test]>0.5"
    """
    from .sweep import parse_grid, sweep as run_sweep

    cells = parse_grid(grid, preset)
    with StderrBar("sweep") as bar:
        def tick(done, running, failed, total):   # done / running / failed of total
            bar.update(done, total, f"{running} running, {failed} failed")

        manifest = run_sweep(preset, cells, out, jobs=jobs, scheduler=scheduler, progress=tick if bar.shown else None,
                             log=bar.log, tensorboard=tensorboard, ensemble=ensemble, stop_at=stop_at,
                             scheduler_timeout=scheduler_timeout)
    status = [r["status"] for r in manifest["runs"]]
    at = f", {status.count('partial')} stopped at step {stop_at} or later (--stop-at)" if stop_at else ""
    print(terminal(f"{out}: {status.count('done')} of {len(status)} runs done{at}"
                   + (f", {status.count('failed')} failed (see {out}/sweep.json)" if "failed" in status else "")),
          file=sys.stderr)
    for r in manifest["runs"]:   # tab-separated fields, each escaped (an error quotes names from files)
        print("\t".join(terminal(str(r[k])) for k in ("label", "status", "path", "error") if k in r))
    if "failed" in status:
        raise click.exceptions.Exit(1)


@click.command(context_settings=CONTEXT)
@click.argument("spec")
def ensemble(spec: str) -> None:
    """Train runs that differ only in seed and gamma as one batched model (probe_train.ensemble), each into its
    own run file. SPEC is JSON: {"members": [{"preset": P, "overrides": {...}, "out": FILE, "resume": false},
    ...], "stop_at": STEP or null}. probe-train sweep writes it (--no-ensemble: one process per run instead);
    a member that diverges is reported as 'failed member FILE: WHY' and the others go on.
    """
    try:
        members = json.loads(spec)["members"]
        cfgs = [make_preset(m["preset"], **m["overrides"]) for m in members]
        outs, resume = [str(m["out"]) for m in members], [bool(m["resume"]) for m in members]
        stop_at = json.loads(spec).get("stop_at")
    except (ValueError, KeyError, TypeError) as exc:
        fail(f"bad ensemble SPEC ({type(exc).__name__}: {exc}); see probe-train ensemble --help")
    from .ensemble import Ensemble   # torch: only once there is something to train

    result = Ensemble(cfgs, outs, resume=resume, overwrite=True, show_progress=False, stop_at=stop_at).run()
    for r in result.results:
        print(terminal(f"wrote {r.path}: {r.snapshots} snapshots, {r.steps} steps"), file=sys.stderr)
    for path, why in result.failed.items():
        print(terminal(f"failed member {path}: {why}"), file=sys.stderr)
    if result.failed:
        raise click.exceptions.Exit(1)


PRESET_COLUMNS = ("preset", "task", "model", "layers", "d_model", "heads", "d_ff", "steps", "batch_size",
                  "purpose")
_TABLE_COLUMNS = ("preset", "task", "model", "layers", "d_model", "steps", "purpose")
TABLE_WIDTH = 80    # every table the command lines print fits an 80-column terminal (probe.render.WIDTH)


def preset_rows() -> list[dict]:
    """One row per preset: its purpose (config.PURPOSES), task, model size and steps. No torch: the
    parameter count is left out, since a text run's vocabulary (and so its embedding) is known only once
    its data is built."""
    rows = []
    for name in PRESETS:
        c = make_preset(name)
        rows.append({"preset": name, **{k: getattr(c, k) for k in PRESET_COLUMNS[1:-1]}, "purpose": PURPOSES[name]})
    return rows


@click.command(context_settings=CONTEXT)
@click.option("--format", "-f", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="table, json or csv; data on stdout, notes on stderr")
def presets(fmt: str) -> None:
    """Every preset of probe-train --preset: what it is for, its task, model and size, and its steps.
    Every value of one preset: probe-train --preset NAME --print-config.

    \b
    Examples:
      probe-train presets
      probe-train presets --format json
      probe-train --preset lm-quick --print-config
    """
    rows = preset_rows()
    if fmt == "json":
        print(json.dumps(rows, indent=2))
        return
    if fmt == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(PRESET_COLUMNS)
        w.writerows([["" if r[k] is None else r[k] for k in PRESET_COLUMNS] for r in rows])
        return
    for line in preset_table(rows):
        print(line)


def preset_table(rows: list[dict], width: int = TABLE_WIDTH) -> list[str]:
    """The lines of ``probe-train presets``: a row per preset, then its purpose on lines of its own,
    indented and wrapped, so that no line is over ``width`` characters (as a column, at 80 columns, the
    purposes wrapped into a strip of 14)."""
    import textwrap

    columns = _TABLE_COLUMNS[:-1]
    cells = [[str(r[k]) for k in columns] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(columns)]
    numeric = {"layers", "d_model", "steps"}
    lines = []
    for i, line in enumerate([list(columns), *cells]):
        lines.append("  ".join(c.rjust(w) if h in numeric else c.ljust(w)
                               for h, c, w in zip(columns, line, widths)).rstrip())
        if i:
            lines += textwrap.wrap(rows[i - 1]["purpose"], width, initial_indent="    ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    return lines


def main() -> None:
    # the console script (probe_train._entry) made the stop signals a flag before this module was imported
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    if first == "sweep":
        run_cli(sweep, args=sys.argv[2:], prog_name="probe-train sweep")
    elif first == "presets":
        run_cli(presets, args=sys.argv[2:], prog_name="probe-train presets")
    elif first == "ensemble":
        run_cli(ensemble, args=sys.argv[2:], prog_name="probe-train ensemble")
    elif first == "coord-check":
        from .coord_cli import coord_check

        run_cli(coord_check, args=sys.argv[2:], prog_name="probe-train coord-check")
    elif first and not first.startswith("-"):
        # training takes options only: a word here is a mistyped command, not a stray argument
        run_cli(lambda: fail(f"unknown command '{first}'{did_you_mean(first, COMMANDS)} (commands: "
                             f"{', '.join(COMMANDS)}; training takes "
                             "options only, e.g. probe-train --preset quick --out run.h5)"))
    else:
        run_cli(train_command)
