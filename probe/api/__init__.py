"""The Python API behind the ``probe`` CLI: each function takes a path and returns results.

Functions that accept ``step`` return one result per selected snapshot (``latest``,
``all``, a step number, ``A:B`` or a comma list); with several steps each dataset is read once. Token
selections are ``tokens`` (group names, ids ``3,5,7``, a half-open range ``11:21``, or a
list) or ``words`` / ``words_file`` (looked up in a text run's stored vocabulary or a
checkpoint's tokenizer files); ``None`` for all of them is the probe's own selection.
Every result follows one contract (:class:`probe.analyses.base.Result`). Warnings about
a result (zero vectors, words left out) are :class:`~probe.errors.ProbeWarning`.

A file as a whole in :mod:`.files`; each probe's function in its own module (:mod:`probe.probes`, or
another package's: :mod:`probe.registry`), reached here by name; what the probes share in :mod:`._common`.
"""
from __future__ import annotations

import os

from .. import registry
from ..errors import ProbeError, ProbeWarning  # noqa: F401  (as before the split)
from ..format import Run
from ._common import select_tokens, token_vectors
from .files import info, token_text, validate

_OWN = ["Run", "info", "token_text", "validate", "select_tokens", "token_vectors", "sweep_summary", "probe_function"]


def __getattr__(name: str):   # PEP 562: every probe's function by its name, ours and other packages'
    if name == "__all__":
        return [*_OWN, *registry.declared()]
    if not name.startswith("_") and name in registry.declared():
        return registry.get(name).function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__getattr__("__all__")})


# --- by name, and sweeps ------------------------------------------------------------------------

def probe_function(name: str):
    """The API function of probe ``name`` (:mod:`probe.registry`): ``probe_function("pca") is pca``."""
    return registry.get(name).function


def sweep_summary(path: str | os.PathLike, metric=None, outcome=None, *, step: str | int = "latest",
                  progress=None) -> list:
    """Summarise a sweep per grid cell over its seeds: metric intervals and outcome fractions.

    For each grid cell of a ``probe-train sweep`` (its folder or manifest): mean, std and 95 % bootstrap
    interval of each ``metric``, and the fraction of seeds with each binary ``outcome`` with its Wilson
    interval. Failed, missing and unfinished runs are left out, with a ``ProbeWarning``.

    Parameters
    ----------
    path : str or os.PathLike
        The sweep's folder or its manifest (``sweep.json``).
    metric : str or list of str, optional
        Metrics: ``acc[SPLIT]``, ``loss[SPLIT]``, ``train_loss``, or a probe's summary number
        ``PROBE(OPTIONS):NAME`` (``similarity(tokens=logic):mean_offdiag``). Default: every logged
        accuracy.
    outcome : str or list of str, optional
        Binary outcomes ``A>B``, ``A<B``, ``A>=B`` or ``A<=B``, A and B metrics or numbers. Default:
        composite task ``acc[ood_inferential]>acc[ood_symmetric]``, anchor task ``acc[rsn_test]>0.5``.
    step : str or int, default "latest"
        ``"latest"`` (finished runs only) or a step number every run has.
    progress : callable, optional
        Called with a label (``"similarity on runs/a.h5"``) as each probe call on a run starts.

    Returns
    -------
    list of CellSummary
        One [`CellSummary`][probe.analyses.uncertainty.CellSummary] per grid cell.

    Raises
    ------
    ProbeError
        A folder without a manifest; a metric or outcome that does not parse or names an unknown split,
        probe or number; no finished run.

    Examples
    --------
    >>> import probe
    >>> cells = probe.sweep_summary("demo", metric="acc[rsn_test]", outcome="acc[rsn_test]>0.5")
    >>> [(c.label, c.stats["acc[rsn_test]"]["mean"]) for c in cells]
    """
    from ..sweeps import sweep_summary as summarise

    return summarise(path, metric, outcome, step=step,
                     probe_function=probe_function if progress is None else _told(progress))


def _told(progress):
    """:func:`probe_function` whose functions call ``progress`` as they start (same signatures)."""
    import functools

    def function(name: str):
        fn = probe_function(name)

        @functools.wraps(fn)
        def told(path, *args, **kwargs):
            progress(f"{name} on {os.fspath(path)}")
            return fn(path, *args, **kwargs)
        return told
    return function
