"""examples/p2_width_table.py: paper 2's cells across widths from a tiny width sweep (fixed gamma and fixed
std), each width's fractions counted again here from the runs' own accuracies and its slopes regime --widths'."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import probe
from conftest import run_cli

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "p2_width_table.py"
COMPOSITE = ("--grid", "task=composite", "--grid", "key_min=20", "--grid", "key_max=99")


def _script(*args, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="module")
def widths(tmp_path_factory):
    root = tmp_path_factory.mktemp("widths")
    res = run_cli("probe-train", "sweep", "--preset", "tiny", *COMPOSITE, "--grid", "d_model=16,32",
                  "--grid", "d_ff_ratio=2", "--grid", "gamma_ref_width=0,16", "--grid", "seed=0:2",
                  "--out", root / "w", "-j", "2")
    assert res.returncode == 0, res.stderr
    return root


def test_each_width_is_its_runs_counted_and_its_slopes_are_regime_widths(widths, tmp_path):
    out = tmp_path / "p2-width.json"
    res = _script(widths, "-o", out, "--steps", "latest", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    values = json.loads(out.read_text())["values"]
    cells = {k for k in values if k != "table"}
    assert cells == {"gamma=0.5,lr=0.001,wd=0,init=fixed-gamma", "gamma=0.5,lr=0.001,wd=0,init=fixed-std-16"}
    runs = sorted((widths / "w").glob("*.h5"))
    for name in cells:
        ref = 16 if name.endswith("16") else 0
        mine = [r for r in runs if probe.info(r)["config"]["gamma_ref_width"] == ref]
        for w in (16, 32):
            m = [probe.info(r)["metrics"] for r in mine if probe.info(r)["config"]["d_model"] == w]
            k = sum(x["ood_inferential"]["acc"] > x["ood_symmetric"]["acc"] for x in m)
            v = values[name]["widths"][str(w)]
            assert v["inf>sym"]["shown"] == f"{k}/2"
            assert v["std"] == pytest.approx((ref or w) ** -0.5)
        (want,) = probe.regime_widths([str(r) for r in mine], step="latest")
        got = values[name]["slopes"][str(want.step)]
        for group, s in want.slopes.items():
            assert got[group]["mean"] == pytest.approx(s["mean"]) and got[group]["regime"] == s["regime"]
    assert res.stdout.splitlines()[0].startswith("| cell | d_model | init std | inferential > symmetric")
    assert len(res.stdout.splitlines()) == 2 + 4


def test_a_run_still_training_and_a_cell_of_one_width_are_left_out_with_a_warning(widths, tmp_path):
    import shutil

    root = tmp_path / "root"
    shutil.copytree(widths / "w", root / "w")
    res = run_cli("probe-train", "sweep", "--preset", "tiny", *COMPOSITE, "--grid", "d_model=16",
                  "--grid", "gamma=0.8", "--grid", "seed=0:2", "--out", root / "one", "-j", "2")
    assert res.returncode == 0, res.stderr
    res = run_cli("probe-train", "sweep", "--preset", "tiny", *COMPOSITE, "--grid", "d_model=64",
                  "--grid", "d_ff_ratio=2", "--grid", "gamma_ref_width=0", "--grid", "seed=0:1", "--stop-at", "10",
                  "--out", root / "partial", "-j", "1")
    assert res.returncode == 0, res.stderr
    out = _script(root, "-o", tmp_path / "t.json", "--steps", "latest", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    warned = [ln for ln in out.stderr.splitlines() if ln.startswith("warning: ")]
    assert any("at step 10 of 40; left out" in ln for ln in warned)
    assert any("gamma=0.8" in ln and "one width only (16); left out" in ln for ln in warned)
    values = json.loads((tmp_path / "t.json").read_text())["values"]
    assert set(values["gamma=0.5,lr=0.001,wd=0,init=fixed-gamma"]["widths"]) == {"16", "32"}


def test_no_runs_is_one_line(tmp_path):
    res = _script(tmp_path, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("Error: ")
    assert "no run files" in res.stderr
