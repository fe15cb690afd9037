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


def test_a_language_run_is_estimated_with_the_story_text_it_reads():
    """A story source other than the preset's is measured with that text (its vocabulary sets the cost of
    a step), once per process, and the estimate is made from that measurement."""
    own = speeds.measure("lm-tiny")
    other = speeds.measure("lm-tiny", "synthetic")   # the same text as the preset's, measured on its own
    assert other is speeds.measure("lm-tiny", "synthetic") and other is not own
    cfg = preset("lm-tiny", stories="synthetic")
    expected = other.start_s + cfg.steps * other.step_s + len(snapshot_steps(cfg)) * other.snapshot_s
    assert speeds.estimate("lm-tiny", {"stories": "synthetic"}) == pytest.approx(expected)
