"""Probes for reasoning-vs-memorizing structure in training snapshots and checkpoints.

    >>> import probe
    >>> probe.similarity("run.h5", tokens="reasoning")[0].distance_corr
    >>> probe.theory("run.h5")[0].pearson_r

Every probe takes a path and ``step`` and returns one result per selected snapshot.
Submodules are imported on first use, so ``import probe`` is cheap.

Layers (one folder each): ``format/`` the snapshot file, ``readers/`` everything else a
path can be, ``analyses/`` the math, ``registry`` every probe declared once, ``api/`` path in ->
results out, ``cli/`` the command line.
"""
from . import registry
from .errors import ProbeError, ProbeWarning

_API = ("Run", "info", "token_text", "validate", "select_tokens", *registry.names(), "sweep_summary")
__all__ = ["ProbeError", "ProbeWarning", *_API]


def __getattr__(name):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
