"""Probes for reasoning-vs-memorizing structure in training snapshots and checkpoints.

    >>> import probe
    >>> probe.similarity("run.h5", tokens="reasoning")[0].distance_corr
    >>> probe.theory("run.h5")[0].pearson_r
    >>> probe.similarity("run.h5", step="all").to_frame()     # pandas: pip install 'gamma-probe[notebook]'

Every probe takes a path and ``step`` and returns one result per selected snapshot, as a
:class:`Results` list whose ``to_frame()`` is the tidy ``step,metric,key,value`` table of
``probe NAME --format csv``. Submodules are imported on first use, so ``import probe`` is cheap
(no numpy, h5py or torch): ``probe.chart``, ``probe.figures``, ``probe.report`` too.
``probe.__version__`` is the installed distribution's version (``probe --version``).

Layers (one folder each): ``format/`` the snapshot file, ``readers/`` everything else a
path can be, ``analyses/`` the math, ``probes/`` one module per probe (its API function, tables and
chart), ``chart/`` draws charts, ``registry`` finds them, ``api/`` path in -> results out, ``cli/``
the command line.
"""
from .errors import ProbeError, ProbeWarning

_API = ("Run", "info", "token_text", "validate", "select_tokens", "sweep_summary")   # and every probe (registry)

#: submodules a user reaches as attributes (``probe.chart.heatmap``), imported on first use
_SUBMODULES = ("api", "batch", "callbacks", "chart", "errors", "figures", "registry", "report")


def __getattr__(name):   # PEP 562: the API (numpy, h5py) and the submodules only when first used
    if name == "__all__":   # the probes are known once the registry has looked (other packages' too)
        from . import registry

        return ["ProbeError", "ProbeWarning", "Recorder", "Results", *_API, *registry.declared()]
    if name == "__version__":   # the installed distribution's (probe --version's), read once when asked
        from importlib.metadata import PackageNotFoundError, version

        try:
            globals()["__version__"] = version("gamma-probe")
        except PackageNotFoundError:   # a source tree that was never installed
            globals()["__version__"] = "0+unknown"
        return globals()["__version__"]
    if name == "Results":
        from .analyses.base import Results

        return Results
    if name == "Recorder":
        from .recorder import Recorder

        return Recorder
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if not name.startswith("_") and name in __getattr__("__all__"):   # the API and every probe
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    """The public names, for tab completion: the API of ``__all__`` and the public submodules."""
    return sorted({*__getattr__("__all__"), *_SUBMODULES})
