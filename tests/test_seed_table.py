"""examples/seed_table.py: a sweep's seed table as a docs results file (probe sweep-summary's numbers per
cell, with what they were measured on), on a real sweep of tiny runs."""
import json
import subprocess
import sys

import pytest

import probe

from conftest import ROOT, train_sweep

SCRIPT = ROOT / "examples" / "seed_table.py"


def _script(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return train_sweep(tmp_path_factory.mktemp("seeds") / "sweep", "tiny", "gamma=0.3,0.8", "seed=0:2")


def test_the_file_holds_sweep_summarys_numbers_and_their_seeds(sweep, tmp_path):
    metrics, outcome = ["acc[rsn_test]", "similarity:distance_corr"], "similarity:distance_corr<0"
    res = _script(sweep, *(a for m in metrics for a in ("--metric", m)), "--outcome", outcome, "-o", tmp_path / "t.json",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "t.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["meta"]["seeds"] == [0, 1] and data["meta"]["step"] == 40 and "seed_table.py" in data["meta"]["command"]
    for cell in probe.sweep_summary(sweep, metrics, [outcome]):
        got = data["values"][f"gamma={cell.cell['gamma']:g}"]
        for m in metrics:   # brackets become parentheses: a page's name ends at "]]"
            s = cell.stats[m]
            assert got[m.replace("[", "(").replace("]", ")")] == {"mean": s["mean"], "ci95": [s["ci_lo"], s["ci_hi"]],
                                                               "n": 2}
        o = cell.outcomes[outcome]
        assert got[outcome] == {"shown": f"{o['k']}/{o['n']}", "ci95": [o["ci_lo"], o["ci_hi"]]}
    again = _script(sweep / "sweep.json", "--metric", metrics[0], "-o", tmp_path / "u.json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr   # the manifest names the same sweep


def test_the_file_says_which_code_and_device_trained_the_runs(sweep, tmp_path):
    """The provenance a page prints: the commit the runs trained at, as their files recorded it, and
    the device, next to the commit that wrote the table (they differ when the table is written later)."""
    import importlib.util

    res = _script(sweep, "--metric", "acc[rsn_test]", "-o", tmp_path / "t.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    meta = json.loads((tmp_path / "t.json").read_text())["meta"]
    here = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    assert meta["trained"]["commits"] == [here]
    assert len(meta["trained"]["devices"]) == 1 and meta["trained"]["devices"][0]
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    said = hooks.provenance({**meta, "commit": "0123456789"}, "t.json")
    assert f"runs trained at commit {here[:7]}" in said and meta["trained"]["devices"][0] in said
    assert "table written at commit 0123456" in said
    legacy = {k: v for k, v in meta.items() if k != "trained"}
    assert "table written at commit" in hooks.provenance(legacy, "t.json")
    assert "runs trained at commit" in hooks.provenance({**legacy, "command": "x --commit abc"}, "t.json")


def test_a_missing_sweep_is_one_error_line(tmp_path):
    res = _script(tmp_path / "nowhere", "-o", tmp_path / "t.json", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == "" and not (tmp_path / "t.json").exists()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "nowhere" in lines[0]


def test_a_cell_says_which_cell_it_is_in_a_notebook(sweep):
    """A cell printed in a notebook names its grid cell, its runs and step, and every number with its
    interval; its HTML view the same (escaped)."""
    cells = probe.sweep_summary(sweep, ["acc[rsn_test]"], ["acc[rsn_test]>0.5"])
    for cell in cells:
        text = repr(cell)
        s, o = cell.stats["acc[rsn_test]"], cell.outcomes["acc[rsn_test]>0.5"]
        assert text.startswith(f"CellSummary(gamma={cell.cell['gamma']}: 2 runs at step 40; ")
        assert f"acc[rsn_test] {s['mean']:.4g} [{s['ci_lo']:.4g}, {s['ci_hi']:.4g}]" in text
        assert f"acc[rsn_test]>0.5 {o['k']}/2 [{o['ci_lo']:.2f}, {o['ci_hi']:.2f}]" in text and len(text) < 200
        page = cell._repr_html_()
        assert f"gamma={cell.cell['gamma']}" in page and "acc[rsn_test]&gt;0.5" in page and "<table>" in page
