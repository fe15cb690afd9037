"""The probe commands, derived from :mod:`probe.registry` and the API functions' signatures.

``probe NAME FILE [options]`` calls ``probe.api.NAME(FILE, **options)`` and renders the results: the
options are the API function's parameters, each offered as :data:`.options.OPTIONS` declares it (the
same flag and default in every command, its help about this command: :func:`.options.about`),
``--step`` and ``--allow-nonfinite`` last, then ``--format`` and ``--plot``. A parameter ``progress``
becomes status on stderr (:class:`progress`). The help ends with the registry's examples.

The signature of a command is built when the command is (only the command that runs is built:
:mod:`._lean`), so ``probe --help`` imports neither the API nor numpy.
"""
from __future__ import annotations

import inspect
import sys
from typing import Optional

from .. import registry
from .._text import terminal
from ..errors import ProbeError
from .options import FORMAT, LAST, OPTIONS, WIDE, File, Fmt, Format, Plot, Source, Wide, about, own_help

NOT_OFFERED = ("path", "progress")   # the FILE argument; the progress line


def offered(spec: registry.Probe, signature: inspect.Signature) -> list[str]:
    """The API parameters of ``spec`` the command line offers, in command order."""
    names = [n for n in signature.parameters if n not in NOT_OFFERED and n not in spec.api_only]
    return [n for n in names if n not in LAST] + [n for n in LAST if n in names]


class LazyCallback:
    """A command callback whose signature (what Typer reads to build the command) is made on first
    use by :meth:`parameters`; calling it calls :meth:`run` with the parsed options."""

    def __init__(self, name: str, help: str):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = help
        self._signature: Optional[inspect.Signature] = None

    def parameters(self) -> list[inspect.Parameter]:
        raise NotImplementedError

    @property
    def __signature__(self) -> inspect.Signature:
        if self._signature is None:
            self._signature = inspect.Signature(self.parameters())
        return self._signature

    @property
    def __annotations__(self) -> dict:
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}

    def __call__(self, **options) -> None:
        self.run(**options)


def parameter(name: str, annotation, default=inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation, default=default)


def with_examples(help: str, examples) -> str:
    """``help`` with an Examples block, its lines kept as written (``\b``: Click does not rewrap the
    paragraph it starts)."""
    return f"{help}\n\n\b\nExamples:\n" + "\n".join(f"  {x}" for x in examples)


def option_params(names: list[str], api_params, command: str, said=None) -> list[inspect.Parameter]:
    """The command parameters of API parameters ``names`` (checked: an option for each, the API's default),
    their help about ``command`` (``said(name, annotation)``: the annotation to offer instead)."""
    said = said or (lambda name, annotation: about(annotation, command))
    out = []
    for name in names:
        if name not in OPTIONS:
            raise TypeError(f"API parameter {name!r} has no option in probe.cli.options.OPTIONS (add one, or "
                            "list it in the registry's api_only)")
        opt = OPTIONS[name]
        if opt.default != api_params[name].default:
            raise TypeError(f"API parameter {name}={api_params[name].default!r}, but its option's default is "
                            f"{opt.default!r}")
        out.append(parameter(name, said(name, opt.annotation), opt.default))
    return out


def converted(options: dict, absolute: bool = False) -> dict:
    """Option values as the API takes them (with ``absolute``, file names made absolute)."""
    import os

    out = {}
    for n, v in options.items():
        opt = OPTIONS[n]
        v = opt.convert(v) if opt.convert else v
        out[n] = os.path.abspath(v) if (absolute and opt.path and v) else v
    return out


class ProbeCommand(LazyCallback):
    """The callback of ``probe NAME`` for a registered probe."""

    def __init__(self, spec: registry.Probe):
        super().__init__(spec.name, with_examples(spec.help, registry.examples(spec.name)))
        self.spec = spec

    def _api(self):
        from .. import api

        return api.probe_function(self.spec.name)

    def parameters(self) -> list[inspect.Parameter]:
        sig, name = inspect.signature(self._api()), self.spec.name
        return [parameter("file", about(Source if self.spec.applies_to_checkpoints else File, name)),
                *option_params(offered(self.spec, sig), sig.parameters, name),
                parameter("fmt", about(Fmt, name), FORMAT), parameter("plot", about(Plot, name), None),
                parameter("wide", about(Wide, name), WIDE)]

    def run(self, file: str, fmt: Format = FORMAT, plot: Optional[str] = None, wide: bool = WIDE,
            **options) -> None:
        if plot:
            from ..plotting import check_writable

            check_writable(plot)
        fn = self._api()
        if "progress" in inspect.signature(fn).parameters:
            with progress(self.spec.name) as tick:
                results = fn(file, progress=tick, **converted(options))
        else:
            results = fn(file, **converted(options))
        show(results, fmt, file, self.spec.name, plot, wide)


def batch_options() -> list[inspect.Parameter]:
    """The parameters ``probe batch`` offers for its probes: every option of the batch probes, in the
    order first met, ``--step`` and ``--allow-nonfinite`` left to the caller. An option that only some
    probes take says which (``align: ...``) with the help of the first, unless it declares batch's own."""
    from .. import api

    seen: dict[str, inspect.Parameter] = {}
    takers: dict[str, list[str]] = {}
    probes = registry.names("batch")
    for name in probes:
        sig = inspect.signature(api.probe_function(name))
        for n in offered(registry.get(name), sig):
            if n not in LAST:
                seen.setdefault(n, sig.parameters[n])
                takers.setdefault(n, []).append(name)

    def said(name, annotation):
        if len(takers[name]) == len(probes) or own_help(annotation, "batch"):
            return about(annotation, "batch")
        return about(annotation, takers[name][0], prefix=f"{', '.join(takers[name])}: ")

    return option_params(list(seen), seen, "batch", said)


def show(results, fmt: Format, file: str, probe: str, plot: Optional[str], wide: bool = WIDE) -> None:
    """The figure (``plot``), then the results on stdout (``wide``: tables at full width)."""
    from . import render

    if plot:  # the figure first: if it cannot be written, the error comes alone
        from .. import plotting

        try:
            plotting.plot_results(probe, results, plot, title=f"{file}: {probe}")
        except OSError as exc:
            raise ProbeError(f"cannot write plot {plot}: {exc.strerror or exc}") from None
        print(terminal(f"wrote {plot}"), file=sys.stderr)
    render.emit(results, fmt.value, file, probe, wide)


QUIET_S = 2.0   # work shorter than this says nothing off a terminal (a fast command keeps stderr clean)
EVERY_S = 2.0   # then at most one status line per this many seconds


class progress:
    """What a command is doing, on stderr while it works; yields a ``tick(label)`` callable.

    On a terminal: one rich line (a spinner and the latest label) that goes away when the work ends.
    Elsewhere (a log file, a pipe, a notebook cell, CI) a terminal line would be noise, and silence
    looks like a hang: plain lines ``WHAT: LABEL``. With ``each`` every label gets its line (a few
    coarse stages, such as the report's sections); else only once the work has taken ``QUIET_S``
    seconds, then at most one per ``EVERY_S`` (per-snapshot or per-layer ticks: a fast command
    prints nothing, a long one says where it is)."""

    def __init__(self, what: str, each: bool = False):
        self.what, self.each = what, each

    def __enter__(self):
        if not sys.stderr.isatty():
            import time

            start = last = time.monotonic()

            def line(label) -> None:
                nonlocal last
                now = time.monotonic()
                if self.each or (now - start >= QUIET_S and now - last >= EVERY_S):
                    print(terminal(f"{self.what}: {label}"), file=sys.stderr, flush=True)
                    last = now
            return line
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        # a label names runs and files: its control characters escaped, and no rich markup in it (a
        # file named 'run[/].h5' would be a MarkupError)
        self._p = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False),
                           console=Console(stderr=True), transient=True)
        self._p.__enter__()
        task = self._p.add_task(self.what)
        return lambda label: self._p.update(task, description=terminal(f"{self.what}: {label}"))

    def __exit__(self, *exc):
        if hasattr(self, "_p"):
            self._p.__exit__(*exc)
