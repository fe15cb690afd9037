"""The probe commands, derived from :mod:`probe.registry` and the API functions' signatures.

``probe NAME FILE [options]`` calls ``probe.api.NAME(FILE, **options)`` and renders the results: the
options are the API function's parameters, each offered as :data:`.options.OPTIONS` declares it (the
same flag, default and help in every command), ``--step`` and ``--allow-nonfinite`` last, then
``--format`` and ``--plot``. A parameter ``progress`` becomes a progress line on a terminal.

The signature of a command is built when the command is (only the command that runs is built:
:mod:`._lean`), so ``probe --help`` imports neither the API nor numpy.
"""
from __future__ import annotations

import inspect
import sys
from typing import Optional

from .. import registry
from ..errors import ProbeError
from .options import FORMAT, LAST, OPTIONS, File, Fmt, Format, Plot, Source

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


def option_params(names: list[str], api_params) -> list[inspect.Parameter]:
    """The command parameters of API parameters ``names`` (checked: an option for each, the API's default)."""
    out = []
    for name in names:
        if name not in OPTIONS:
            raise TypeError(f"API parameter {name!r} has no option in probe.cli.options.OPTIONS (add one, or "
                            "list it in the registry's api_only)")
        opt = OPTIONS[name]
        if opt.default != api_params[name].default:
            raise TypeError(f"API parameter {name}={api_params[name].default!r}, but its option's default is "
                            f"{opt.default!r}")
        out.append(parameter(name, opt.annotation, opt.default))
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
        super().__init__(spec.name, spec.help)
        self.spec = spec

    def _api(self):
        from .. import api

        return api.probe_function(self.spec.name)

    def parameters(self) -> list[inspect.Parameter]:
        sig = inspect.signature(self._api())
        return [parameter("file", Source if self.spec.applies_to_checkpoints else File),
                *option_params(offered(self.spec, sig), sig.parameters),
                parameter("fmt", Fmt, FORMAT), parameter("plot", Plot, None)]

    def run(self, file: str, fmt: Format = FORMAT, plot: Optional[str] = None, **options) -> None:
        if plot:
            from ..plotting import check_writable

            check_writable(plot)
        fn = self._api()
        if "progress" in inspect.signature(fn).parameters:
            with progress(self.spec.name) as tick:
                results = fn(file, progress=tick, **converted(options))
        else:
            results = fn(file, **converted(options))
        show(results, fmt, file, self.spec.name, plot)


def batch_options() -> list[str]:
    """The API parameters ``probe batch`` offers: every option of the batch probes, in the order
    first met, ``--step`` and ``--allow-nonfinite`` left to the caller."""
    from .. import api

    seen: dict[str, inspect.Parameter] = {}
    for name in registry.names("batch"):
        sig = inspect.signature(api.probe_function(name))
        for n in offered(registry.get(name), sig):
            if n not in LAST:
                seen.setdefault(n, sig.parameters[n])
    return option_params(list(seen), seen)


def show(results, fmt: Format, file: str, probe: str, plot: Optional[str]) -> None:
    """The figure (``plot``), then the results on stdout."""
    from . import render

    if plot:  # the figure first: if it cannot be written, the error comes alone
        from .. import plotting

        try:
            plotting.plot_results(probe, results, plot, title=f"{file}: {probe}")
        except OSError as exc:
            raise ProbeError(f"cannot write plot {plot}: {exc.strerror or exc}") from None
        print(f"wrote {plot}", file=sys.stderr)
    render.emit(results, fmt.value, file, probe)


class progress:
    """A rich progress line on stderr (only when stderr is a terminal); yields a tick(label) callable."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        if not sys.stderr.isatty():
            return lambda label: None
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        self._p = Progress(SpinnerColumn(), TextColumn("{task.description}"), console=Console(stderr=True),
                           transient=True)
        self._p.__enter__()
        task = self._p.add_task(self.what)
        return lambda label: self._p.update(task, description=f"{self.what}: {label}")

    def __exit__(self, *exc):
        if hasattr(self, "_p"):
            self._p.__exit__(*exc)
