"""End to end: the paper-1 effect's direction on a small CPU run (about a minute)."""
import pytest

import probe
from train import Trainer, preset

STEPS = 1000


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("effect")
    out = {}
    for gamma in (0.3, 0.8):
        cfg = preset("quick", gamma=gamma, steps=STEPS, snapshot_every=500, snapshot_log=False)
        out[gamma] = Trainer(cfg, d / f"g{gamma}.h5", progress=False).run()
    return out


def test_small_init_generalises_to_held_out_combinations(runs):
    small, large = runs[0.8].metrics, runs[0.3].metrics
    assert small["rsn_test"]["acc"] > large["rsn_test"]["acc"] + 0.3
    assert small["rsn_train"]["acc"] > 0.5


def test_small_init_orders_reasoning_anchors_into_a_band(runs):
    small = probe.similarity(runs[0.8].path, "reasoning")[0]
    large = probe.similarity(runs[0.3].path, "reasoning")[0]
    assert small.distance_corr < -0.7
    assert small.by_distance[1] > small.by_distance[9] + 0.4
    assert small.distance_corr < large.distance_corr - 0.3
    # memory anchors: no order at all, whatever the scale
    mem = probe.similarity(runs[0.8].path, "memory")[0]
    assert abs(mem.distance_corr) < 0.4
