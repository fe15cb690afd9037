"""A preset's speed is measured on this machine (train/speeds.py): a short run of it, timed part by part
in a process forked from the trainers' fork server; the presets for a GPU are not measured."""
import pytest

from probe_train import speeds
from probe_train.config import preset, snapshot_steps


def test_a_presets_speed_is_measured_here_and_scales_to_its_configuration():
    speed = speeds.measure("tiny")
    assert speed.start_s > 0 and speed.step_s > 0 and speed.snapshot_s > 0
    assert speeds.measure("tiny") is speed                # once per process
    one = speeds.estimate("tiny")
    snapshots = len(snapshot_steps(preset("tiny")))
    assert one == pytest.approx(speed.start_s + 40 * speed.step_s + snapshots * speed.snapshot_s)   # 40 steps
    assert speeds.estimate("tiny", {"steps": 400}) > one
    assert speeds.estimate("tiny", {"d_model": 64, "d_ff": 128}) > one      # a bigger step costs more
    assert speeds.measure("paper1") is None and speeds.estimate("paper1") is None   # for a GPU
