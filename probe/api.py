"""The Python API behind the ``probe`` CLI: each function takes a path, returns plain results."""
from __future__ import annotations

import os

import numpy as np

from .analyses.similarity import SimilarityResult, cosine_similarity
from .snapshot import Run, read_rows
from .tokens import parse_tokens
from .validate import validate

__all__ = ["Run", "info", "similarity", "validate", "select_tokens"]


def info(path: str | os.PathLike) -> dict:
    """Summary of a snapshot file: configuration, steps, token groups, tensors and shapes."""
    with Run(path) as run:
        return {
            "file": run.path,
            "schema_version": "%d.%d" % run.schema_version,
            "package_version": run.package_version,
            "created": str(run.h5.attrs.get("created", "")),
            "snapshots": run.n_snapshots,
            "steps": [int(s) for s in run.steps],
            "config": run.config,
            "task": run.task,
            "dims": run.dims,
            "groups": {k: [int(i) for i in v] for k, v in run.groups.items()},
            "tensors": {k: list(v) for k, v in run.tensors().items()},
            "metrics": {s: {m: float(v[-1]) for m, v in ms.items() if len(v)} for s, ms in run.metrics().items()},
        }


def select_tokens(run: Run, tokens: str, tensor: str = "token_embedding") -> tuple[np.ndarray, list[str]]:
    """Ids chosen by a ``--tokens`` spec, checked against the rows of ``tensor``."""
    rows = run.tensor(tensor).shape[1]
    return parse_tokens(tokens, run.groups, rows)


def similarity(path: str | os.PathLike, tokens: str = "reasoning", *, tensor: str = "token_embedding",
               step: str | int = "latest") -> list[SimilarityResult]:
    """Cosine-similarity structure of the chosen rows of ``tensor`` at each selected step.

    Returns one :class:`SimilarityResult` per snapshot in ``step`` (``latest``, ``all``,
    a step number or ``A:B``). Only the requested rows are read from the file.
    """
    with Run(path) as run:
        ids, groups = select_tokens(run, tokens, tensor)
        indices = run.step_indices(step)
        ds = run.tensor(tensor)
        steps = run.steps
        if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
            block = read_rows(ds, slice(indices[0], indices[-1] + 1), ids)  # one read for the trajectory
            vectors = list(block)
        else:
            vectors = [read_rows(ds, i, ids) for i in indices]
    return [cosine_similarity(v.reshape(len(ids), -1), ids, step=int(steps[i]), groups=groups)
            for v, i in zip(vectors, indices)]
