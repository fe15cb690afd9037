"""Runtime of the figure scripts in ``examples/``: the runs each needs, and finding the scripts.

A figure script defines ``NAME``, ``TITLE`` and ``make(ctx) -> list[Path]`` and ends with
``if __name__ == "__main__": run_script(make)``. ``probe figures`` imports the scripts and
calls ``make`` with one shared :class:`FigureContext`, so runs asked for by several figures
are trained once (:mod:`probe_train.runs`: a finished run is reused, an unfinished one resumed, a
changed configuration trained anew). The look of every figure lives in :mod:`probe.plotting`.

Sizes: ``tiny`` (tests, seconds), ``quick`` (a CPU, minutes), ``full`` (the papers' sizes,
for a GPU). Scripts pick presets with :meth:`FigureContext.preset`.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ._files import regular_file
from .errors import STOP, Interrupted, ProbeError, param

SIZES = ("tiny", "quick", "full")


class _Planned(Exception):
    """Raised by FigureContext.runs() during make_figures' planning pass."""


@dataclass
class FigureContext:
    """What a figure script gets: where to write, how big, and a way to get trained runs."""

    out: Path
    size: str = "quick"
    runs_dir: Path | None = None
    jobs: int = 0
    seeds: int = 0   # seeds per γ in figures that compare γ (0: the size's default: tiny 1, quick 3, full 1)
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))
    create: bool = True   # make the output and runs folders (False: a dry run, which writes nothing)

    def __post_init__(self):
        self._plan: list | None = None
        self._asked: tuple | None = None   # planning: (wanted, paths, jobs) of the last runs() call
        self._failed: dict[Path, str] = {}   # run file -> the error its training ended with (not retried)
        if self.size not in SIZES:
            raise ProbeError(f"unknown size '{self.size}' (known: {', '.join(SIZES)})")
        if self.seeds < 0:
            raise ProbeError(f"{param('seeds', self.seeds)}: need 1 or more (0: the size's default)")
        self.seeds = self.seeds or {"tiny": 1, "quick": 3, "full": 1}[self.size]
        self.out = Path(self.out)
        self.runs_dir = Path(self.runs_dir) if self.runs_dir else self.out / "runs"
        if not self.create:
            return
        from ._files import writable_folder

        for d in (self.out, self.runs_dir):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ProbeError(f"cannot create {d}: {exc.strerror}") from None
        # before any training: a read-only output folder fails now, in one line (the runs folder may be
        # a read-only share of finished runs; a trainer that must write there says so itself)
        writable_folder(self.out, "figures")

    @property
    def quick(self) -> bool:
        return self.size != "full"

    def preset(self, quick: str, full: str, tiny: str = "tiny") -> str:
        return {"tiny": tiny, "quick": quick, "full": full}[self.size]

    def _gpu(self) -> bool:
        from probe_train.runs import cuda_available

        return self.size == "full" and cuda_available()

    def runs(self, wanted: Mapping[str, tuple[str, dict]]) -> dict[str, Path]:
        """Paths of finished runs for ``{label: (preset, overrides)}``; trains what is missing,
        ``jobs`` at a time (one CPU thread each on a CPU)."""
        from probe_train.runs import plan

        paths, todo = plan(wanted, self.runs_dir, threads=None if self._gpu() else 1)
        if self._plan is not None:   # planning pass of make_figures: note the runs, stop the script
            self._plan.extend(todo)
            self._asked = (wanted, paths, todo)
            raise _Planned
        todo = [job for job in todo if job.path not in self._failed]
        if todo:
            self._train(todo)
        for label, path in paths.items():   # a run that failed fails every figure that needs it
            if path in self._failed:
                raise ProbeError(f"training run '{label}' failed: {self._failed[path]}")
        return paths

    # The papers' experiments, named once so figures that share runs find the same files. With
    # ``seeds=True`` each returns, per key, the runs of seeds 0 .. ctx.seeds - 1 (seed 0 is the
    # run the figures without seeds use).
    def _seeded(self, base: dict, seeds: bool) -> dict:
        """{key: (label, preset, overrides)} -> {key: path} or {key: [path per seed]}."""
        n = self.seeds if seeds else 1
        wanted = {}
        for key, (label, name, overrides) in base.items():
            for s in range(n):
                wanted[label + (f"-s{s}" if s else "")] = (name, {**overrides, **({"seed": s} if s else {})})
        got = self.runs(wanted)
        if not seeds:
            return {key: got[label] for key, (label, _, _) in base.items()}
        return {key: [got[label + (f"-s{s}" if s else "")] for s in range(n)] for key, (label, _, _) in base.items()}

    def anchor(self, gammas=(0.3, 0.5, 0.8), seeds: bool = False) -> dict:
        """Paper 1's anchor task on the transformer, one run per γ (and seed)."""
        p = self.preset("quick", "paper1")
        return self._seeded({g: (f"anchor-g{g}", p, {"gamma": g}) for g in gammas}, seeds)

    def emb_mlp(self, gammas=(0.3, 0.5, 0.8), seeds: bool = False) -> dict:
        """Paper 1 Fig. 3B: the Emb-MLP on the anchor task."""
        p = self.preset("emb-mlp-quick", "emb-mlp-quick")
        extra = {} if self.quick else {"d_model": 400, "d_ff": 1200, "steps": 20000, "n_samples": 200_000,
                                       "key_max": 120}
        if self.size == "tiny":
            extra = {"model": "emb-mlp", "bias": False}
        return self._seeded({g: (f"embmlp-g{g}", p, {"gamma": g, **extra}) for g in gammas}, seeds)

    def composite(self, gammas=(0.3, 0.5, 0.8), layers=(2,), seeds: bool = False) -> dict:
        """Paper 2's composite task, one run per (γ, depth) (and seed)."""
        p = self.preset("composite-quick", "composite-paper")
        extra = {"task": "composite", "key_min": 20, "key_max": 99} if self.size == "tiny" else {}
        return self._seeded({(g, n): (f"composite-g{g}-L{n}", p, {"gamma": g, "layers": n, **extra})
                             for g in gammas for n in layers}, seeds)

    def lm(self, gammas=(0.3, 0.5, 0.8), seeds: bool = False) -> dict:
        """Paper 1's real-language experiment: logic text mixed with stories."""
        p = self.preset("lm-quick", "lm-gpt2", tiny="lm-tiny")
        return self._seeded({g: (f"lm-g{g}", p, {"gamma": g}) for g in gammas}, seeds)

    def llm(self, gammas=(0.5, 1.0), eps=(1e-5,), gated=(False,), seeds: bool = False) -> dict:
        """Paper 4: LLaMA-style pretraining on logic + stories, one run per (γ, ε, gated attention)."""
        p = self.preset("llm-quick", "llm-gpu", tiny="llm-tiny")
        return self._seeded({(g, e, a): (f"llm-g{g}-eps{e:g}" + ("-gated" if a else ""), p,
                                         {"gamma": g, "norm_eps": e, "gated_attention": a})
                             for g in gammas for e in eps for a in gated}, seeds)

    def _train(self, todo) -> None:
        """Train the jobs; a failed run is logged and remembered (the figures that need it fail, the
        others go on)."""
        from probe_train.runs import train_jobs

        failed = train_jobs(todo, 1 if self._gpu() else self.jobs, self.log, keep_going=True)
        self._failed.update({job.path: failed[job.label] for job in todo if job.label in failed})

    def save(self, fig, name: str) -> list[Path]:
        """Write ``name``.png and ``name``.pdf into the output folder and close the figure."""
        from ._files import write_atomic

        paths = [self.out / f"{name}.png", self.out / f"{name}.pdf"]
        try:
            for p in paths:   # atomically: a full disk leaves the old figure, never half a new one
                write_atomic(p, lambda fh, fmt=p.suffix[1:]: fig.savefig(fh, format=fmt), "figure")
        finally:
            import matplotlib.pyplot as plt

            plt.close(fig)
        self.log(f"  wrote {paths[0]} (+ .pdf)")
        return paths


def cuda_available() -> bool:
    from probe_train.runs import cuda_available as available

    return available()


# --- finding and running the scripts -------------------------------------------------------

def examples_dir(explicit: str | None = None) -> Path:
    """The folder holding the figure scripts: ``explicit``, else ``examples/`` of this checkout."""
    d = Path(explicit) if explicit else Path(__file__).resolve().parents[1] / "examples"
    if not d.is_dir() or not any(d.glob("fig_*.py")):
        raise ProbeError(f"no figure scripts (fig_*.py) in {d}; run from a clone of the repository "
                         "or pass --examples DIR")
    return d


@dataclass
class FigureScript:
    name: str
    title: str
    path: Path
    make: Callable[[FigureContext], list[Path]]


def load_scripts(folder: Path) -> dict[str, FigureScript]:
    out = {}
    for path in sorted(folder.glob("fig_*.py")):
        regular_file(path, "figure script")     # the import reads it: a FIFO would block
        spec = importlib.util.spec_from_file_location(f"_figure_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        name = getattr(mod, "NAME", path.stem[4:].replace("_", "-"))
        out[name] = FigureScript(name, getattr(mod, "TITLE", name), path, mod.make)
    return out


def make_figures(names: list[str], ctx: FigureContext, folder: Path) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """({figure: files written}, {figure: error} of the figures that failed). A figure fails alone (its
    script raised, or a run it needs failed to train) and the others are still made. A stop signal
    stops the trainers at a snapshot and raises Interrupted: the runs are kept and resumed next time."""
    scripts = load_scripts(folder)
    unknown = [n for n in names if n not in scripts]
    if unknown:
        raise ProbeError(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(scripts)}")
    out: dict[str, list[Path]] = {}
    failed: dict[str, str] = {}

    def attempt(n: str) -> None:
        try:
            out[n] = scripts[n].make(ctx)
        except (_Planned, Interrupted):
            raise
        except ProbeError as exc:
            failed[n] = exc.cli_message()
        except Exception as exc:   # a bug in one script must not cost the other figures
            import os

            if os.environ.get("PROBE_DEBUG"):
                raise
            failed[n] = f"unexpected {type(exc).__name__}: {exc}"
        if n in failed:
            ctx.log(f"figure {n} failed: {failed[n]}")

    with STOP.caught():
        if len(names) > 1:
            # Planning pass: each script stops at its first ctx.runs() call, which notes what is
            # missing; all of it is then trained together, so every job slot stays busy.
            ctx._plan = []
            try:
                for n in names:
                    try:
                        attempt(n)   # a script that trains nothing is simply done (or failed)
                        if n in out:
                            ctx.log(f"figure {n}: {scripts[n].title}")
                    except _Planned:
                        pass
                todo = list({tuple(job.command): job for job in ctx._plan}.values())
            finally:
                ctx._plan = None
            if todo and not STOP.asked:
                ctx._train(todo)
        for n in names:
            if STOP.asked:
                raise Interrupted(f"Interrupted: {len(out)} of {len(names)} figure(s) written; the runs are kept")
            if n in out or n in failed:
                continue
            t0 = time.perf_counter()
            ctx.log(f"figure {n}: {scripts[n].title}")
            attempt(n)
            if n in out:
                ctx.log(f"figure {n} done in {time.perf_counter() - t0:.0f} s")
    return {n: out[n] for n in names if n in out}, {n: failed[n] for n in names if n in failed}


def plan_figures(names: list[str], ctx: FigureContext, folder: Path) -> list[tuple[str, str, str, Path, str]]:
    """What ``probe figures NAMES`` would do, with nothing trained or drawn: per figure, each run it
    draws as (figure, run label, preset, file, "reuse" | "resume" | "train"); a run that several
    figures draw is listed under each. A script that cannot be planned is one row with its error."""
    scripts = load_scripts(folder)
    unknown = [n for n in names if n not in scripts]
    if unknown:
        raise ProbeError(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(scripts)}")
    rows = []
    for n in names:
        ctx._plan, ctx._asked = [], None
        try:
            scripts[n].make(ctx)
        except _Planned:
            pass
        except ProbeError as exc:
            rows.append((n, "-", "-", None, f"cannot plan: {exc.cli_message()}"))
            continue
        finally:
            ctx._plan = None
        if ctx._asked is None:
            continue   # a figure that trains nothing
        wanted, paths, todo = ctx._asked
        how = {job.label: ("resume" if "--resume" in job.args else "train") for job in todo}
        rows += [(n, label, wanted[label][0], paths[label], how.get(label, "reuse")) for label in wanted]
    return rows


def run_script(make: Callable[[FigureContext], list[Path]]) -> None:
    """Command line of a single figure script: ``python examples/fig_x.py [--size quick] [-o DIR]``."""
    from .errors import run_cli

    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", default="figures")
    ap.add_argument("--size", choices=SIZES, default="quick",
                    help="tiny (tests), quick (a CPU, minutes) or full (paper sizes, for a GPU)")
    ap.add_argument("--runs", default=None, help="folder of trained runs (default OUT/runs)")
    ap.add_argument("--jobs", type=int, default=0, help="runs trained at once (0: one per CPU core)")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per γ (0: tiny 1, quick 3, full 1)")
    a = ap.parse_args()

    def main():
        ctx = FigureContext(Path(a.out), a.size, a.runs, a.jobs, a.seeds)   # bad input: exit 2
        try:
            make(ctx)
        except ProbeError as exc:   # the figure failed (a run it needs did not train): exit 1
            print(f"Error: {exc.cli_message()}", file=sys.stderr)
            raise SystemExit(1) from None

    run_cli(main)
