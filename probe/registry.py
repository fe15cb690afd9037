"""Every probe, found in one place: the built-in ones (:mod:`probe.probes`) and those other installed
packages declare in the entry point group ``gamma_probe.probes``.

A probe is one unit: a module that defines its API function, its terminal detail table and its chart
(the report's SVG and the ``--plot`` file draw the same panels), and declares them in one :class:`Probe`. The CLI commands
(:mod:`probe.cli`), ``probe batch``, the report's sections, sweep-summary's ``PROBE:NAME`` metrics, the
Python API (``probe.NAME``) and the reference page (``docs/probes.md``, :func:`reference`) all come
from :func:`probes`; ``tests/test_registry.py`` checks that every probe is reachable from each of them.
Each of them calls a probe through :func:`call`, which passes it only the parameters its function
declares, so a probe of another package is held to the same contract as a built-in one.

Another package adds a probe by declaring it, with nothing edited here::

    # pyproject.toml of package "my-probes"
    [project.entry-points."gamma_probe.probes"]
    mean_norm = "my_probes.mean_norm:PROBE"

Importing this module is cheap; the probe modules (numpy, h5py) are imported on the first call of
:func:`probes`.
"""
from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

#: what a probe reads, and so where it applies
WEIGHTS = "weights"            # the weights alone: a snapshot file or any checkpoint
ACTIVATIONS = "activations"    # a forward pass: a snapshot's stored batch, or a checkpoint run over --text
SNAPSHOT = "snapshot"          # what only probe-train's snapshot files hold (losses, task, probe batch)
READS = (WEIGHTS, ACTIVATIONS, SNAPSHOT)

EVERY_ROW = "every row"               # default selections the API function makes itself
EVERY_GROUP = "every stored group"
ENTRY_POINTS = "gamma_probe.probes"   # the entry point group of probes from other packages


@dataclass(frozen=True)
class Probe:
    """One probe. ``name`` is its API function's name (``probe.NAME``), its CLI command and its key in
    batch tables, report sections and sweep metrics (``similarity:mean_offdiag``).

    ``function(path, ..., step=..., allow_nonfinite=...)`` returns a list of ``Result`` s, one per
    step (:class:`probe.analyses.base.Result`); its parameters are the command's options. The hooks
    draw its results: ``detail(result, width)`` one step's table on the terminal (``width``: columns, None
    at ``--wide``), ``chart(result)`` one step's picture (a list of :class:`probe.chart.panel.Panel`: the
    report's SVG and the ``--plot`` file), ``charts(results)`` the picture of several steps in a ``--plot``
    file (default: the trajectory of the summary numbers, as in the report), ``tables(results, width)``
    its tables of several steps (default: a summary row per step)."""

    name: str
    reads: str                     # WEIGHTS, ACTIVATIONS or SNAPSHOT
    title: str                     # the report section's heading
    help: str                      # the CLI command's help (its first sentence: the command list)
    function: Callable             # the API function
    tokens: str | None = None      # default token selection when neither tokens nor words are given
    #                                (EVERY_ROW, EVERY_GROUP: the API function's own)
    command: str | None = ""       # CLI: "" a command of its own, "OTHER --FLAG": a flag of probe OTHER's
    #                                command, None: none
    api_only: tuple[str, ...] = ()  # API parameters the CLI and batch do not offer
    options: dict[str, str] = field(default_factory=dict)   # CLI: its own help of an option where the probe gives
    #                                the parameter a meaning of its own ("path": FILE; else probe.params's)
    batch: bool = True             # a probe of `probe batch`
    report: bool = True            # a section of `probe report`
    sweeps: bool = True            # a PROBE:NAME metric of `probe sweep-summary`
    whole_run: str | None = None   # report: one result for the whole run, at this step selection
    report_options: tuple = ()     # report: (parameter, value) pairs its calls add
    cheap: bool = False            # report: its chart at every snapshot (it reads weights or stored maps only;
    #                                else at the table's steps only)
    style: str = "summary"         # CLI tables: "summary" (one step: its detail, then its summary row), "detail"
    #                                (one step: its detail alone), "steps" (each step's detail); several steps: one
    #                                summary row each, or the `tables` hook
    result: str = ""               # the Result class, "module.Class"
    metrics: tuple[str, ...] = ()  # its summary's metric names (sweep-summary's PROBE:NAME); {N} a number
    example: str = ""              # a command line (the reference page; the first of --help's Examples)
    examples: tuple[str, ...] = ()  # --help's further examples (run.h5: a snapshot file, model/: a Hugging
    #                                Face folder, corpus.txt: a text file)
    nonfinite: str = ""            # --allow-nonfinite: how the probe goes on past NaN or inf ("one": a NaN or
    #                                inf) instead of stopping with an error
    matrix: str = ""               # a metric of its rows that is a matrix, a row per cell (similarity's cosine
    #                                "i,j"): left out of probe batch --tensorboard (k x k series)
    detail: Callable | None = None
    chart: Callable | None = None
    charts: Callable | None = None
    tables: Callable | None = None

    def __post_init__(self):
        """The declaration writes the shared parameters' entries into its function's docstring
        (:mod:`probe.docstrings`: a ``{name}`` line there becomes that parameter's entry, about this probe,
        from its declaration in :mod:`probe.params`)."""
        from .docstrings import fill

        t = self.tokens or ""
        default = {EVERY_ROW: "every row of ``tensor``", EVERY_GROUP: "every stored group"}.get(
            t, f"the groups ``{t}``" if "," in t else f"the ``{t}`` group")
        if callable(self.function):   # and the function a decorator wrapped: the API reference reads both
            doc = fill(self.function.__doc__, self.reads, default, self.nonfinite, self.function)
            self.function.__doc__ = inspect.unwrap(self.function).__doc__ = doc


def declared() -> tuple[str, ...]:
    """The names of every probe, without importing one: the built-in modules' names, then the entry
    points' (``dir(probe)`` and ``probe.__all__`` cost no numpy)."""
    from importlib.metadata import entry_points

    from .probes import BUILTIN

    return tuple(dict.fromkeys([*BUILTIN, *(ep.name for ep in entry_points(group=ENTRY_POINTS))]))


@functools.cache
def probes() -> tuple[Probe, ...]:
    """Every probe: the built-in ones in :data:`probe.probes.BUILTIN` order (module ``probe.probes.NAME``
    declares ``PROBE``), then those of other packages (entry point ``NAME = "module:PROBE"`` in group
    ``gamma_probe.probes``). A package whose entry point does not load, or is not a probe called NAME, or
    takes a name already taken, is left out with a warning."""
    import importlib
    from importlib.metadata import entry_points

    from .probes import BUILTIN

    out = [importlib.import_module(f"probe.probes.{name}").PROBE for name in BUILTIN]
    for ep in entry_points(group=ENTRY_POINTS):
        p = _loaded(ep, {p.name for p in out})
        if p is not None:
            out.append(p)
    return tuple(out)


def _loaded(ep, taken: set[str]) -> Probe | None:
    """The probe of one entry point, checked; a broken one is a warning, never the end of a command."""
    from .errors import warn

    where = f"probe {ep.name!r} of package {getattr(ep.dist, 'name', '?')} ({ep.value})"
    if ep.name in taken:
        warn(f"{where} left out: the name {ep.name!r} is taken")
        return None
    try:
        p = ep.load()
    except Exception as exc:   # another package's bug: say so and go on without it
        warn(f"{where} left out: it does not load ({type(exc).__name__}: {exc})")
        return None
    if not isinstance(p, Probe) or p.name != ep.name:
        warn(f"{where} left out: it is not a probe.registry.Probe named {ep.name!r}")
    elif p.reads not in READS or not callable(p.function):
        warn(f"{where} left out: reads={p.reads!r} is not one of {', '.join(READS)}, or it has no function")
    else:
        return p
    return None


@functools.cache
def parameters(fn: Callable) -> Mapping[str, inspect.Parameter]:
    """The parameters of a probe's function, by name (its signature, read once per function)."""
    return inspect.signature(fn).parameters


def call(fn: Callable, path, /, **options) -> list:
    """``fn(path, **options)`` with only the options ``fn`` declares: the toolkit passes every probe what
    it has for probes in general (``max_memory``, ``allow_nonfinite``, ``tokens``, ``progress``, a batch's
    options), and a probe of another package need not take them all; a function with ``**kwargs`` gets
    every one. The one place that matches options to a probe's parameters (its command, batch, report)."""
    params = parameters(fn)
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        options = {k: v for k, v in options.items() if k in params}
    return fn(path, **options)


def get(name: str) -> Probe:
    """The probe called ``name`` (KeyError if there is none)."""
    for p in probes():
        if p.name == name:
            return p
    raise KeyError(name)


def names(where: str | None = None, reads: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """Names of the probes of ``where`` ("batch", "report", "sweeps", "command": its own CLI command;
    None: all), optionally only those that read one of ``reads``, in declaration order."""
    return tuple(p.name for p in probes()
                 if (p.command == "" if where == "command" else where is None or getattr(p, where))
                 and (reads is None or p.reads in reads))


def examples(command: str) -> tuple[str, ...]:
    """The example command lines of ``probe COMMAND --help``: those of every probe the command reaches
    (``rank``: rank's and rank --minima's), in declaration order."""
    return tuple(x for p in probes() if p.command is not None and (p.command or p.name).split()[0] == command
                 for x in (p.example, *p.examples) if x)


def metric_known(name: str, metric: str) -> bool:
    """Whether ``metric`` (``mean_offdiag``, ``by_distance[3]``: the part before ``[`` counts) is one
    of probe ``name``'s summary metrics."""
    base = metric.split("[", 1)[0]
    return any(re.fullmatch(re.escape(m).replace(r"\{N\}", r"\d+"), base) for m in get(name).metrics)


def default_tokens(name: str) -> str | None:
    """The selection probe ``name`` analyses when no tokens or words are given (None: the API function's
    own, every row or every stored group, or no such probe)."""
    tokens = next((p.tokens for p in probes() if p.name == name), None)
    return None if tokens in (EVERY_ROW, EVERY_GROUP) else tokens


def reference() -> str:
    """The probes' reference page (docs/probes.md), made from :func:`probes`."""
    reads = {WEIGHTS: "weights: a snapshot file or any checkpoint",
             ACTIVATIONS: "a forward pass: a snapshot file, or a checkpoint with --text",
             SNAPSHOT: "a snapshot file written by probe-train"}
    out = ["# Probes", "",
           "Made from `probe/probes/` (`python -c \"import probe.registry as r; print(r.reference(), end='')\" "
           "> docs/probes.md`; `tests/test_registry.py` checks it is current). The papers named below: "
           "[the papers](reference/papers.md); the symbols: [notation](reference/notation.md).", ""]
    for p in probes():
        where = [w for w, on in (("batch", p.batch), ("report", p.report), ("sweep-summary", p.sweeps)) if on]
        figure = ("its chart of one step, and of several" if p.charts else
                  "its chart of one step; of several, the trajectory of its summary numbers" if p.chart
                  else "the trajectory of its summary numbers")
        out += [f"## {p.name}", "", p.help, "",
                f"- reads: {reads[p.reads]}",
                f"- command: `probe {p.command or p.name}`" if p.command is not None else "- command: none",
                f"- example: `{p.example}`",
                f"- default tokens: {p.tokens}" if p.tokens is not None else None,
                f"- past NaN or inf, with --allow-nonfinite: {p.nonfinite}" if p.nonfinite else None,
                f"- result: `probe.analyses.{p.result}`",
                f"- figure (--plot): {figure}",
                f"- metrics: {', '.join(f'`{m}`' for m in p.metrics)}",
                f"- also in: {', '.join(where) or 'the command alone'}", ""]
    return "\n".join(x for x in out if x is not None)
