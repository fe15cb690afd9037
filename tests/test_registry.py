"""Every probe is declared once (its module under probe/probes/, found by probe/registry.py), and every
probe is reachable from the API, the CLI, batch, the report, sweep-summary and the docs."""
import functools
import inspect
import re

import pytest
import probe
from conftest import ROOT, cli_commands, run_cli
from probe import api, registry, sweeps
from probe.params import PARAMS
from probe.cli.probes import offered
from probe.errors import ProbeError

SPECS = registry.probes()
IDS = [s.name for s in SPECS]
COMMANDS = cli_commands()


def test_each_probe_is_declared_once_with_what_it_reads():
    assert len(set(IDS)) == len(IDS)
    assert all(s.reads in (registry.WEIGHTS, registry.ACTIVATIONS, registry.SNAPSHOT) for s in SPECS)
    assert all(s.style in ("summary", "detail", "steps") for s in SPECS)
    assert registry.default_tokens("similarity") == "reasoning" and registry.default_tokens("condense") is None


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_reachable_from_the_api(spec):
    fn = api.probe_function(spec.name)
    assert fn is getattr(api, spec.name) is getattr(probe, spec.name)
    assert spec.name in api.__all__ and spec.name in probe.__all__
    params = inspect.signature(fn).parameters
    assert list(params)[0] == "path" and {"step", "allow_nonfinite"} <= set(params)
    assert fn.__doc__   # a real function, not a wrapper: in the probe's own module
    assert fn.__module__ == f"probe.probes.{spec.name}"
    assert set(spec.api_only) <= set(params)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_reachable_from_the_cli(spec):
    name, *flags = (spec.command or spec.name).split()
    cmd = COMMANDS[name]
    assert set(flags) <= {o for p in cmd.params for o in p.opts}
    if spec.command == "":   # derived: every API parameter offered, with its option and the API's default
        assert cmd.help.startswith(spec.help)   # then its examples (tests/test_cli_help.py)
        sig = inspect.signature(api.probe_function(spec.name))
        flags = {p.command.split()[1].lstrip("-").replace("-", "_") for p in SPECS
                 if p.command and p.command.split()[0] == spec.name}
        got = {p.name: p.default for p in cmd.params
               if p.name not in ("file", "other", "fmt", "plot", "wide", "help", *flags)}
        want = {n: sig.parameters[n].default for n in offered(spec)}
        for p in SPECS:   # a flag's probe adds the options its command lacks (regime --widths: --tolerance)
            if p.command and p.command.split()[0] == spec.name:
                own = inspect.signature(api.probe_function(p.name)).parameters
                want.update({n: own[n].default for n in offered(p) if n not in want})
        assert got == want and set(got) <= set(PARAMS)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_reachable_from_batch_and_its_help(spec):
    assert (spec.name in registry.names("batch")) == spec.batch
    for command, listed in (("batch", spec.batch), ("report", spec.report)):
        probes_help = next(p.help for p in COMMANDS[command].params if p.name == "probes")
        assert bool(re.search(rf"\b{spec.name}\b", probes_help)) == listed, command


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_reachable_from_the_report(spec, tmp_path):
    from probe.report import Report

    if spec.report:
        assert spec.name in Report(["unused.h5"], probes=[spec.name]).probes
    else:
        with pytest.raises(ProbeError, match="unknown probe"):
            Report(["unused.h5"], probes=[spec.name])


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_reachable_from_sweep_summary(spec):
    call = f"{spec.name}()"
    if spec.sweeps:
        assert sweeps._probe_call(f"{call}:x", call, api.probe_function) == (spec.name, {})
    else:
        with pytest.raises(ProbeError, match="unknown probe"):
            sweeps._probe_call(f"{call}:x", call, api.probe_function)


PROBES_PAGE = ROOT / "docs" / "how-to" / "probes.md"
TABLE_HEAD = "| command | what it reports (paper) | example |"


@functools.lru_cache(maxsize=None)
def _probe_table_rows() -> dict[str, str]:
    """The rows of the probe table ending docs/how-to/probes.md ("Use each probe"), by command."""
    text = PROBES_PAGE.read_text()
    assert TABLE_HEAD in text, f"{PROBES_PAGE.relative_to(ROOT)} has no probe table ({TABLE_HEAD})"
    table = text[text.rindex(TABLE_HEAD):].split("\n\n", 1)[0]
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", table, re.M)}


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_reachable_from_the_docs(spec):
    """The probe table of docs/how-to/probes.md has a row for the command that reaches the probe, with its
    flag and an example, and the page has a section for it."""
    name, *flags = (spec.command or spec.name).split()
    rows = _probe_table_rows()
    assert name in rows, f"docs/how-to/probes.md's probe table has no row for {name}"
    assert all(f"`{f}" in rows[name] for f in flags)
    assert f"`probe {name} " in rows[name]   # with an example
    heading = f"## {spec.command or spec.name}"
    assert re.search(rf"^{re.escape(heading)}$", PROBES_PAGE.read_text(), re.M), \
        f"docs/how-to/probes.md has no section '{heading}'"


def test_the_command_list_is_the_registry():
    out = run_cli("probe", "--help").stdout
    listed = re.findall(r"^  (\S+) ", out, re.M)
    own = [n for n in dict.fromkeys((s.command or s.name).split()[0] for s in SPECS if s.command is not None)]
    assert [n for n in listed if n in own] == own


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_the_declared_result_type_is_what_the_api_returns(spec):
    module, cls = spec.result.rsplit(".", 1)
    import importlib

    assert isinstance(getattr(importlib.import_module(f"probe.analyses.{module}"), cls), type)
    assert inspect.signature(api.probe_function(spec.name)).return_annotation == f"list[{cls}]"


ON_TINY_RUN = {"similarity": {"tokens": "reasoning"}, "cohesion": {}, "pca": {}, "align": {}, "condense": {},
               "theory": {}, "ood": {}, "attention": {}, "bias": {}, "spectrum": {}, "rank": {}, "dynamics": {"step": "latest"},
               "rank_trajectory": {}}


@pytest.mark.parametrize("name", list(ON_TINY_RUN))
def test_the_declared_metrics_are_the_summary_s(tiny_run, name):
    """What sweep-summary accepts as PROBE:NAME before probing (registry.metrics) is what the probe
    reports, on a real run."""
    spec = registry.get(name)
    results = api.probe_function(name)(tiny_run, **{"step": "all", **ON_TINY_RUN[name]})
    assert type(results[-1]).__name__ == spec.result.rsplit(".", 1)[1]
    keys = {k for r in results for k in r.summary()}
    assert keys and all(registry.metric_known(name, k) for k in keys), \
        sorted(k for k in keys if not registry.metric_known(name, k))
    bases = {k.split("[", 1)[0] for k in keys}
    assert all(any(re.fullmatch(m.replace("{N}", r"\d+"), b) for b in bases) or m in ("eig2", "largest_neuron_group",
                                                                                       "neuron_groups")
               for m in spec.metrics), (spec.metrics, bases)


def test_the_probes_reference_page_is_made_from_the_registry():
    assert (ROOT / "docs" / "probes.md").read_text() == registry.reference(), \
        "regenerate: python -c \"import probe.registry as r; print(r.reference(), end='')\" > docs/probes.md"


def test_sweep_summary_refuses_an_unknown_metric_before_probing():
    with pytest.raises(ProbeError, match="probe similarity has no metric 'nonsense'"):
        sweeps._run_value("unused.h5", None, "similarity:nonsense", 0, {}, api.probe_function, "--metric")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_the_declared_hooks_take_a_result(spec):
    for hook, params in (("detail", 2), ("chart", 1), ("charts", 1), ("tables", 2)):
        fn = getattr(spec, hook)
        assert fn is None or len(inspect.signature(fn).parameters) == params, hook
