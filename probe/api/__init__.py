"""The Python API behind the ``probe`` CLI: each function takes a path and returns results.

Functions that accept ``step`` return one result per selected snapshot (``latest``,
``all``, a step number, ``A:B`` or a comma list); with several steps each dataset is read once. Token
selections are ``tokens`` (group names, ids ``3,5,7``, a half-open range ``11:21``, or a
list) or ``words`` / ``words_file`` (looked up in a text run's stored vocabulary or a
checkpoint's tokenizer files); ``None`` for all of them is the probe's own selection.
Every result follows one contract (:class:`probe.analyses.base.Result`). Warnings about
a result (zero vectors, words left out) are :class:`~probe.errors.ProbeWarning`.

A file as a whole here (:func:`info`, :func:`validate` and :func:`token_text`); each probe's function in its
own module (:mod:`probe.probes`, or another package's: :mod:`probe.registry`), reached here by name. What the
probes share, built-in or not: :mod:`.selection` (tokens and rows: :func:`select_tokens`, :class:`TokenRows`,
:func:`token_vectors`), :mod:`.checks` (argument checks, passing warnings on) and :mod:`.finite` (the
non-finite policy); what they read is a :class:`probe.source.Source`.
"""
from __future__ import annotations

import functools
import os

from .. import registry
from ..files import regular_file
from ..errors import ProbeError, ProbeWarning  # noqa: F401  (as before the split)
from ..format import Run, is_snapshot_file
from ..format import validate as _validate
from ..readers.source import open_source
from .selection import TokenRows, select_tokens, token_vectors

_OWN = ["Run", "info", "token_text", "validate", "select_tokens", "TokenRows", "token_vectors", "sweep_summary",
        "probe_function"]


def __getattr__(name: str):   # PEP 562: every probe's function by its name, ours and other packages'
    if name == "__all__":
        return [*_OWN, *registry.declared()]
    if not name.startswith("_") and name in registry.declared():
        return registry.get(name).function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__getattr__("__all__")})


# --- a file as a whole --------------------------------------------------------------------------

def info(path: str | os.PathLike) -> dict:
    """Summary of a snapshot file or of a checkpoint, as plain data (``probe info``).

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.

    Returns
    -------
    dict
        For a snapshot file: ``file``, ``schema_version``, ``package_version``, ``created``,
        ``snapshots``, ``steps``, ``config``, ``own_config`` (a recorded run's settings given as Recorder
        ``config=``; ``{}`` for a trainer's run), ``environment``, ``task``, ``dims``, ``groups`` (name -> token
        ids), ``group_strings`` (name -> token texts, text runs), ``tensors`` (name -> per-snapshot shape;
        the canonical names, then the model's parameter names), ``canonical`` (the canonical names among
        them: each is the same data as one parameter) and ``metrics`` (split -> the latest value of each metric). For a checkpoint: ``file``, ``format``,
        ``step``, ``layout``, ``layers``, ``heads``, ``canonical`` (canonical name -> its raw names),
        ``config``, ``tensors`` (name -> ``shape``, ``dtype`` and ``tied_to`` for a tied tensor) and
        ``parameters``; a checkpoint of an unknown layout is described too, with ``layout`` ``None`` and
        the reason in ``layout_error``.

    Raises
    ------
    ProbeError
        A path that does not exist or is no readable snapshot file or checkpoint.

    Examples
    --------
    >>> import probe
    >>> probe.info("run.h5")["steps"]
    >>> probe.info("model/")["tensors"]["model.embed_tokens.weight"]["shape"]
    """
    with open_source(path, canonical=False) as src:   # a checkpoint of an unknown layout is described too
        return src.describe()


def validate(path: str | os.PathLike) -> list[str]:
    """Check a snapshot file against the schema (``probe validate``).

    A FIFO or device is refused unopened; a safetensors checkpoint is refused with what is wrong in its
    header, or as a checkpoint rather than a snapshot file.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file written by ``probe-train``.

    Returns
    -------
    list of str
        The findings, one sentence each; empty when the file matches the schema. Every stored chunk is
        read once (in bounded blocks) so that HDF5 verifies its checksum: a damaged one is a finding.
        Its ``notes`` attribute lists what holds either way (a file written before checksums, schema
        1.4, carries none).

    Raises
    ------
    ProbeError
        A file that is no readable snapshot file at all (missing, not HDF5, truncated, a newer schema
        major version, a FIFO or device), or a checkpoint rather than a snapshot file.

    Examples
    --------
    >>> import probe
    >>> probe.validate("run.h5")
    []
    """
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        regular_file(path, "snapshot file")
        if not is_snapshot_file(path):
            from ..readers.checkpoints import SafetensorsSource, sniff

            if sniff(path) == "safetensors":
                SafetensorsSource(path)
                raise ProbeError(f"{path}: a safetensors checkpoint, not a snapshot file: validate checks the files "
                                 "probe-train writes (probe info describes a checkpoint)")
    return _validate(path)


def token_text(path: str | os.PathLike, ids) -> list[str] | None:
    """Text of each token id, from a text run's stored vocabulary or a checkpoint's tokenizer files.

    Parameters
    ----------
    path : str or os.PathLike
        A snapshot file, or a checkpoint file or folder with tokenizer files.
    ids : sequence of int
        The token ids.

    Returns
    -------
    list of str or None
        One text per id, in the order of ``ids``; ``None`` when the source has no vocabulary (the
        synthetic tasks).

    Examples
    --------
    >>> import probe
    >>> probe.token_text("model/", [464, 3797])
    """
    if is_snapshot_file(path):
        with Run(path) as run:
            return run.token_texts(ids)
    from ..readers.words import ids_to_text

    return ids_to_text(os.fspath(path), ids)


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
    def function(name: str):
        fn = probe_function(name)

        @functools.wraps(fn)
        def told(path, *args, **kwargs):
            progress(f"{name} on {os.fspath(path)}")
            return fn(path, *args, **kwargs)
        return told
    return function
