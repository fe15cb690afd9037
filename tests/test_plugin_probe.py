"""A probe from another package: declared through the entry point group ``gamma_probe.probes``, installed
with pip (into a folder of its own, put on the path of the processes that use it), it is a command, a
batch probe, a report section, a sweep-summary metric and ``probe.NAME``, with nothing edited here, and
is held to the built-in probes' contract: each surface gives the numbers numpy gives from the file, a
probe that raises fails ``probe report`` (issue 48, point 4).

The package is the one docs/how-to/plugins.md teaches (its two blocks, written out by the test), and the
commands are the page's."""
import csv
import io
import json
import os
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli, without_status

PAGE = ROOT / "docs" / "how-to" / "plugins.md"


def _block(title: str) -> str:
    """The page's code block titled ``title``."""
    from docpages import blocks

    return next(b.body for b in blocks(PAGE) if b.title == title)


def _rownorm(path) -> dict[int, float]:
    """rownorm's number computed here from the file with h5py and numpy, step -> the mean L2 norm of the
    'reasoning' group's rows of the stored token embedding (the probe's default tokens)."""
    with h5py.File(path, "r") as f:
        ids = f["run/token_groups/reasoning"][...]
        emb = f["snapshots/weights/token_embedding"]
        return {int(s): float(np.linalg.norm(emb[i][ids].astype(np.float64), axis=1).mean())
                for i, s in enumerate(f["snapshots/step"][...])}


def _site(folder, name: str, entry_points: str, module: str) -> str:
    """A package installed as pip would leave it (a dist-info folder and its module), without pip."""
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[gamma_probe.probes]\n{entry_points}\n")
    (folder / f"{name}.py").write_text(module)
    return str(folder)


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
    assert "--words TEXT" in helped and "--words-file" in helped and "--max-memory" not in helped   # what it declares
    from docpages import blocks, check_output

    shown = next(b.output for b in blocks(PAGE) if b.body.strip() == "probe rownorm run.h5 --step all")
    table = run_cli("probe", "rownorm", tiny_run, "--step", "all", env=plugin_env)
    assert table.returncode == 0 and check_output(shown, table.stdout), table.stdout + table.stderr
    direct = _rownorm(tiny_run)
    rows = [ln.split() for ln in table.stdout.splitlines()[1:]]
    assert {int(s): float(v) for s, v in rows} == pytest.approx(direct, abs=5.1e-5)   # 4 decimals
    res = run_cli("probe", "rownorm", tiny_run, "--step", "all", "--format", "json", env=plugin_env)
    assert res.returncode == 0, res.stderr
    assert {r["step"]: r["mean"] for r in json.loads(res.stdout)["results"]} == pytest.approx(direct, rel=1e-6)
    # --words reaches token_vectors, which looks the words up: a synthetic run has no vocabulary
    words = run_cli("probe", "rownorm", tiny_run, "--words", "cat", env=plugin_env)
    assert words.returncode == 2 and words.stderr.startswith("Error: ") and len(words.stderr.splitlines()) == 1
    assert "--words cannot be looked up" in words.stderr, words.stderr
    assert "rownorm" not in run_cli("probe", "--help").stdout   # not installed here


def _page_numbers(page: str, table: str) -> dict[int, float]:
    """The 'mean' row of the report's numbers table ``table`` (data-name), step -> value."""
    found = re.search(rf"data-name='{re.escape(table)}'>(.*?)</table>", page, re.S)
    assert found, f"no table {table} in the page"
    steps = [int(s) for s in re.findall(r"<th>step (\d+)</th>", found.group(1))]
    row = re.search(r"<tr><td>mean</td>(.*?)</tr>", found.group(1)).group(1)
    return dict(zip(steps, map(float, re.findall(r"<td>([^<]*)</td>", row))))


def test_batch_and_the_report_give_its_numbers(plugin_env, tiny_run, tmp_path):
    direct = _rownorm(tiny_run)
    table = run_cli("probe", "batch", tiny_run, "--probe", "rownorm", "--probe", "similarity", "--step", "all",
                    "--format", "csv", env=plugin_env)
    assert table.returncode == 0, table.stderr
    got = {int(r["step"]): float(r["value"]) for r in csv.DictReader(io.StringIO(table.stdout))
           if r["probe"] == "rownorm" and r["metric"] == "mean"}
    assert got == pytest.approx(direct, rel=1e-6)
    # the report passes --max-memory to every probe that takes it; rownorm does not
    page = tmp_path / "page.html"
    rep = run_cli("probe", "report", tiny_run, "--probe", "rownorm", "--max-memory", "1GB", "-o", page,
                  env=plugin_env)
    assert rep.returncode == 0, rep.stderr
    assert without_status(rep.stderr).splitlines() == [f"wrote {page}: 1 run(s), 1 probes"], rep.stderr
    text = page.read_text()
    assert "Mean norm of token vectors" in text and "not applicable" not in text
    shown = _page_numbers(text, f"{tiny_run.name}-rownorm")
    assert len(shown) > 2 and shown == pytest.approx({s: direct[s] for s in shown}, rel=5e-4)   # 4 digits


def test_it_is_a_sweep_summary_metric(plugin_env, tmp_path):
    sweep = tmp_path / "sweep"
    made = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "seed=0:2", "--grid", "steps=20",
                   "--out", sweep, env=plugin_env)
    assert made.returncode == 0, made.stderr
    summary = run_cli("probe", "sweep-summary", sweep, "--metric", "rownorm:mean", "--format", "json", env=plugin_env)
    assert summary.returncode == 0, summary.stderr
    (cell,) = json.loads(summary.stdout)["results"]
    finals = [_rownorm(sweep / run)[20] for run in cell["runs"]]
    stats = cell["stats"]["rownorm:mean"]
    assert stats["n"] == 2 and stats["mean"] == pytest.approx(np.mean(finals), rel=1e-6)


def test_it_is_in_the_python_api(plugin_env, tiny_run):
    code = ("import json, probe; r = probe.rownorm(%r, step='all'); print(json.dumps(['rownorm' in probe.__all__, "
            "probe.api.probe_function('rownorm') is probe.rownorm, {x.step: x.mean for x in r}]))" % str(tiny_run))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=plugin_env, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    listed, same, means = json.loads(res.stdout)
    assert listed and same
    assert {int(s): m for s, m in means.items()} == pytest.approx(_rownorm(tiny_run), rel=1e-6)


def test_a_probe_gets_only_the_parameters_it_declares():
    from probe import registry

    def declared(path, *, step="latest", power=2.0):
        return [path, step, power]

    def everything(path, **options):
        return [path, options]

    extra = {"step": "all", "max_memory": "1GB", "allow_nonfinite": True}
    assert registry.call(declared, "run.h5", **extra) == ["run.h5", "all", 2.0]
    assert registry.call(everything, "run.h5", **extra) == ["run.h5", extra]


FAILING = '''"""A probe whose function raises: a bug, not a run it does not apply to."""
from probe.registry import WEIGHTS, Probe


def failing(path, *, step="latest"):
    raise RuntimeError("a bug in the probe")


PROBE = Probe("failing", WEIGHTS, "A probe that raises", function=failing, help="Raises.")
'''


def test_a_probe_that_raises_fails_the_report_unless_keep_going(plugin_env, tiny_run, tmp_path):
    site = _site(tmp_path / "site", "failing_probe", "failing = failing_probe:PROBE", FAILING)
    env = {**plugin_env, "PYTHONPATH": os.pathsep.join([plugin_env["PYTHONPATH"], site])}
    page = tmp_path / "page.html"
    args = ["probe", "report", tiny_run, "-p", "rownorm", "-p", "failing", "-o", page]
    res = run_cli(*args, env=env)
    assert res.returncode == 2, res.stderr
    lines = without_status(res.stderr).splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: report: {tiny_run.name}: failing failed: "
                                                   "RuntimeError: a bug in the probe; "), res.stderr
    assert "Traceback" not in res.stderr and not page.exists()   # no page whose section would read as not applicable
    res = run_cli(*args, "--keep-going", env=env)
    assert res.returncode == 0, res.stderr
    assert without_status(res.stderr).splitlines() == [
        f"warning: report: {tiny_run.name}: failing failed: RuntimeError: a bug in the probe (its section says so)",
        f"wrote {page}: 1 run(s), 2 probes"], res.stderr
    text = page.read_text()
    assert "<p class='note error'>failed: RuntimeError: a bug in the probe</p>" in text and "not applicable" not in text
    assert _page_numbers(text, f"{tiny_run.name}-rownorm")   # the other sections as always


def test_a_broken_plugin_is_a_warning_not_the_end(tmp_path, tiny_run):
    site = _site(tmp_path / "site", "broken_probe", "broken = broken_probe:PROBE\npca = probe.probes.pca:PROBE",
                 "raise RuntimeError('this package is broken')\n")
    env = {**os.environ, "PYTHONPATH": site}
    res = run_cli("probe", "similarity", tiny_run, env=env)
    assert res.returncode == 0
    assert "probe 'broken' of package broken-probe" in res.stderr and "does not load" in res.stderr
    assert "probe 'pca' of package broken-probe" in res.stderr and "the name 'pca' is taken" in res.stderr
    assert "Traceback" not in res.stderr
