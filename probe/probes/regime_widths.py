"""The ``regime_widths`` probe (``probe regime --widths``): the log-log slope of the relative change from
the initial weights against the width, over runs that differ in width alone, and the regime it shows."""
from __future__ import annotations

import glob
import os

import numpy as np

from ..analyses.regime import TOLERANCE, WidthSlope, width_slopes
from ..api.checks import with_warnings
from ..errors import ProbeError
from ..format import is_snapshot_file
from ..format.steps import step_indices
from ..limits import MAX_MEMORY, budgeted
from ..params import check_number
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from .regime import chart, detail, regime

# what may differ between the runs of a width sweep: the width, what follows it, and the seed
WIDTH_FIELDS = ("d_model", "d_ff", "heads", "kv_heads", "seed", "data_seed")


def _named(path) -> str:
    """A width sweep as messages name it: its folder or pattern, or the count of the files listed."""
    return f"the {len(path)} runs listed" if isinstance(path, (list, tuple)) else os.fspath(path)


def _paths(path) -> list[str]:
    """A width sweep's runs: a folder's snapshot files, a glob pattern's, or a list of paths."""
    if isinstance(path, (list, tuple)):
        return [os.fspath(p) for p in path]
    path = os.fspath(path)
    if os.path.isdir(path):
        found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".h5"))
    else:
        found = sorted(glob.glob(path))
    runs = [p for p in found if os.path.isfile(p) and is_snapshot_file(p)]
    if not runs:
        raise ProbeError(f"{_named(path)}: no run files (a folder of them, or a pattern such as 'sweep/*.h5')")
    return runs


@budgeted
def regime_widths(path, *, step: str | int = "all", tolerance: float = TOLERANCE, allow_nonfinite: bool = False,
                  max_memory: int | str | None = MAX_MEMORY) -> list[WidthSlope]:
    """The log-log slope of RD against the width, per group and step, over runs that differ in width alone.

    Per seed, the least-squares slope of ln RD against ln d_model over its runs; then the mean over
    seeds with its 95 % bootstrap interval, and the regime by the phase diagram of Luo et al. (JMLR
    2021): the whole interval below −``tolerance`` linear, above +``tolerance`` condensed, within
    ±``tolerance`` critical, else not shown. The runs may differ in d_model, what follows it (d_ff,
    heads) and the seed, nothing else.

    Parameters
    ----------
    path : str, path-like or list of them
        A folder of run files (a sweep's), a glob pattern (``'sweep/*.h5'``) or a list of run files.
    {step}
    {tolerance}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[WidthSlope]
        One result per step every run has: ``widths``, ``seeds`` and ``slopes`` ({group: {"mean",
        "ci_lo", "ci_hi", "n", "per_seed", "regime"}}).

    Raises
    ------
    ProbeError
        No run files; one width only; runs that differ in something else than width and seed; a run
        without step 0; no step every run has.

    Examples
    --------
    >>> import probe
    >>> res = probe.regime_widths("sweeps/width")
    >>> [(r.step, r.slopes["attention QK"]["regime"]) for r in res]
    """
    check_number("tolerance", tolerance)
    runs = _paths(path)
    configs, widths, steps = {}, {}, None
    for p in runs:
        with open_source(p) as run:
            cfg = dict(run.provenance.get("config") or {})
            widths[p] = int(run.dims.get("d_model") or cfg.get("d_model") or 0)
            configs[p] = cfg
            have = {int(s) for s in run.steps}
        steps = have if steps is None else steps & have
    if len(set(widths.values())) < 2:
        raise ProbeError(f"{_named(path)}: {len(runs)} run(s), all of width {next(iter(widths.values()))}: a slope against "
                         "the width needs runs of two widths or more")
    first = runs[0]
    for p in runs[1:]:
        other = sorted(k for k in set(configs[p]) | set(configs[first])
                       if k not in WIDTH_FIELDS and configs[p].get(k) != configs[first].get(k))
        if other:
            k = other[0]
            raise ProbeError(f"{p}: differs from {first} in {k} ({configs[p].get(k)!r} against "
                             f"{configs[first].get(k)!r}"
                             + (f", and {len(other) - 1} more" if len(other) > 1 else "")
                             + "): a width sweep's runs may differ in width and seed alone")
    common = np.array(sorted(steps), dtype=np.int64)
    try:   # the step grammar of every probe, on the steps every run has
        wanted = [int(common[i]) for i in step_indices("all" if step is None else step, common, _named(path))]
    except ProbeError:
        wanted = []
    if not wanted:
        raise ProbeError(f"{_named(path)}: no step {step} in every run (the steps all runs have: "
                         f"{', '.join(map(str, sorted(steps)[:8]))}{', ...' if len(steps) > 8 else ''})")
    # per seed, per group, per width: RD at each wanted step
    rd: dict[int, dict] = {}
    for p in runs:
        seed = configs[p].get("seed", 0)
        by_step = {r.step: r for r in regime(p, step=",".join(map(str, wanted)), allow_nonfinite=allow_nonfinite,
                                                  max_memory=max_memory)}
        for s in wanted:
            for g, v in by_step[s].groups.items():
                rd.setdefault(s, {}).setdefault(seed, {}).setdefault(g, {})[widths[p]] = v
    return with_warnings([width_slopes(list(widths.values()), rd[s], step=s, tolerance=tolerance) for s in wanted])



PROBE = Probe("regime_widths", WEIGHTS, "Width scaling of the relative change", function=regime_widths,
               command="regime --widths", style="detail", result="regime.WidthSlope", batch=False, report=False,
               sweeps=False, nonfinite="a matrix holding one is left out of its run's groups",
               metrics=("slope_mean", "slope_ci_lo", "slope_ci_hi"),
               options={"path": "a folder of run files that differ in width (and seed) alone, or a quoted glob "
                                "pattern ('sweep/*.h5')"},
               example="probe regime --widths sweeps/width",
               help="The log-log slope of RD against the width per group and step, over runs that differ in width "
                    "and seed alone, with its 95 % interval over seeds and the regime (linear, critical, condensed "
                    "or not shown).",
               detail=detail, chart=chart)
