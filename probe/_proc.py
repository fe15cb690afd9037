"""Child processes of the toolkit: how to start its own commands.

A child runs this installation's console scripts in this interpreter, never ``python -m NAME``:
``-m`` (like ``-c``) puts the working directory first on the import path, so a user's ``train.py``
or ``probe.py`` beside them would run instead of the toolkit. The command below keeps the working
directory off the path (Python 3.11's ``-P``; on 3.10 the first entry, which ``-c`` always makes
the working directory, is dropped before anything is imported) and calls the entry point that
``pyproject.toml`` names, found through the installed distribution's metadata.
"""
from __future__ import annotations

import sys
from functools import lru_cache

DISTRIBUTION = "gamma-probe"


@lru_cache(maxsize=None)
def _entry_point(name: str) -> tuple[str, str]:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        eps = distribution(DISTRIBUTION).entry_points
    except PackageNotFoundError:   # run from a source tree without an install
        eps = ()
    for ep in eps:
        if ep.group == "console_scripts" and ep.name == name:
            module, _, attr = ep.value.partition(":")
            return module.strip(), attr.strip()
    # the source tree's own entry points (pyproject.toml [project.scripts])
    return {"probe": ("probe.cli", "main"), "probe-train": ("probe_train._entry", "main")}[name]


def entry_command(name: str) -> list[str]:
    """The argv prefix that runs console script ``name`` (``"probe"`` or ``"probe-train"``) of this
    installation in this interpreter, with the working directory kept off the import path."""
    module, attr = _entry_point(name)
    code = (f"import sys; sys.argv[0] = {name!r}; from {module} import {attr} as main; main()")
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-c", code]
    return [sys.executable, "-c", "import sys; del sys.path[0]; " + code]
