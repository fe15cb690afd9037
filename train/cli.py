"""``probe-train``: train a run and write its snapshot file.

Every :class:`~probe_train.config.RunConfig` field is a flag; a flag left out keeps
the preset's value.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import fields
from typing import Optional

import typer

from probe.errors import STOP, fail, param, run_cli

from .config import PRESETS, RunConfig

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help="Train an anchor-function run and write periodic HDF5 snapshots.")


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
        import os
        import signal
        import subprocess
        import tempfile

        from probe._proc import child_env, entry_command, idle_priority, start

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
        import signal
        import subprocess

        from probe._proc import normal_priority

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
        import os

        # stopped by a signal (ours, or the terminal's Ctrl-C / hangup, which reach it too), it wrote its
        # last page and says so with the signal's exit code
        stopped = code in {128 + int(s) for s in STOP.signals()} and os.path.exists(self.page)
        if code != 0 and not stopped:
            self.log.seek(0)
            msg = self.log.read().decode(errors="replace").strip().splitlines()
            print(f"warning: the report process stopped ({msg[-1] if msg else f'exit {code}'})", file=sys.stderr)
        else:
            print(f"wrote {self.page}", file=sys.stderr)


def _train(preset: str, out: str, resume: bool, overwrite: bool, quiet: bool, report: Optional[str] = None,
           **overrides) -> None:
    from .config import preset as make_preset
    from .trainer import Trainer

    if report is not None:
        import os

        if not report.endswith((".html", ".htm")):
            fail(f"{param('report', report)}: use a .html name")
        folder = os.path.dirname(os.path.abspath(report))
        if not os.path.isdir(folder) or os.path.isdir(report):
            fail(f"{param('report', report)}: cannot write there (no folder {folder}, or it is a folder)")

    given = {k: v for k, v in overrides.items() if v is not None}
    if resume:
        # continue with the configuration stored in the file, plus explicit overrides of steps etc.
        from probe.format import Run

        with Run(out) as run:
            stored = {k: v for k, v in run.config.items() if k in {f.name for f in fields(RunConfig)}}
        changed = {k for k, v in given.items() if stored.get(k) != v and k not in ("steps", "device", "threads")}
        if changed:
            fail(f"{param('resume')} keeps the run's configuration; cannot change {', '.join(sorted(changed))}")
        cfg = RunConfig(**{**stored, **given})
    else:
        cfg = make_preset(preset, **given)
    live = _LiveReport(out, report) if report else None
    completed = False
    try:
        result = Trainer(cfg, out, resume=resume, overwrite=overwrite, progress=not quiet, on_snapshot=live).run()
        completed = True
    finally:
        if live is not None:
            live.finish(completed)
    print(f"wrote {result.path}: {result.snapshots} snapshots, {result.steps} steps in {result.seconds:.1f} s",
          file=sys.stderr)
    for split, m in result.metrics.items():
        print(f"{split}\tloss {m['loss']:.4f}\tacc {m['acc']:.4f}")


def _build_command():
    params = [
        inspect.Parameter("preset", inspect.Parameter.KEYWORD_ONLY, annotation=str,
                          default=typer.Option("quick", help=f"starting configuration: {', '.join(PRESETS)}")),
        inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation=str,
                          default=typer.Option(..., "--out", "-o", help="snapshot file to write (.h5)")),
        inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, help="continue OUT from its last snapshot")),
        inspect.Parameter("overwrite", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, help="replace OUT if it exists")),
        inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--quiet", "-q", help="no progress bar")),
        inspect.Parameter("report", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                          default=typer.Option(None, help="keep this HTML run report up to date while "
                                                          "training (probe report --watch)")),
    ]
    for f in fields(RunConfig):
        flag = "--" + f.name.replace("_", "-")
        decls = [f"{flag}/--no-{f.name.replace('_', '-')}"] if f.type in (bool, "bool") else [flag]
        typ = {"int": int, "float": float, "str": str, "bool": bool}.get(f.type, f.type) if isinstance(f.type, str) else f.type
        params.append(inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[typ],
            default=typer.Option(None, *decls, help=f.metadata.get("help", ""), show_default=False,
                                 rich_help_panel="Configuration (default: the preset's value)")))

    def command(**kwargs):
        _train(**kwargs)

    command.__signature__ = inspect.Signature(params)
    command.__doc__ = ("Train a run; e.g. probe-train --preset quick --gamma 0.8 --out run.h5. "
                       "Snapshots are appended under SWMR, so probes can read OUT while it is written.")
    return command


app.command()(_build_command())


sweep_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@sweep_app.command()
def sweep(
    grid: list[str] = typer.Option(..., "--grid", "-g", help="config field and its values: gamma=0.3,0.5,0.8, "
                                   "layers=2,3, seed=0:5 (a half-open range); repeat for a product", show_default=False),
    preset: str = typer.Option("quick", help=f"starting configuration: {', '.join(PRESETS)}"),
    out: str = typer.Option(..., "--out", "-o", help="folder for the runs and the manifest sweep.json",
                            show_default=False),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="runs trained at once, one torch thread each "
                             "(0: one per CPU core)"),
    scheduler: Optional[str] = typer.Option(None, help="address of a running Dask scheduler (tcp://host:8786): "
                                            "one task per run, written to OUT, which the workers must reach"),
) -> None:
    """Train one run per point of a grid (any config field; e.g. probe-train sweep --preset composite-quick
    --grid gamma=0.3,0.5,0.8 --grid seed=0:5 --out sweeps/g): finished runs are reused, killed ones
    resumed, changed ones retrained; failed runs are recorded in OUT/sweep.json and the others go on.
    Summarise with probe sweep-summary OUT."""
    from .runs import parse_grid, sweep as run_sweep

    cells = parse_grid(grid, preset)
    with _sweep_progress() as (tick, log):
        manifest = run_sweep(preset, cells, out, jobs=jobs, scheduler=scheduler, progress=tick, log=log)
    status = [r["status"] for r in manifest["runs"]]
    print(f"{out}: {status.count('done')} of {len(status)} runs done"
          + (f", {status.count('failed')} failed (see {out}/sweep.json)" if "failed" in status else ""),
          file=sys.stderr)
    for r in manifest["runs"]:
        print(f"{r['label']}\t{r['status']}\t{r['path']}" + (f"\t{r['error']}" if "error" in r else ""))
    if "failed" in status:
        raise typer.Exit(1)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _sweep_progress:
    """A progress line (done / running / failed of total) on stderr when it is a terminal."""

    def __enter__(self):
        if not sys.stderr.isatty():
            return None, _log
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("{task.description}"), TimeElapsedColumn(), console=Console(stderr=True))
        self._p.__enter__()
        self._task = self._p.add_task("", total=None)

        def tick(done, running, failed, total):
            self._p.update(self._task, completed=done, total=total,
                           description=f"{running} running, {failed} failed")

        return tick, lambda msg: self._p.console.print(msg, markup=False, highlight=False)

    def __exit__(self, *exc):
        if hasattr(self, "_p"):
            self._p.__exit__(*exc)


def main() -> None:
    with STOP.caught():   # from the first moment: a stop signal during torch's import is read at a safe point
        if sys.argv[1:2] == ["sweep"]:
            run_cli(sweep_app, args=sys.argv[2:], prog_name="probe-train sweep")
        else:
            run_cli(app)
