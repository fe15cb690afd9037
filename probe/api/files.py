"""A file as a whole: :func:`info`, :func:`validate` and :func:`token_text`."""
from __future__ import annotations

import os

import numpy as np

from .._files import regular_file
from ..errors import ProbeError
from ..format import Run, is_snapshot_file
from ..format import validate as _validate
from ..readers.source import token_texts


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
        ``snapshots``, ``steps``, ``config``, ``environment``, ``task``, ``dims``, ``groups`` (name -> token
        ids), ``group_strings`` (name -> token texts, text runs), ``tensors`` (name -> per-snapshot shape)
        and ``metrics`` (split -> the latest value of each metric). For a checkpoint: ``file``, ``format``,
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
    if not is_snapshot_file(path):
        return _checkpoint_info(os.fspath(path))
    with Run(path) as run:
        groups, strings = run.groups, run.token_strings()
        return {
            "file": run.path,
            "schema_version": "%d.%d" % run.schema_version,
            "package_version": run.package_version,
            "created": str(run.h5.attrs.get("created", "")),
            "snapshots": run.n_snapshots,
            "steps": [int(s) for s in run.steps],
            "config": run.config,
            "environment": run.environment,
            "task": run.task,
            "dims": run.dims,
            "groups": {k: [int(i) for i in v] for k, v in groups.items()},
            "group_strings": {} if strings is None else {k: [strings[i] for i in v] for k, v in groups.items()},
            "tensors": {k: list(v) for k, v in run.tensors().items()},
            "metrics": {s: {m: float(v[-1]) for m, v in ms.items() if len(v)} for s, ms in run.metrics().items()},
        }


def _checkpoint_info(path: str) -> dict:
    from ..readers.checkpoints import open_checkpoint
    from ..readers.layouts import detect

    src = open_checkpoint(path)
    shapes, dtypes, tied = src.shapes(), src.dtypes(), src.aliases()
    try:
        layout = detect(src)
        known = {"layout": layout.name, "layers": layout.layers, "heads": layout.heads,
                 "canonical": {n: list(raw) for n, (raw, _) in layout.rules.items()}}
    except ProbeError as exc:   # info describes what it can read, known layout or not
        known = {"layout": None, "layers": None, "heads": None, "canonical": {}, "layout_error": str(exc)}
    return {"file": path, "format": src.kind, "step": src.step, **known, "config": src.config,
            "tensors": {n: {"shape": list(s), "dtype": dtypes.get(n, "?"), **({"tied_to": tied[n]} if n in tied
                                                                                else {})}
                        for n, s in shapes.items()},
            "parameters": int(sum(int(np.prod(s)) for n, s in shapes.items()
                                  if n not in tied and "f" in dtypes.get(n, "f")))}   # floats: not index buffers


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
            return token_texts(run, ids)
    from ..readers.words import ids_to_text

    return ids_to_text(os.fspath(path), ids)
