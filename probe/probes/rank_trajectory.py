"""The ``rank_trajectory`` probe (``probe rank --minima``): where each matrix's effective rank bottoms out over
training."""
from __future__ import annotations

import os

from ..limits import MAX_MEMORY, budgeted
from ..analyses.rank import RankTrajectoryResult
from ..analyses.rank import rank_trajectory as _rank_trajectory
from ..api.checks import with_warnings
from ..chart.panel import barh, Panel
from ..errors import ProbeError, param
from ..registry import WEIGHTS, Probe
from .rank import rank
from ..render import table


@budgeted
def rank_trajectory(path: str | os.PathLike, *, step: str | int = "all", metric: str = "effective_rank",
                    groups: str | None = None, mapping: str | None = None, skip_damaged: bool = False,
                    allow_nonfinite: bool = False,
                    max_memory: int | str | None = MAX_MEMORY
                    ) -> list[RankTrajectoryResult]:
    """Where each matrix's rank bottoms out over the selected steps ("condense, then expand" as numbers).

    Runs [`rank`][probe.probes.rank.rank] at every selected step and, per matrix, finds the minimum of
    ``metric``: its value and step, the dip below the first step (minimum / initial) and the rebound to the last
    (final / minimum). A matrix left out at some step (non-finite values) is left out of the trajectory.

    Parameters
    ----------
    {path}
    {step}
    metric : {"effective_rank", "stable_rank", "top1_energy", "top5_energy"}, default "effective_rank"
        The number of [`rank`][probe.probes.rank.rank] followed over the steps.
    {groups}
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[RankTrajectoryResult]
        One result for the whole trajectory (its ``step`` is ``None``).

    Raises
    ------
    ProbeError
        An unknown ``metric`` or step, or anything [`rank`][probe.probes.rank.rank] raises.

    Examples
    --------
    >>> import probe
    >>> traj = probe.rank_trajectory("run.h5")[0]
    >>> traj.min_step["embedding"], traj.dip("embedding"), traj.condense_then_expand("embedding")
    """
    results = rank(path, step=step, groups=groups, mapping=mapping, skip_damaged=skip_damaged,
                   allow_nonfinite=allow_nonfinite)
    known = list(next(iter(results[0].numbers.values())))
    if metric not in known:
        raise ProbeError(f"{param('metric', metric)}: rank reports {', '.join(known)}")
    return with_warnings([_rank_trajectory(results, metric)])


def detail(r, width) -> None:
    print(f"{r.metric} over steps {r.steps[0]}..{r.steps[-1]} ({len(r.steps)} snapshots)")
    print(f"condense then expand: the minimum strictly inside, dip <= {1 - r.margin:g}, rebound >= {1 + r.margin:g}")
    table(["matrix", "initial", "minimum", "min_step", "final", "dip", "rebound", "condense_then_expand"],
          [[n, r.initial[n], r.minimum[n], r.min_step[n], r.final[n], r.dip(n), r.rebound(n),
            r.condense_then_expand(n)] for n in r.names], width=width)


def chart(r) -> list[Panel]:
    return [barh(f"{r.metric}: dip and rebound", f"{r.metric} relative to the first step", "matrix", r.names,
                  {"dip: minimum / initial": [r.dip(n) for n in r.names],
                   "rebound: final / minimum − 1": [r.rebound(n) - 1 for n in r.names]}, vline=(1.0, "no change"))]


PROBE = Probe("rank_trajectory", WEIGHTS, "Rank minima over training", function=rank_trajectory,
              command="rank --minima", style="detail", whole_run="all", api_only=("metric",), batch=False,
              sweeps=False, result="rank.RankTrajectoryResult",
              metrics=("min_step", "minimum", "dip", "rebound", "condense_then_expand"),
              example="probe rank run.h5 --minima",
              nonfinite="the embedding rows holding one are left out (the rest centred), and so is a weight matrix "
                        "holding one",
              help="Where each matrix's effective rank bottoms out over training: its minimum, the step of it, "
                   "the dip and the rebound.",
              detail=detail, chart=chart)
