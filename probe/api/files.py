"""A file as a whole: :func:`info`, :func:`validate` and :func:`token_text`."""
from __future__ import annotations

import os

import numpy as np

from .._files import regular_file
from ..errors import ProbeError
from ..readers.source import token_texts
from ..format import Run, is_snapshot_file
from ..format import validate as _validate


def info(path: str | os.PathLike) -> dict:
    """Summary of a snapshot file (configuration, steps, token groups, tensors and shapes) or of a
    checkpoint (format, layout, layers, heads, step, every tensor's shape and dtype)."""
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
    """Findings of checking a snapshot file against the schema (empty: it matches). A FIFO or device
    is refused unopened; a safetensors checkpoint is refused with what is wrong in its header (the
    line every reader gives), or as a checkpoint rather than a snapshot file."""
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
    """Text of each token id: the strings a text run stores, else the checkpoint's tokenizer
    files; ``None`` when neither exists (synthetic tasks)."""
    if is_snapshot_file(path):
        with Run(path) as run:
            return token_texts(run, ids)
    from ..readers.words import ids_to_text

    return ids_to_text(os.fspath(path), ids)
