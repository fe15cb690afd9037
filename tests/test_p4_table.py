"""examples/p4_critical_table.py --json: every number of paper 4's table as a docs results file, on a real
sweep of tiny LLaMA-style runs; the numbers checked against the probes directly."""
import json
import subprocess
import sys

import numpy as np
import pytest

import probe

from conftest import ROOT, train_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return train_sweep(tmp_path_factory.mktemp("p4") / "p4", "llm-tiny", "gamma=0.5,1.0", "seed=0:2")


@pytest.mark.slow   # CI time (the last CI took 1179 s of 1200): 23 s with its sweep; test_seed_table.py checks a results-file script in the default set
def test_the_results_file_holds_the_tables_numbers(sweep, tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "p4_critical_table.py"), str(sweep), "--json",
                          str(tmp_path / "t.json")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("| γ | ε | gate | seeds | val loss")   # the markdown table as before
    data = json.loads((tmp_path / "t.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["meta"]["seeds"] == [0, 1] and "--json" in data["meta"]["command"]
    v = data["values"]
    assert set(v["cells"]) == {"g0.5-eps1e-05-plain", "g1-eps1e-05-plain"}
    runs = {(probe.info(p)["config"]["gamma"], probe.info(p)["config"]["seed"]): p for p in sorted(sweep.glob("*.h5"))}
    cell = v["cells"]["g1-eps1e-05-plain"]
    m = [probe.info(runs[1.0, s])["metrics"] for s in (0, 1)]
    assert cell["val"]["values"] == pytest.approx([(x["logic"]["loss"] + x["story"]["loss"]) / 2 for x in m])
    assert cell["seeds"] == 2 and cell["snapshots"]["mean"] == len(probe.norms(runs[1.0, 0], step="all"))
    ranks = probe.rank(runs[1.0, 0], step="all")
    layers = [n for n in ranks[0].names if n.startswith("layer")]
    w = [np.mean([r.numbers[n]["effective_rank"] for n in layers]) for r in ranks]
    assert cell["dip"]["values"][0] == pytest.approx(min(w) / w[0])
    assert cell["first_share"]["values"][0] == pytest.approx(float(probe.norms(runs[1.0, 0], step=0)[0].eps_share.max()))
    assert v["critical"]["eps1e-05-plain"]["gamma"] in (0.5, 1.0)
    pair = v["pairs"]["g1-eps1e-05-plain"]
    gain = [probe.info(runs[0.5, s])["metrics"]["logic"]["loss"] - m[s]["logic"]["loss"] for s in (0, 1)]
    assert pair["n"] == 2 and pair["gain_logic"]["values"] == pytest.approx(gain)
    assert pair["logic_more"]["shown"].endswith("/2")
