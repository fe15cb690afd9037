"""Paper 2's composite task: data, splits, and the inferential/symmetric read-out of `probe ood`."""
import json

import numpy as np
import pytest

import probe
from probe_train import Trainer, preset
from probe_train.tasks import make_task

from conftest import run_cli


@pytest.fixture(scope="module")
def task():
    return make_task(preset("composite-quick", n_samples=6000))


def test_composite_labels_and_splits(task):
    rows = np.arange(len(task.labels))
    z = task.tokens[rows, task.key_pos]
    a1 = task.tokens[rows, task.key_pos + 1]
    a2 = task.tokens[rows, task.key_pos + 2]
    shift = {1: 5, 2: 1, 3: -2, 4: -8}
    split = np.asarray(task.splits)[task.split]
    seen = np.isin(split, ["train", "test"])
    rule = z + np.vectorize(shift.get)(a1) + np.vectorize(shift.get)(a2)
    swapped = (a1 == 3) & (a2 == 4)
    assert np.array_equal(task.labels[seen & ~swapped], rule[seen & ~swapped])
    assert np.all(task.labels[seen & swapped] == z[seen & swapped] - 6)
    assert not np.any(seen & (a1 == 4) & (a2 == 3))              # (4,3) is never seen
    assert np.all((z[split == "train"] % 9) != task.key_pos[split == "train"])
    assert np.all((z[split == "test"] % 9) == task.key_pos[split == "test"])
    inf, sym = split == "ood_inferential", split == "ood_symmetric"
    assert np.all((a1[inf] == 4) & (a2[inf] == 3))
    assert np.all(task.labels[inf] == z[inf] - 10) and np.all(task.labels[sym] == z[sym] - 6)
    assert np.array_equal(np.sort(z[inf]), np.sort(z[sym]))     # the same inputs, two targets
    assert len(set(task.combo[split == "train"])) == 15
    assert list(task.groups["anchors"]) == [1, 2, 3, 4]


def test_probe_ood_reads_inferential_and_symmetric_accuracy(tmp_path):
    cfg = preset("composite-quick", steps=60, snapshot_every=30, n_samples=3000, eval_size=256, gamma=0.5)
    run = Trainer(cfg, tmp_path / "c.h5", show_progress=False).run()
    res = probe.ood(run.path)[0]
    assert set(res.targets) == {"inferential", "symmetric"}
    assert res.targets["inferential"]["acc"] + res.targets["symmetric"]["acc"] <= 1.0
    assert res.targets["inferential"]["acc"] == run.metrics["ood_inferential"]["acc"]
    assert res.splits["ood_symmetric"]["loss"] == run.metrics["ood_symmetric"]["loss"]
    assert set(res.combos) == {"4,3"}
    assert probe.validate(run.path) == []
    assert probe.bias(run.path)[-1].split_a == "train"


def test_probe_ood_trajectory_equals_logged_metrics_with_any_worker_count(tmp_path):
    cfg = preset("composite-quick", steps=40, snapshot_every=10, n_samples=2000, eval_size=128, gamma=0.5)
    run = Trainer(cfg, tmp_path / "c.h5", show_progress=False).run()
    one = probe.ood(run.path, step="all", threads=1)
    two = probe.ood(run.path, step="all", threads=2)
    with probe.Run(run.path) as r:
        logged, steps = r.metrics(), r.steps
    assert [x.step for x in one] == [x.step for x in two] == list(steps)
    for k, (a, b) in enumerate(zip(one, two)):
        assert a.splits == b.splits and a.combos == b.combos and a.targets == b.targets
        for split, m in a.splits.items():     # the weights swapped into one model give the logged numbers
            assert m["loss"] == logged[split]["loss"][k] and m["acc"] == logged[split]["acc"][k]
    res = run_cli("probe", "ood", run.path, "--step", "all", "--threads", "2", "--format", "json")
    assert res.returncode == 0 and len(json.loads(res.stdout)["results"]) == len(steps)
