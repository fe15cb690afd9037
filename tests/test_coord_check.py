"""probe-train coord-check (mup's coordinate check with gamma-init): its numbers against numpy on the same
arrays, against the closed form at step 0, and its answers to bad input."""
import csv
import io
import json
import math

import numpy as np
import pytest
import torch

from probe.analyses.regime import seed_slope
from probe_train.config import preset
from probe_train.coord import LOGITS, coord_check, init_std, record, width_config
from probe_train.trainer import Trainer

from conftest import run_cli

GAMMA = 0.8


def _linear(d: int, seed: int) -> torch.nn.Linear:
    lin = torch.nn.Linear(d, d, bias=False)
    with torch.no_grad():
        lin.weight.normal_(0.0, d ** -GAMMA, generator=torch.Generator().manual_seed(seed))
    return lin


def test_a_linear_layers_coordinates_are_numpys_and_scale_as_width_to_one_half_minus_gamma():
    """One linear map of fan-in d, std d^-gamma, on standard-normal inputs: mean |x W^T| is
    sqrt(2/pi) d^(1/2 - gamma) in expectation, so its log-log slope is 1/2 - gamma; after one SGD step on
    mean(y^2) the numbers are numpy's of the updated matrix."""
    widths, lr, per_seed = [64, 128, 256, 512], 0.5, []
    for seed in range(3):
        by_width = {}
        for d in widths:
            x = torch.randn(256, d, generator=torch.Generator().manual_seed(100 + seed))
            model = torch.nn.Sequential(_linear(d, seed))
            W0 = model[0].weight.detach().numpy().astype(np.float64).copy()
            opt = torch.optim.SGD(model.parameters(), lr=lr)

            def update(out):
                opt.zero_grad()
                out.pow(2).mean().backward()
                opt.step()

            coords = record(model, lambda: model(x), update, steps=1)
            X = x.numpy().astype(np.float64)
            Y0 = X @ W0.T
            W1 = W0 - lr * 2 * Y0.T @ X / Y0.size            # d mean(y^2) / dW
            for name in ("0", LOGITS):                       # the layer's output is the model's
                assert coords[name][0] == pytest.approx(np.abs(Y0).mean(), rel=1e-5)
                assert coords[name][1] == pytest.approx(np.abs(X @ W1.T).mean(), rel=1e-4)
            expected = math.sqrt(2 / math.pi) * d ** (0.5 - GAMMA)
            assert coords["0"][0] == pytest.approx(expected, rel=0.05)
            by_width[d] = coords["0"][0]
        per_seed.append(by_width)
    s = seed_slope(per_seed)
    assert s["n"] == 3 and s["mean"] == pytest.approx(0.5 - GAMMA, abs=0.02)
    assert s["ci_lo"] <= s["mean"] <= s["ci_hi"]


def test_the_presets_coordinates_at_init_follow_the_closed_form_and_its_own_forward_pass():
    """Pre-LN, ReLU: the MLP maps a normed (O(1)) input through two matrices of fan-in proportional to d,
    so its output scales as d^(1 - 2 gamma); the head maps the final norm's output through one,
    d^(1/2 - gamma). The logits at step 0 are the model's own forward pass on the batch."""
    cfg = preset("tiny", gamma=GAMMA, activation="relu", layers=1)
    check = coord_check(cfg, [16, 32, 64, 128], seeds=range(3), steps=2)
    assert check.steps == [0, 1, 2] and check.seeds == [0, 1, 2] and check.widths == [16, 32, 64, 128]
    assert check.values.shape == (len(check.modules), 3, 3, 4)
    assert check.modules[-1] == LOGITS and "blocks.0.mlp" in check.modules
    assert check.slopes["blocks.0.mlp"][0]["mean"] == pytest.approx(1 - 2 * GAMMA, abs=0.1)
    assert check.slopes[LOGITS][0]["mean"] == pytest.approx(0.5 - GAMMA, abs=0.1)
    assert check.slopes[LOGITS][0]["verdict"] == "shrinks"
    assert check.slopes["blocks.0.ln1"][0]["verdict"] == "flat"       # a norm's output is O(1) at any width
    assert check.std == {w: pytest.approx(w ** -GAMMA) for w in check.widths}
    # the recorded numbers are those of a plain forward pass of the same model on the same batch
    batch = Trainer(cfg.replace(seed=0), None, snapshots=False, show_progress=False).batch(0)   # every seed's
    tr = Trainer(width_config(cfg, 32).replace(seed=1), None, snapshots=False, show_progress=False)
    with torch.no_grad():
        logits = tr.model(tr.tokens[batch], tr.key_pos[batch])
    assert check.values[check.modules.index(LOGITS), 0, 1, 1] == pytest.approx(float(logits.abs().mean()), rel=1e-5)
    # the updates move them: step 2 is not step 0
    assert not np.allclose(check.values[:, 2], check.values[:, 0])


def test_width_config_scales_what_follows_the_width_and_keeps_a_fixed_std():
    base = preset("tiny")                                   # d_model 16, d_ff 32
    assert (width_config(base, 64).d_model, width_config(base, 64).d_ff) == (64, 128)
    assert width_config(base.replace(d_head=4), 64).d_head == 16
    assert width_config(base.replace(d_ff_ratio=3.0), 64).d_ff == 192
    fixed = base.replace(gamma_ref_width=32)
    assert init_std(width_config(fixed, 16)) == init_std(width_config(fixed, 128)) == pytest.approx(32 ** -0.5)
    with pytest.raises(Exception, match="width 15"):        # two heads do not split 15
        width_config(base, 15)


def test_coord_check_prints_a_table_json_and_csv_of_every_seed_and_width():
    args = ["coord-check", "--preset", "tiny", "--widths", "16,32", "--steps", "1", "--seeds", "2",
            "--set", "layers=1"]
    res = run_cli("probe-train", *args)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == ["gamma 0.5: init std 16^-0.5 = 0.25 to 32^-0.5 = 0.177",
                         "2 seeds, 1 update on one batch at lr 0.001 (no warm-up)"]
    assert lines[2].split() == ["module", "step", "|x|", "w16", "|x|", "w32", "slope", "95%", "CI", "width"]
    assert any(ln.startswith("logits ") for ln in lines) and max(map(len, lines)) <= 80
    data = json.loads(run_cli("probe-train", *args, "--gamma", "0.5,1", "-f", "json").stdout)
    assert [c["gamma"] for c in data["checks"]] == [0.5, 1.0] and data["set"] == {"layers": 1}
    mods = data["checks"][1]["modules"]
    assert np.asarray(mods["logits"]["mean_abs"]).shape == (2, 2, 2)     # steps, seeds, widths
    rows = list(csv.reader(io.StringIO(run_cli("probe-train", *args, "-f", "csv").stdout)))
    assert rows[0] == ["gamma", "module", "step", "seed", "width", "mean_abs"]
    assert len(rows) - 1 == len(mods) * 2 * 2 * 2


def test_coord_check_draws_mups_figure(tmp_path):
    out = tmp_path / "coord.svg"
    res = run_cli("probe-train", "coord-check", "--preset", "tiny", "--widths", "16,32", "--steps", "1",
                  "--seeds", "2", "--plot", out, "-f", "json")
    assert res.returncode == 0, res.stderr
    svg = out.read_text()
    assert "step 0 (init)" in svg and "step 1" in svg and "logits" in svg


@pytest.mark.parametrize("args, message", [
    (["--widths", "32"], "two widths or more"),
    (["--widths", "32,32"], "two widths or more"),
    (["--widths", "a,b"], "whole numbers"),
    (["--widths", "16,15"], "width 15"),
    (["--widths", "16,32", "--set", "d_model=64"], "coord-check sets d_model itself (--widths)"),
    (["--widths", "16,32", "--set", "seed=1"], "--seeds"),
    (["--widths", "16,32", "--set", "lr=1e-3,2e-3"], "one value"),
    (["--widths", "16,32", "--set", "nope=1"], "no config field 'nope'"),
    (["--widths", "16,32", "--gamma", "x"], "numbers with commas"),
    (["--widths", "16,32", "--plot", "coord.txt"], ".png"),
])
def test_coord_check_answers_bad_input_in_one_line(args, message):
    res = run_cli("probe-train", "coord-check", "--preset", "tiny", *args)
    assert res.returncode != 0 and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) <= 3
