"""``probe-train``: train a run and write its snapshot file.

Every :class:`~train.config.RunConfig` field is a flag; a flag left out keeps
the preset's value.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import fields
from typing import Optional

import typer

from probe.errors import fail, param, run_cli

from .config import PRESETS, RunConfig

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help="Train an anchor-function run and write periodic HDF5 snapshots.")


def _train(preset: str, out: str, resume: bool, overwrite: bool, quiet: bool, **overrides) -> None:
    from .config import preset as make_preset
    from .trainer import Trainer

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
    result = Trainer(cfg, out, resume=resume, overwrite=overwrite, progress=not quiet).run()
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


def main() -> None:
    from probe.errors import SIGINT

    with SIGINT.caught():   # from the first moment: Ctrl-C during torch's import is read at a safe point
        run_cli(app)
