"""One declaration per CLI option: named like the API parameter it feeds, the same flags and default
in every command, and the default the API itself has (its help is about each command:
tests/test_cli_help.py)."""
import inspect

import pytest
import click

import probe.api as api
from conftest import cli_commands
from probe import registry

COMMANDS = cli_commands()
# flags that do not feed an API parameter of the same name
NOT_API = {"fmt": "--format", "all_": "--all", "list_": "--list", "probes": "--probe", "plot": "--plot",
           "out": "--out", "jobs": "--jobs", "scheduler": "--scheduler", "quick": "--quick", "tiny": "--tiny",
           "runs": "--runs", "examples": "--examples", "minima": "--minima", "widths": "--widths",
           "wide": "--wide"}
PROBES = tuple(s.name for s in registry.probes() if s.command in ("", s.name))   # the probes with a command


def _options(cmd):
    return [p for p in cmd.params if isinstance(p, click.Option) and p.name != "help"]


def _long(opt) -> str:
    return max(opt.opts, key=len)


def test_every_flag_is_the_parameter_name():
    for name, cmd in COMMANDS.items():
        for opt in _options(cmd):
            want = NOT_API.get(opt.name, "--" + opt.name.replace("_", "-"))
            assert _long(opt) == want, f"probe {name}: {_long(opt)} feeds {opt.name}"


def test_same_flag_and_default_everywhere():
    seen = {}
    for name, cmd in COMMANDS.items():
        for opt in _options(cmd):
            got = (opt.default, tuple(sorted(opt.opts)))
            first = seen.setdefault(_long(opt), (name, got))
            assert got == first[1], f"{_long(opt)}: probe {name} says {got}, probe {first[0]} says {first[1]}"
    assert {"--step", "--format", "--tokens", "--words", "--words-file", "--layer", "--groups"} <= set(seen)


@pytest.mark.parametrize("probe", PROBES)
def test_cli_defaults_are_the_api_defaults(probe):
    sig = inspect.signature(getattr(api, probe)).parameters
    # the options a flag's probe adds to the command (regime --widths: --tolerance) are its API's
    flags = [p.name for p in registry.probes() if p.command and p.command.split()[0] == probe]
    theirs = {n for f in flags for n in inspect.signature(getattr(api, f)).parameters} - set(sig)
    opts = {o.name: o for o in _options(COMMANDS[probe]) if o.name not in NOT_API and o.name not in theirs}
    assert set(opts) <= set(sig), f"probe {probe} has options the API lacks: {set(opts) - set(sig)}"
    for n, o in opts.items():
        assert o.default == sig[n].default, f"probe {probe} --{n}: CLI {o.default!r}, API {sig[n].default!r}"
    # every tunable API parameter is reachable from the command line
    missing = {n for n, p in sig.items() if n not in ("path", "progress", *registry.get(probe).api_only)} - set(opts) \
        - {a.name for a in COMMANDS[probe].params if isinstance(a, click.Argument)}
    assert not missing, f"probe {probe}: API parameters without a flag: {missing}"


def test_batch_passes_every_probe_option_with_the_api_default():
    opts = {o.name: o for o in _options(COMMANDS["batch"]) if o.name not in NOT_API}
    for probe in registry.names("batch"):
        sig = inspect.signature(getattr(api, probe)).parameters
        for n, p in sig.items():
            if n in ("path", "progress", *registry.get(probe).api_only):
                continue
            assert n in opts, f"probe batch lacks --{n.replace('_', '-')} (taken by {probe})"
            assert opts[n].default == p.default, f"batch --{n}: {opts[n].default!r}, {probe} has {p.default!r}"


def test_words_wherever_tokens():
    for name, cmd in COMMANDS.items():
        flags = {_long(o) for o in _options(cmd)}
        if "--tokens" in flags:
            assert {"--words", "--words-file"} <= flags, name


def test_library_errors_name_the_parameter_and_the_cli_the_flag(tiny_run):
    from conftest import run_cli

    with pytest.raises(api.ProbeError) as exc:
        api.similarity(tiny_run, step="soon")
    assert "bad step 'soon'" in str(exc.value) and "--" not in str(exc.value)
    res = run_cli("probe", "similarity", tiny_run, "--step", "soon")
    assert "Error: bad --step 'soon'" in res.stderr
    with pytest.raises(api.ProbeError, match=r"^layer=7 out of range"):
        api.align(tiny_run, layer=7)
    assert "Error: --layer 7 out of range" in run_cli("probe", "align", tiny_run, "--layer", "7").stderr
    with pytest.raises(api.ProbeError, match=r"splits takes exactly two splits"):
        api.bias(tiny_run, ("mem",))
