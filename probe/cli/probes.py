"""The probe commands and ``probe batch``, built from the probes' declarations (:mod:`probe.registry`).

``probe NAME FILE [options]`` calls the probe's function ``fn(FILE, **options)`` and renders the
results: the options are the function's parameters, each offered as :data:`probe.params.PARAMS` declares
it with the function's own default, ``--step`` and ``--allow-nonfinite`` last, then ``--format``,
``--plot`` and ``--wide``. A probe declared as ``command="OTHER --FLAG"`` is a flag of OTHER's command
(``probe rank --minima``). A parameter ``progress`` becomes status on stderr (:func:`status_line`).
Every help ends with the probe's examples.
"""
from __future__ import annotations

import contextlib
import sys

import click

from .. import registry
from ..printable import terminal
from ..errors import ProbeError
from ..params import PARAMS
from .options import FORMAT_HELP, FORMATS, LAST, PLOT, SNAPSHOT_FILE, SOURCE, WIDE, click_option, converted, help_of

NOT_OFFERED = ("path", "progress")   # the FILE argument; the progress line


def with_examples(help: str, examples, arguments: dict[str, str] | None = None) -> str:
    """``help``, a paragraph per argument (``FILE: ...``) and an Examples block, its lines kept as written
    (``\\b``: Click does not rewrap the paragraph it starts)."""
    args = "".join(f"\n\n{name}: {text}" for name, text in (arguments or {}).items())
    return f"{help}{args}\n\n\b\nExamples:\n" + "\n".join(f"  {x}" for x in examples)


def offered(probe: registry.Probe) -> list[str]:
    """The API parameters of ``probe`` the command line offers as options, in command order."""
    sig = registry.parameters(probe.function)
    names = [n for n in sig if n not in NOT_OFFERED and n not in probe.api_only and n != "other"]
    return [n for n in names if n not in LAST] + [n for n in LAST if n in names]


def _file_help(probe: registry.Probe) -> str:
    if "path" in probe.options:
        return probe.options["path"]
    return {registry.WEIGHTS: SOURCE, registry.SNAPSHOT: SNAPSHOT_FILE}.get(
        probe.reads, "snapshot file, or (with --text) a Hugging Face model folder or a hub model "
                     "hf:ORG/NAME[@REVISION]")


def command(probe: registry.Probe) -> click.Command:
    """``probe NAME``: the command of ``probe``, and the flags of the probes declared on it."""
    sig = registry.parameters(probe.function)
    arguments = {"FILE": _file_help(probe)}
    params: list[click.Parameter] = [click.Argument(["file"])]
    if "other" in sig:
        params.append(click.Argument(["other"], required=False))
        arguments["OTHER"] = probe.options.get("other", "a second file")
    flagged = [p for p in registry.probes() if p.command and p.command.split()[0] == probe.name]
    params += [click.Option([p.command.split()[1]], is_flag=True, default=False, help=p.help) for p in flagged]
    names = offered(probe)
    for p in flagged:   # their options too, after the command's own (before the LAST ones it has)
        last = sum(n in LAST for n in names)
        names[len(names) - last:len(names) - last] = [n for n in offered(p) if n not in names]
    params += [click_option(n, _default(n, probe, flagged), help_of(n, probe)) for n in names]
    params += [click.Option(["--format", "-f", "fmt"], type=click.Choice(FORMATS), default="table", show_default=True,
                            help=FORMAT_HELP),
               click.Option(["--plot"], default=None, help=PLOT),
               click.Option(["--wide"], is_flag=True, default=False, help=WIDE)]

    def run(file, fmt, plot, wide, other=None, **options):
        flags = {p.name: options.pop(p.command.split()[1].lstrip("-").replace("-", "_")) for p in flagged}
        chosen = next((p for p in flagged if flags[p.name]), probe)
        if chosen is not probe:   # a flag's probe: its own default step unless one was given
            ctx = click.get_current_context()
            if ctx.get_parameter_source("step") is click.core.ParameterSource.DEFAULT:
                options["step"] = registry.parameters(chosen.function)["step"].default
        options = converted(options)   # a flag's probe gets its own options alone: registry.call
        if other is not None:
            options["other"] = other
        run_probe(chosen, file, options, fmt, plot, wide)

    return click.Command(probe.name, params=params, callback=run, short_help=probe.title,
                         help=with_examples(probe.help, registry.examples(probe.name), arguments))


def _default(name: str, probe: registry.Probe, flagged) -> object:
    return next(registry.parameters(p.function)[name].default for p in (probe, *flagged)
                if name in registry.parameters(p.function))


def run_probe(probe: registry.Probe, file: str, options: dict, fmt: str, plot: str | None, wide: bool) -> None:
    """Run ``probe`` on ``file``, then its figure (``plot``) and its results on stdout (``wide``: tables
    at full width)."""
    from .. import render

    if plot:
        from ..chart.style import check_writable

        check_writable(plot)
    fn = probe.function
    if "progress" in registry.parameters(fn):
        with status_line(probe.name) as tick:
            results = registry.call(fn, file, progress=tick, **options)
    else:
        results = registry.call(fn, file, **options)
    if plot:  # the figure first: if it cannot be written, the error comes alone
        from ..chart.mpl import plot_results

        try:
            plot_results(probe.name, results, plot, title=f"{file}: {probe.name}")
        except OSError as exc:
            raise ProbeError(f"cannot write plot {plot}: {exc.strerror or exc}") from None
        print(terminal(f"wrote {plot}"), file=sys.stderr)
    render.emit(results, fmt, file, probe.name, wide)


# --- probe batch -----------------------------------------------------------------------------------

def batch_options() -> list[click.Option]:
    """The options ``probe batch`` offers for its probes: every option of the batch probes, in the order
    first met, ``--step`` and ``--allow-nonfinite`` last. An option that only some probes take says which
    (``align: ...``) with the help of the first, unless its declaration has a text for batch."""
    probes = [registry.get(n) for n in registry.names("batch")]
    takers: dict[str, list[registry.Probe]] = {}
    for p in probes:
        for n in offered(p):
            takers.setdefault(n, []).append(p)
    by: dict[str, list[str]] = {}
    for p in probes:
        if p.tokens:
            by.setdefault(p.tokens, []).append(p.name)
    own = {n: p.batch for n, p in PARAMS.items() if p.batch}
    own["tokens"] = (f"{help_of('tokens')} [default: each probe's own: "
                     + "; ".join(f"{', '.join(n)}: {t}" for t, n in by.items()) + "]")
    out = []
    for n in [n for n in takers if n not in LAST] + [n for n in LAST if n in takers]:
        first = takers[n][0]
        default = registry.parameters(first.function)[n].default
        if own.get(n):
            text = own[n]
        elif len(takers[n]) == len(probes):
            text = help_of(n)
        else:
            text = f"{', '.join(p.name for p in takers[n])}: {help_of(n, first)}"
        out.append(click_option(n, default, text))
    return out


QUIET_S = 2.0   # work shorter than this says nothing off a terminal (a fast command keeps stderr clean)
EVERY_S = 2.0   # then at most one status line per this many seconds


@contextlib.contextmanager
def status_line(what: str, each: bool = False):
    """What a command is doing, on stderr while it works; yields a ``tick(label)`` callable.

    On a terminal: one rich line (a spinner and the latest label) that goes away when the work ends.
    Elsewhere (a log file, a pipe, a notebook cell, CI) a terminal line would be noise, and silence
    looks like a hang: plain lines ``WHAT: LABEL``. With ``each`` every label gets its line (a few
    coarse stages, such as the report's sections); else only once the work has taken ``QUIET_S``
    seconds, then at most one per ``EVERY_S`` (per-snapshot or per-layer ticks: a fast command
    prints nothing, a long one says where it is)."""
    if not sys.stderr.isatty():
        import time

        start = last = time.monotonic()

        def line(label) -> None:
            nonlocal last
            now = time.monotonic()
            if each or (now - start >= QUIET_S and now - last >= EVERY_S):
                print(terminal(f"{what}: {label}"), file=sys.stderr, flush=True)
                last = now
        yield line
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    # a label names runs and files: its control characters escaped, and no rich markup in it (a
    # file named 'run[/].h5' would be a MarkupError)
    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), console=Console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task(what)
        yield lambda label: bar.update(task, description=terminal(f"{what}: {label}"))
