"""A probe from another package: declared through the entry point group ``gamma_probe.probes``, installed
with pip (into a folder of its own, put on the path of the processes that use it), it is a command, a
batch probe, a report section, a sweep-summary metric and ``probe.NAME``, with nothing edited here.

The package is the one docs/how-to/plugins.md teaches (its two blocks, written out by the test), and the
commands are the page's."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

PAGE = ROOT / "docs" / "how-to" / "plugins.md"


def _block(title: str) -> str:
    """The page's code block titled ``title``."""
    from docpages import blocks

    return next(b.body for b in blocks(PAGE) if b.title == title)


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    """The environment of a process that has the package installed (pip install --target)."""
    src = tmp_path_factory.mktemp("rownorm")
    (src / "pyproject.toml").write_text(_block("pyproject.toml"))
    (src / "rownorm_probe.py").write_text(_block("rownorm_probe.py"))
    site = tmp_path_factory.mktemp("site")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(src)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    return {**os.environ, "PYTHONPATH": str(site)}


def test_it_is_a_command_with_its_options_and_examples(plugin_env, tiny_run):
    listed = run_cli("probe", "--help", env=plugin_env)
    assert "rownorm" in listed.stdout and "Mean norm of token vectors" in listed.stdout
    helped = " ".join(run_cli("probe", "rownorm", "--help", env=plugin_env).stdout.split())
    assert "--tokens" in helped and "[default: reasoning]" in helped and "probe rownorm run.h5 --step all" in helped
    assert "--power FLOAT The p of the p-norm. [default: 2.0]" in helped   # a parameter of its own: its docstring
    from docpages import blocks, check_output

    shown = next(b.output for b in blocks(PAGE) if b.body.strip() == "probe rownorm run.h5 --step all")
    assert check_output(shown, run_cli("probe", "rownorm", tiny_run, "--step", "all", env=plugin_env).stdout)
    res = run_cli("probe", "rownorm", tiny_run, "--step", "all", "--format", "json", env=plugin_env)
    assert res.returncode == 0, res.stderr
    means = [r["mean"] for r in json.loads(res.stdout)["results"]]
    assert len(means) > 1 and all(m > 0 for m in means)
    assert "rownorm" not in run_cli("probe", "--help").stdout   # not installed here


def test_it_is_in_batch_the_report_and_sweep_summary(plugin_env, tiny_run, tmp_path):
    table = run_cli("probe", "batch", tiny_run, "--probe", "rownorm", "--probe", "similarity", "--format", "csv",
                    env=plugin_env)
    assert table.returncode == 0, table.stderr
    assert any(",rownorm,,mean," in line for line in table.stdout.splitlines())
    page = tmp_path / "page.html"
    rep = run_cli("probe", "report", tiny_run, "--probe", "rownorm", "-o", page, env=plugin_env)
    assert rep.returncode == 0, rep.stderr
    assert "Mean norm of token vectors" in page.read_text()
    sweep = tmp_path / "sweep"
    made = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "seed=0:2", "--grid", "steps=20",
                   "--out", sweep, env=plugin_env)
    assert made.returncode == 0, made.stderr
    summary = run_cli("probe", "sweep-summary", sweep, "--metric", "rownorm:mean", "--format", "csv", env=plugin_env)
    assert summary.returncode == 0, summary.stderr
    assert "rownorm:mean" in summary.stdout


def test_it_is_in_the_python_api(plugin_env, tiny_run):
    code = ("import probe; r = probe.rownorm(%r); print('rownorm' in probe.__all__, "
            "probe.api.probe_function('rownorm') is probe.rownorm, r[0].mean > 0)" % str(tiny_run))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=plugin_env, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "True"]


def test_a_broken_plugin_is_a_warning_not_the_end(tmp_path, tiny_run):
    site = tmp_path / "site"
    (site / "broken_probe-0.1.dist-info").mkdir(parents=True)
    (site / "broken_probe-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-probe\n"
                                                                  "Version: 0.1\n")
    (site / "broken_probe-0.1.dist-info" / "entry_points.txt").write_text(
        "[gamma_probe.probes]\nbroken = broken_probe:PROBE\npca = probe.probes.pca:PROBE\n")
    (site / "broken_probe.py").write_text("raise RuntimeError('this package is broken')\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = run_cli("probe", "similarity", tiny_run, env=env)
    assert res.returncode == 0
    assert "probe 'broken' of package broken-probe" in res.stderr and "does not load" in res.stderr
    assert "probe 'pca' of package broken-probe" in res.stderr and "the name 'pca' is taken" in res.stderr
    assert "Traceback" not in res.stderr
