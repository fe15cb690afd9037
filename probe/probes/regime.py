"""The ``regime`` probe: how far each weight matrix moved from its initial value (its scaling with the
width over a sweep of widths: :mod:`.regime_widths`, ``probe regime --widths``)."""
from __future__ import annotations

import os


from ..analyses.regime import RegimeResult, WidthSlope
from ..analyses.regime import regime as _regime
from ..api.checks import with_warnings
from ..api.finite import Finite
from ..chart.panel import Panel, barh
from ..errors import ProbeError
from ..format.tensors import as_matrix, natural, read_at
from ..limits import FLOAT64, MAX_MEMORY, budgeted
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from ..render import table

def matrices(run) -> list[str]:
    """The canonical weight matrices (2-D, or per head), in natural order."""
    return sorted((n for n, s in run.weights().items() if len(s) >= 2), key=natural)


def matrices_at(run, names: list[str], index: int) -> dict:
    """The full maps (x @ W; per-head tensors joined) of ``names`` at one snapshot index, in float64's budget."""
    return {n: as_matrix(n, read_at(run.tensor(n), [index], work=FLOAT64)[0]) for n in names}


def initial_index(run) -> int:
    """The snapshot index of the initial weights (step 0), or one line saying there is none."""
    steps = run.steps
    if len(steps) and run.step_of(0) is None:   # one checkpoint, no step: nothing to compare it with
        raise ProbeError(f"{run.path}: one checkpoint of no stated step: regime compares each step with the "
                         "initial weights (a folder of checkpoints with its checkpoint-0, or a run file)")
    if not len(steps) or int(steps[0]) != 0:
        first = "no snapshots" if not len(steps) else f"its first snapshot is step {int(steps[0])}"
        raise ProbeError(f"{run.path}: regime compares each step with the initial weights, and {first}, not step "
                         "0 (record from before the first update: probe-train does; a Recorder's first "
                         "rec.step(0) before training; a checkpoint folder's checkpoint-0)")
    return 0


@budgeted
def regime(path: str | os.PathLike, *, step: str | int = "latest", groups: str | None = None,
           mapping: str | None = None, skip_damaged: bool = False, allow_nonfinite: bool = False,
           max_memory: int | str | None = MAX_MEMORY) -> list[RegimeResult]:
    """Relative change of every weight matrix from its initial value, RD = ||W_t − W_0|| / ||W_0||, per step.

    Per matrix and per group (embeddings, attention QK, attention VO, MLP in, MLP out, head); the
    source's first snapshot must be step 0, its initial weights. Its scaling with the width, over
    runs that differ in width alone, is :func:`regime_widths` (``probe regime --widths``).

    Parameters
    ----------
    {path}
    {step}
    {groups}
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[RegimeResult]
        One result per selected step: ``names``, ``rd`` ({matrix: RD}) and ``groups`` ({group: RD}).

    Raises
    ------
    ProbeError
        No step 0; an unknown step; NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.regime("run.h5", step="all")
    >>> [(r.step, r.groups["attention QK"]) for r in res]
    """
    out = []
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        first = initial_index(run)
        indices = run.step_indices(step)
        names = matrices(run)
        check = Finite(run.path, allow_nonfinite)
        initial = matrices_at(run, names, first)
        for i in indices:   # a step at a time: two copies of the weights held, not one per step
            at = run.step_of(i)
            now = matrices_at(run, names, i)
            kept = [n for n in names if check(run.label(n), now[n], at, "left out") is None
                    and check(run.label(n), initial[n], run.step_of(first), "left out") is None]
            out.append(_regime({n: initial[n] for n in kept}, {n: now[n] for n in kept}, step=int(run.steps[i])))
    check.warn()
    return with_warnings(out)


def detail(r, width) -> None:
    if r.step is not None:
        print(f"step {r.step}")
    if isinstance(r, WidthSlope):
        print(f"widths {', '.join(map(str, r.widths))}; {len(r.seeds)} seed(s)")
        table(["group", "slope", "ci_lo", "ci_hi", "seeds", "regime"],
              [[g, s["mean"], s["ci_lo"], s["ci_hi"], s["n"], s["regime"]] for g, s in r.slopes.items()], width=width)
        return
    table(["group", "RD"], [[g, v] for g, v in r.groups.items()], width=width)
    table(["matrix", "RD"], [[n, r.rd[n]] for n in r.names], width=width)


def chart(r) -> list[Panel]:
    if isinstance(r, WidthSlope):
        names = list(r.slopes)
        return [barh(f"step {r.step}: slope of ln RD on ln width", "slope (mean over seeds)", "group", names,
                     {"slope": [r.slopes[g]["mean"] for g in names]})]
    return [barh(f"step {r.step}", "RD = ||W_t - W_0|| / ||W_0||", "matrix", r.names,
                 {"RD": [r.rd[n] for n in r.names]})]


PROBE = Probe("regime", WEIGHTS, "Relative change from the initial weights", function=regime, style="detail",
              result="regime.RegimeResult", metrics=("rd_group", "rd"),
              example="probe regime run.h5", examples=("probe regime run.h5 --step latest --format csv",),
              nonfinite="a matrix holding one (at the step or at step 0) is left out",
              help="Relative change of every weight matrix from its initial value, RD = ||W_t - W_0|| / ||W_0||, "
                   "per matrix and group (embeddings, attention QK and VO, MLP in and out, head), at every step; "
                   "with --widths, its log-log slope against the width over a sweep and the regime it shows.",
              detail=detail, chart=chart, cheap=True)

