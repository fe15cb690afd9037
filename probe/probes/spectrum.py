"""The ``spectrum`` probe: weight spectra (power-law alpha)."""
from __future__ import annotations

import os

import numpy as np

from ..limits import DECOMPOSITION, MAX_MEMORY, budgeted, in_context
from ..analyses.stats import nonfinite
from ..analyses.spectrum import PRECISIONS, SpectrumResult, layer_spectrum
from ..api.checks import unconverged, with_warnings
from ..api.finite import Finite
from ..chart.panel import barh, Panel
from ..errors import param, ProbeError
from ..params import check_number
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe
from ..render import table


@budgeted
def spectrum(path: str | os.PathLike, *, step: str | int = "latest", precision: str = "float64", threads: int = 0,
             progress=None, skip_damaged: bool = False, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY) -> list[SpectrumResult]:
    """Spectral metrics of every linear layer, as WeightWatcher reports them, per selected step.

    For each weight matrix W: spectral norm, Frobenius norm, log norm, stable rank, entropy rank and the
    power-law exponent ``alpha`` of the tail of its eigenvalue density (the eigenvalues of W^T W).
    Snapshot files: every weight matrix (per-head tensors as the full map) by its canonical name
    (``layer0/W_K``; a parameter name where it has none). Other checkpoints, whatever their layout: every
    2-D tensor by its own name, in natural order (layer 2 before 10), a tensor tied to another (the same
    memory under two names) once.

    Parameters
    ----------
    {path}
    {step}
    {precision}
    threads : int, default 0
        Layers analysed at once, each with one BLAS thread (0: one per CPU core); at most that many
        matrices are in memory.
    progress : callable, optional
        Called with each matrix's name when it is done.
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[SpectrumResult]
        One result per selected step; its ``layers`` is a list of
        [`LayerSpectrum`][probe.analyses.spectrum.LayerSpectrum], one per matrix.

    Raises
    ------
    ProbeError
        A bad ``precision`` or ``threads``; a step a checkpoint does not hold; NaN or inf (without
        ``allow_nonfinite``); an eigen-decomposition that does not converge.

    Examples
    --------
    >>> import probe
    >>> res = probe.spectrum("model.safetensors")
    >>> [(layer.name, layer.alpha) for layer in res[0].layers]
    >>> res[0].summary()["mean_alpha"]
    """
    if precision not in PRECISIONS:
        raise ProbeError(f"{param('precision', precision)}: use {' or '.join(PRECISIONS)}")
    check_number("threads", threads)
    out = []
    # a checkpoint: every 2-D tensor by its own name
    with open_source(path, canonical=False, skip_damaged=skip_damaged) as run:
        indices, names, read = run.linear_maps(step, DECOMPOSITION)
        check = Finite(run.path, allow_nonfinite)
        for i in indices:
            layers = _layer_spectra(names, lambda n: read(n, i), precision, threads, progress, check, run.step_of(i))
            out.append(SpectrumResult(step=int(run.steps[i]), layers=layers))
    check.warn()
    return with_warnings(out)


def _layer_spectra(names: list[str], read, precision: str, threads: int, progress, check: Finite, step) -> list:
    """Each matrix read and analysed by ``threads`` workers (numpy and LAPACK release the GIL), each
    with one BLAS thread: on 2 cores the small Gram matrices and eigen-decompositions of a
    transformer scale with the workers, where two BLAS threads on one matrix do not. A matrix holding
    NaN or inf is reported through ``check`` (from this thread) and, allowed, left out."""
    workers = min(threads or os.cpu_count() or 1, max(1, len(names)))

    def one(n):
        W = read(n)
        _, nan, inf = nonfinite(W)
        if nan or inf:
            return None, (nan, inf)
        try:
            # an overflow (huge finite values, a float32 Gram matrix) ends in a LinAlgError or a non-finite
            # norm below, said as one line; numpy's own warning would be a second one
            with np.errstate(over="ignore", invalid="ignore"):
                layer = layer_spectrum(n, W, precision)
            if not np.isfinite(layer.norm):
                raise np.linalg.LinAlgError("its Gram matrix overflows")
            return layer, None
        except np.linalg.LinAlgError as exc:
            big = float(np.max(np.abs(W))) if W.size else 0.0
            return None, np.linalg.LinAlgError(f"{exc}; largest |value| {big:.3g}, Gram matrix in {precision}")

    if workers == 1:
        results = map(one, names)
    else:
        from concurrent.futures import ThreadPoolExecutor

        from threadpoolctl import threadpool_limits

        limits, pool = threadpool_limits(1), ThreadPoolExecutor(workers)
        results = pool.map(in_context(one), names)     # each read checks this call's memory budget
    out = []
    try:
        for n, (layer, bad) in zip(names, results):
            if isinstance(bad, Exception):
                raise unconverged(check.path, f"the eigenvalues of {n}", step, bad)
            if bad is not None:
                check.report(n, step, *bad, "left out")
            else:
                out.append(layer)
            if progress:
                progress(n)
    finally:
        if workers > 1:
            pool.shutdown(cancel_futures=True)
            limits.restore_original_limits()
    return out


def detail(r, width) -> None:
    # the columns are LayerSpectrum's attributes and the CSV's metric names
    table(["layer", "shape", "spectral_norm", "log_norm", "stable_rank", "entropy_rank", "alpha", "xmin", "xmax",
           "ks_distance"],
          [[l.name, "x".join(map(str, l.shape)), l.spectral_norm, l.log_norm, l.stable_rank, l.entropy_rank,
            l.alpha, l.xmin, l.xmax, l.ks_distance] for l in r.layers], width=width)
    print()


def chart(r) -> list[Panel]:
    names = [layer.name for layer in r.layers]
    return [barh(f"step {r.step}: power-law α", "α", "layer", names, {"α": [layer.alpha for layer in r.layers]}),
            barh("log10 ||W||_F^2", "log10 ||W||_F^2", "layer", names,
                  {"log norm": [layer.log_norm for layer in r.layers]})]


PROBE = Probe("spectrum", WEIGHTS, "Weight spectra (power-law alpha)", function=spectrum,
              options={"threads": "layers analysed at once, one BLAS thread each (0: one per CPU core)"},
              style="steps", sweeps=False, result="spectrum.SpectrumResult",
              metrics=("layers", "mean_alpha", "mean_log_norm"),
              example="probe spectrum run.h5 --precision float32",
              examples=("probe spectrum run.h5 --step all --plot spectrum.png",
                        "probe spectrum model.safetensors --threads 4"),
              nonfinite="a matrix holding one is left out of the table",
              help="Per linear layer: spectral norm, Frobenius norm, stable rank, entropy rank, and the power-law "
                   "exponent alpha of the eigenvalue density with its fit range (WeightWatcher's metrics).",
              detail=detail, chart=chart, cheap=True)
