"""Probes for reasoning-vs-memorizing structure in training snapshots.

    >>> import probe
    >>> probe.similarity("run.h5", tokens="reasoning")[0].distance_corr

Submodules are imported on first use, so ``import probe`` is cheap.
"""
from .errors import ProbeError

__all__ = ["ProbeError", "Run", "info", "similarity", "validate"]


def __getattr__(name):
    if name in ("Run", "info", "similarity", "validate", "select_tokens"):
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
