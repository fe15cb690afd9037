"""What every probe function does around its math: its argument checks (a number's is
:func:`probe.params.check_number`, shared with the readers), the errors it words alike
(:func:`unconverged`), and passing its results' warnings on (:func:`with_warnings`)."""
from __future__ import annotations

import os
import warnings

from ..analyses.base import Results
from ..errors import ProbeError, ProbeWarning, param
from ..source import Source


def check_enough(ids, need: int, what: str) -> None:
    """A ProbeError when the selection ``ids`` (None: every row, not checked) has fewer than ``need`` tokens."""
    if ids is not None and len(ids) < need:
        raise ProbeError(f"{what} needs at least {need} tokens; the selection has {len(ids)}")


def layer_check(run: Source, layer: int, head: int | None = None) -> None:
    """A ProbeError unless ``run``'s model has attention layer ``layer`` (and head ``head``, if given)."""
    layers = int(run.dims.get("layers", 0))
    if layers == 0:
        raise ProbeError(f"{run.path}: the model has no attention layers")
    if not 0 <= layer < layers:
        raise ProbeError(f"{param('layer', layer)} out of range: the model has layers 0..{layers - 1}")
    if head is not None and run.dims.get("heads", 1) is None:   # a lone weights file
        from ..readers.layouts import needs_heads

        raise needs_heads(run.path, run.provenance["layout"], "a probe of one attention head")
    heads = int(run.dims.get("heads", 1))
    if head is not None and not 0 <= head < heads:
        raise ProbeError(f"{param('head', head)} out of range: the model has heads 0..{heads - 1}")


def at_step(step) -> str:
    """``"at step S "`` for messages; ``""`` for a step of None (a checkpoint without one)."""
    return "" if step is None else f"at step {step} "


def unconverged(path, what: str, step, exc: Exception) -> ProbeError:
    """The error of a decomposition (``what``) that did not converge at ``step``, with numpy's words."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return ProbeError(f"{os.fspath(path)}: {what} {at_step(step)}did not converge ({detail})")


def with_warnings(results: list) -> Results:
    """Pass each result's warnings on to the caller (once per distinct message); the results as
    :class:`~probe.analyses.base.Results` (a list with ``to_frame()``), as every probe returns them."""
    for msg in dict.fromkeys(w for r in results for w in r.warnings):
        # at the caller's line: past this helper, the probe and its budgeted wrapper (probe.limits.budgeted)
        warnings.warn(msg, ProbeWarning, stacklevel=4)
    return Results(results)
