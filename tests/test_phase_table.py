"""examples/p2_phase_table.py: paper 2's phase diagram as numbers from a tiny sweep over learning rate x
weight decay x gamma, each cell's fractions counted again here from the runs' own accuracies."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import probe
from conftest import run_cli
from probe.analyses.uncertainty import wilson

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "p2_phase_table.py"


def _script(*args, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="module")
def phase(tmp_path_factory):
    root = tmp_path_factory.mktemp("phase")
    res = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "task=composite", "--grid", "key_min=20",
                  "--grid", "key_max=99", "--grid", "lr=1e-3,4e-3", "--grid", "weight_decay=0,1.0",
                  "--grid", "gamma=0.5", "--grid", "seed=0:3", "--out", root / "grid", "-j", "2")
    assert res.returncode == 0, res.stderr
    return root


def test_each_cell_is_its_runs_counted(phase, tmp_path):
    out = tmp_path / "p2-phase.json"
    res = _script(phase, "-o", out, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    values = json.loads(out.read_text())["values"]
    assert values["cells"] == 4 and set(values["gamma=0.5"]) == {"lr=0.001,wd=0", "lr=0.001,wd=1", "lr=0.004,wd=0",
                                                                 "lr=0.004,wd=1"}
    runs = sorted((phase / "grid").glob("*.h5"))
    for key, v in values["gamma=0.5"].items():
        lr, wd = (float(x.split("=")[1]) for x in key.split(","))
        mine = [r for r in runs if probe.info(r)["config"]["lr"] == lr and probe.info(r)["config"]["weight_decay"] == wd]
        assert len(mine) == 3
        m = [probe.info(r)["metrics"] for r in mine]
        k = sum(x["ood_inferential"]["acc"] > x["ood_symmetric"]["acc"] for x in m)
        assert v["inf>sym"]["shown"] == f"{k}/3" and v["inf>sym"]["ci95"] == pytest.approx(list(wilson(k, 3)))
        k = sum(x["train"]["acc"] > 0.95 for x in m)
        assert v["fit"]["shown"] == f"{k}/3"
        assert v["std"] == pytest.approx(probe.info(mine[0])["config"]["d_model"] ** -0.5)
    assert res.stdout.splitlines()[0].startswith("| γ | init std | lr | weight decay | inferential > symmetric")
    assert len(res.stdout.splitlines()) == 2 + 4


def test_near_half_names_the_cells_with_one_to_three_of_three(phase, tmp_path):
    res = _script(phase, "--near-half", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    table = _script(phase, "-o", tmp_path / "v.json", cwd=tmp_path)
    values = json.loads((tmp_path / "v.json").read_text())["values"]["gamma=0.5"]
    want = sorted(f"{float(k.split(',')[0][3:]):g} {float(k.split(',')[1][3:]):g} 0.5" for k, v in values.items()
                  if v["inf>sym"]["shown"] in ("1/3", "2/3", "3/3"))
    assert table.returncode == 0 and sorted(res.stdout.splitlines()) == want


def test_no_sweep_is_one_line(tmp_path):
    res = _script(tmp_path / "nothing", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("Error: ")
    assert "no sweep there" in res.stderr


def test_the_summary_counts_what_the_cells_show(phase, tmp_path):
    out = tmp_path / "s.json"
    assert _script(phase, "-o", out, cwd=tmp_path).returncode == 0
    values = json.loads(out.read_text())["values"]
    cells, s = values["gamma=0.5"], values["summary"]["gamma=0.5"]
    assert s["cells"] == 4 and s["large_corner"] == cells["lr=0.004,wd=1"]["inf>sym"]
    assert s["small_corner"] == cells["lr=0.001,wd=0"]["inf>sym"]
    assert s["inferential_shown"] == sum(c["inf>sym"]["ci95"][0] > 0.5 for c in cells.values())
    assert s["best"]["fraction"] == max(c["inf>sym"]["fraction"] for c in cells.values())


def test_further_seeds_still_training_are_left_out_with_a_warning(phase, tmp_path):
    """A cell's further seeds stopped before their end (a sweep killed, or --stop-at): the table counts
    the runs that ended and says which folder it left out."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(phase / "grid", root / "grid")
    more = root / "more" / "lr0.001-wd0-g0.5"
    res = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "task=composite", "--grid", "key_min=20",
                  "--grid", "key_max=99", "--grid", "lr=1e-3", "--grid", "weight_decay=0", "--grid", "gamma=0.5",
                  "--grid", "seed=3:5", "--stop-at", "10", "--out", more, "-j", "2")
    assert res.returncode == 0, res.stderr
    out = _script(root, "-o", tmp_path / "t.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [ln for ln in out.stderr.splitlines() if ln.startswith("warning: ")][-1].endswith("; left out")
    values = json.loads((tmp_path / "t.json").read_text())["values"]["gamma=0.5"]
    assert values["lr=0.001,wd=0"]["inf>sym"]["shown"].endswith("/3")
