"""The ``gamma`` probe: the effective gamma of every weight matrix, -ln std / ln fan_in."""
from __future__ import annotations

import os

from ..analyses.regime import GammaResult, effective_gamma
from ..api.checks import with_warnings
from ..api.finite import Finite
from ..chart.panel import Panel, barh
from ..limits import MAX_MEMORY, budgeted
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from ..render import table
from .regime import matrices, matrices_at


@budgeted
def gamma(path: str | os.PathLike, *, step: str | int = "latest", groups: str | None = None, mapping: str | None = None,
          skip_damaged: bool = False, allow_nonfinite: bool = False,
          max_memory: int | str | None = MAX_MEMORY) -> list[GammaResult]:
    """The effective gamma of every weight matrix: its std, fan-in and γ_eff = −ln std / ln fan_in, per step.

    A matrix drawn with std = fan_in^−γ (the toolkit's γ-init) gives back its γ at step 0; a library's
    fixed std is a γ that moves with the width (0.02 is γ 0.59 at d 768 and 0.51 at d 2048). The
    fan-in of a matrix is its number of inputs (rows, in the x @ W layout; per-head tensors joined into
    the full map), an embedding table's its width, as γ-init draws them. Per group (embeddings,
    attention QK and VO, MLP in and out, head): the pooled std and the entry-weighted mean γ. Step 0 of
    a run is its initial weights (``step=0``, ``--step 0``).

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
    Results[GammaResult]
        One result per selected step: ``names``, ``numbers`` ({matrix: {"std", "fan_in", "gamma"}})
        and ``groups`` ({group: {"std", "fan_in", "gamma"}}).

    Raises
    ------
    ProbeError
        An unknown step; NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> probe.gamma("run.h5", step=0)[0].groups["attention QK"]["gamma"]   # the initial weights
    >>> probe.gamma("hf:openai-community/gpt2")[0].numbers["token_embedding"]
    """
    out = []
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        indices = run.step_indices(step)
        names = matrices(run)
        check = Finite(run.path, allow_nonfinite)
        for i in indices:
            at = run.step_of(i)
            now = matrices_at(run, names, i)
            now = {n: W for n, W in now.items() if check(run.label(n), W, at, "left out") is None}
            out.append(effective_gamma(now, step=int(run.steps[i]) if at is not None else None))
    check.warn()
    return with_warnings(out)


def detail(r, width) -> None:
    if r.step is not None:   # (a checkpoint of no stated step)
        print(f"step {r.step}")
    table(["group", "std", "fan_in", "gamma"], [[g, v["std"], v["fan_in"], v["gamma"]] for g, v in r.groups.items()],
          width=width)
    table(["matrix", "std", "fan_in", "gamma"],
          [[n, r.numbers[n]["std"], r.numbers[n]["fan_in"], r.numbers[n]["gamma"]] for n in r.names], width=width)


def chart(r) -> list[Panel]:
    return [barh(f"step {r.step}", "effective gamma (-ln std / ln fan-in)", "matrix", r.names,
                 {"gamma": [r.numbers[n]["gamma"] for n in r.names]})]


PROBE = Probe("gamma", WEIGHTS, "Effective gamma of the weights", function=gamma, style="detail",
              result="regime.GammaResult", metrics=("gamma_group", "gamma"),
              example="probe gamma run.h5 --step 0", examples=("probe gamma model/", "probe gamma run.h5 --step all"),
              nonfinite="a matrix holding one is left out",
              help="The effective gamma of every weight matrix and group: its std, fan-in and -ln std / ln fan_in "
                   "(at step 0 of a gamma-init run, the gamma it was drawn with; on a library's init, the gamma "
                   "its std is at that width).",
              detail=detail, chart=chart, cheap=True)
