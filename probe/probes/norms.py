"""The ``norms`` probe: norm saturation (ε share)."""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.norms import SATURATION, NormsResult, gain_rms, norm_saturation
from ..api.checks import at_step, with_warnings
from ..api.finite import Finite
from ..chart.panel import barh, Panel
from ..errors import ProbeError, ProbeWarning
from ..format.tensors import read_at
from ..params import check_number
from ..readers.activations import MAX_TOKENS, WINDOW
from ..readers.source import open_source
from ..registry import ACTIVATIONS, Probe
from ..render import summary_table, table


@budgeted
def norms(path: str | os.PathLike, *, step: str | int = "latest", saturation: float = SATURATION,
          text: str | None = None, window: int = WINDOW, max_tokens: int = MAX_TOKENS, allow_nonfinite: bool = False,
          max_memory: int | str | None = MAX_MEMORY
          ) -> list[NormsResult]:
    """ε share and effective gain of every normalisation site, per step (paper 4's ε-saturation).

    A norm divides its input by sqrt(m + ε), with m = mean(x²) per token for RMSNorm (var(x) for
    LayerNorm). With tiny activations ε is no longer negligible and the layer scales its input down
    instead of normalising it. The ε share s = ε / (m + ε), with m the mean over the probe tokens, is 0
    for a clean norm and 1 for a layer that only divides by sqrt(ε). Snapshot files: from the stored
    norm statistics; checkpoints: by running the model on ``text``.

    Parameters
    ----------
    {path}
    {step}
    {saturation}
    {text}
    {window}
    {max_tokens}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[NormsResult]
        One result per selected step: ``sites`` (k,), ``mean_square`` (k,), ``eps_share`` (k,),
        ``effective_gain`` (k,), ``gain`` (k,) or ``None``, and ``saturated`` (the saturated sites), where
        k is the number of norm sites.

    Raises
    ------
    ProbeError
        A snapshot file without norm statistics (a run without norms, or written before schema 1.3); a
        checkpoint without ``text`` or without normalisation layers; a bad parameter or step; NaN or inf
        (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> res = probe.norms("run.h5", step="all")
    >>> [(r.step, r.summary()["max_eps_share"]) for r in res]
    >>> probe.norms("model/", text="corpus.txt")[0].saturated
    """
    check_number("saturation", saturation)
    with open_source(path, canonical=False) as run:   # a checkpoint of any layout: its model runs
        fw = run.forward(text, "norms", step, window=window, max_tokens=max_tokens)
        if fw is None:   # the stored norm statistics
            if not run.has("norm_ms"):
                raise ProbeError(f"{run.path}: stores no norm statistics (a run without norms, or written before "
                                 "schema 1.3)")
            sites = run.strings("norm_sites")
            indices = run.step_indices(step)
            ms = read_at(run.dataset("norm_ms"), indices)
            med = read_at(run.dataset("norm_ms_median"), indices) if run.has("norm_ms_median") else [None] * len(indices)
            gains = {s: read_at(run.tensor(s), indices) for s in sites if s in run.weights()}
            eps = float(run.config.get("norm_eps", 1e-5))
            steps = run.steps
        check = Finite(run.path, allow_nonfinite)
    if fw is not None:   # the model run on the text
        if not fw.norm_sites:
            raise ProbeError(f"{check.path}: the model has no normalisation layers")
        eps = set(fw.norm_eps)
        if len(eps) > 1:
            warnings.warn(f"{check.path}: the norms use several epsilons ({sorted(eps)}); the largest is reported",
                          ProbeWarning, stacklevel=3)
        sites, ms, gain, med = finite_sites(check, None, list(fw.norm_sites), fw.norm_ms, fw.norm_gain,
                                             fw.norm_ms_median, " (the model run on the text)")
        check.warn()
        return with_warnings([norm_saturation(sites, ms, max(eps), gain=gain, median_square=med, saturation=saturation)])
    out = []
    for k, i in enumerate(indices):
        g = np.array([gain_rms(gains[s][k]) if s in gains else 1.0 for s in sites])
        for s in gains:   # a gain is a weight: named as stored, like every tensor
            ok = check(s, gains[s][k], int(steps[i]), "its site left out")
            if ok is not None:
                g[sites.index(s)] = np.nan
        kept, m, gk, mk = finite_sites(check, int(steps[i]), sites, ms[k], g, med[k], "")
        out.append(norm_saturation(kept, m, eps, gain=gk, median_square=mk, saturation=saturation,
                                   step=int(steps[i])))
    check.warn()
    return with_warnings(out)


def finite_sites(check: Finite, step, sites: list[str], ms, gain, med, where: str):
    """(sites, mean_square, gain, median_square) of the norm sites whose numbers are all finite (an
    error unless allowed; a gain already reported non-finite is NaN here and not named again)."""
    bad = np.zeros(len(sites), bool)
    for name, x in (("norm_ms", ms), ("norm_ms_median", med)):
        if x is not None:
            ok = check(name + where, x, step, "the sites holding them left out")
            if ok is not None:
                bad |= ~ok
    if gain is not None:
        bad |= ~np.isfinite(np.asarray(gain, dtype=np.float64))
        if where:   # a checkpoint: the gains come from the model run, named here
            ok = check("norm gains" + where, gain, step, "the sites holding them left out")
    if not bad.any():
        return sites, ms, gain, med
    if bad.all():
        raise ProbeError(f"{check.path}: {at_step(step)}no norm site has finite statistics")
    keep = ~bad
    return ([s for s, k in zip(sites, keep) if k], np.asarray(ms)[keep],
            None if gain is None else np.asarray(gain)[keep], None if med is None else np.asarray(med)[keep])


def head(r, width, step: bool = True) -> None:
    """The sites' settings: one line, or two where one would pass ``width`` (with a step: 86 columns)."""
    sites = f"norm sites{f', step {r.step}' if step else ''}: eps {r.eps:g}; eps_share s = eps / (m + eps)"
    rule = f"saturated from s >= {r.saturation:g}"
    print(f"{sites}; {rule}" if width is None or len(sites) + 2 + len(rule) <= width else f"{sites}\n{rule}")


def tables(results, width) -> None:
    """Several steps: the sites' settings once, then a row per step."""
    head(results[-1], width, step=False)
    print()
    summary_table(results, wide=width is None)


def detail(r, width) -> None:
    head(r, width)
    med = r.median_square if r.median_square is not None else [None] * len(r.sites)
    gain = r.gain if r.gain is not None else [None] * len(r.sites)
    # the columns are NormsResult's attributes (m: mean_square)
    table(["site", "mean_square", "median_square", "eps_share", "gain", "effective_gain", "saturated"],
          [[s, f"{m:.3g}", "-" if md is None else f"{md:.3g}", float(e), None if g is None else float(g),
            f"{eg:.4g}", s in r.saturated]
           for s, m, md, e, g, eg in zip(r.sites, r.mean_square, med, r.eps_share, gain, r.effective_gain)],
          width=width)
    print(f"{len(r.saturated)} of {len(r.sites)} sites saturated")


def chart(r) -> list[Panel]:
    return [barh(f"step {r.step}: ε share, ε = {r.eps:g}", "ε share s = ε / (m + ε)", "norm site", r.sites,
                  {"ε share": list(r.eps_share)}, xscale="unit", vline=(r.saturation, "saturated from"))]


def charts(results) -> list[Panel]:
    """The ε share of each site (rows) at each step (columns), on a log colour scale: the shares that
    matter span orders of magnitude (1e-8 at large init, 0.1 saturated)."""
    return [Panel("ε share of each norm site", "step", "norm site", kind="heat",
                  matrix=np.clip(np.array([r.eps_share for r in results]).T, 1e-4, 1.0),
                  rows=list(results[0].sites), cols=[str(r.step) for r in results], vmin=1e-4, vmax=1.0,
                  cmap="magma", cscale="log",
                  clabel=f"ε share (ε = {results[0].eps:g}; below 1e-4 shown as 1e-4)")]


PROBE = Probe("norms", ACTIVATIONS, "Norm saturation (ε share)", function=norms, style="detail", tables=tables,
              result="norms.NormsResult",
              metrics=("max_eps_share", "saturated_sites", "eps_share", "effective_gain", "mean_square"),
              example="probe norms run.h5 --step all",
              examples=("probe norms model/ --text corpus.txt --saturation 0.05",),
              nonfinite="a norm site whose statistics or gain hold one is left out",
              help="ε-saturation of every norm site: ε share s = ε / (m + ε), m the mean over tokens of mean(x²) "
                   "(var(x) for LayerNorm), and the effective gain; flags the saturated sites (--step all: a row per step, "
                   "a column per site).",
              detail=detail, chart=chart, charts=charts)
