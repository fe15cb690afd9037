"""Runtime of the figure scripts in ``examples/``: the runs each declares, training them once, drawing.

A figure script defines ``NAME``, ``TITLE``, ``runs(ctx)`` (the runs it draws, declared through the
experiments of :class:`FigureContext`; declaring trains nothing), ``make(ctx, runs) -> list[Path]``
(draws, given the same structure with run files in place of the declarations) and, optionally,
``effect(ctx, runs) -> list[Claim]`` (the effect the figure states, checked in each seed it draws) and
``CAVEAT`` (what the CPU sizes do not show; :meth:`FigureContext.title` adds it at those sizes). It
ends with ``if __name__ == "__main__": run_script(make)``.

``probe figures`` collects the declarations of every figure asked for, trains the missing runs in one
batch, longest first (:mod:`probe_train.runs`: a finished run is reused, an unfinished one resumed, a
changed configuration trained anew), then draws. Rooms: :mod:`.context` (the experiments at each
size, declarations, claims, the context), :mod:`.scripts` (finding, drawing, checking; and the
plan: dry run, estimated time, seeds for a budget). The look of every figure lives in
:mod:`probe.chart`; the time a run takes in :mod:`probe_train.speeds`.

Sizes: ``tiny`` (tests, seconds), ``quick`` (a CPU: every figure in minutes on 2 cores),
``full`` (the papers' sizes, for a GPU).
"""
from .context import (DEFAULT_SEEDS, EXPERIMENTS, SIZES, Claim, FigureContext, RunSpec, claim, cuda_available,
                      resolved, specs)
from .scripts import (FigureScript, Plan, PlannedRun, check_figures, check_known, declarations, examples_dir, load_scripts,
                      make_figures, plan_figures, reference, run_script, seeds_for_budget)

__all__ = ["DEFAULT_SEEDS", "EXPERIMENTS", "SIZES", "Claim", "FigureContext", "RunSpec", "claim", "cuda_available",
           "resolved", "specs", "Plan", "PlannedRun", "plan_figures", "reference", "seeds_for_budget", "FigureScript",
           "check_figures", "check_known", "declarations", "examples_dir", "load_scripts", "make_figures", "run_script"]
