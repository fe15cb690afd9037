"""probe regime, probe regime --widths and probe gamma: each against a plain numpy computation on the
same arrays, on a trainer's run, a Recorder file and a Hugging Face checkpoint; and their bad input,
each in one line."""
import math
import os

import h5py
import numpy as np
import pytest

import probe
from conftest import run_cli
from probe.analyses.regime import MATRIX_GROUPS, group_of, regime_of, slope


def _train(out, *extra):
    res = run_cli("probe-train", "--preset", "tiny", "--threads", "1", "--quiet", "--out", out, *extra)
    assert res.returncode == 0, res.stderr
    return out


def _weights(path, name, index):
    """A canonical tensor's full map at a snapshot index, straight from the file with h5py."""
    with h5py.File(path, "r") as f:
        W = np.asarray(f["snapshots/weights"][name][index], dtype=np.float64)
    if W.ndim == 3:   # per head: back to the full map, as the probes read it
        W = W.reshape(-1, W.shape[-1]) if name.endswith("W_O") else W.transpose(1, 0, 2).reshape(W.shape[1], -1)
    return W


@pytest.fixture(scope="module")
def widths(tmp_path_factory):
    """A width sweep of the tiny preset: d_model 16, 32, 64 x seeds 0-2."""
    out = tmp_path_factory.mktemp("widths") / "ws"
    res = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "d_model=16,32,64", "--grid", "seed=0:3",
                  "--out", out, "-j", "1")
    assert res.returncode == 0, res.stderr
    return out


def test_rd_of_every_matrix_and_group_is_numpys(tiny_run):
    res = probe.regime(tiny_run, step="all")
    with probe.Run(tiny_run) as run:
        steps, names = [int(s) for s in run.steps], sorted(n for n, s in run.weights().items() if len(s) >= 2)
    assert [r.step for r in res] == steps and res[0].groups and all(v == 0 for v in res[0].rd.values())
    last = len(steps) - 1
    for name in names:
        W0, Wt = _weights(tiny_run, name, 0), _weights(tiny_run, name, last)
        assert res[-1].rd[name] == pytest.approx(np.linalg.norm(Wt - W0) / np.linalg.norm(W0), rel=1e-9)
    qk = [n for n in names if n.endswith(("W_Q", "W_K"))]
    num = sum(np.sum((_weights(tiny_run, n, last) - _weights(tiny_run, n, 0)) ** 2) for n in qk)
    den = sum(np.sum(_weights(tiny_run, n, 0) ** 2) for n in qk)
    assert res[-1].groups["attention QK"] == pytest.approx(math.sqrt(num / den), rel=1e-9)
    assert set(res[-1].groups) == set(MATRIX_GROUPS)   # a decoder has all six
    assert res[-1].groups["attention QK"] > 0


def test_gamma_at_step_0_gives_back_the_gamma_of_each_group(tmp_path):
    """γ-init draws std = fan_in^-γ: -ln std / ln fan_in of the drawn weights is γ, per group (γ split by
    module), within the sampling error of a std from a few hundred entries at d 32."""
    run = _train(tmp_path / "g.h5", "--d-model", "32", "--gamma", "0.8", "--gamma-embed", "0.3", "--gamma-mlp", "1.1")
    r = probe.gamma(run, step=0)[0]
    assert r.step == 0
    want = {"embeddings": 0.3, "attention QK": 0.8, "attention VO": 0.8, "MLP in": 1.1, "MLP out": 1.1, "head": 0.8}
    for g, gamma in want.items():
        assert r.groups[g]["gamma"] == pytest.approx(gamma, abs=0.04), (g, r.groups[g])
    W = _weights(run, "layer1/W_out", 0)
    assert r.numbers["layer1/W_out"] == pytest.approx(
        {"std": W.std(), "fan_in": W.shape[0], "gamma": -math.log(W.std()) / math.log(W.shape[0])}, rel=1e-9)
    E = _weights(run, "token_embedding", 0)   # an embedding's fan-in is its width
    assert r.numbers["token_embedding"]["fan_in"] == E.shape[1] == 32


def test_gamma_of_a_hugging_face_model_says_what_its_library_init_is_at_its_width(tmp_path):
    """GPT-2's init, std 0.02, read from its saved folder: gamma -ln 0.02 / ln d (0.59 at d 768; here d 64)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    import torch

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=16)).save_pretrained(
        tmp_path / "gpt2")
    r = probe.gamma(tmp_path / "gpt2")[0]
    assert r.numbers["token_embedding"]["std"] == pytest.approx(0.02, rel=0.05)
    assert r.numbers["token_embedding"]["gamma"] == pytest.approx(-math.log(0.02) / math.log(64), abs=0.02)
    res = run_cli("probe", "gamma", tmp_path / "gpt2")
    assert res.returncode == 0 and "attention QK" in res.stdout, res.stderr
    res = run_cli("probe", "regime", tmp_path / "gpt2")   # one checkpoint: no initial weights to compare with
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "one checkpoint of no stated step" in res.stderr


def test_regime_of_a_recorder_file_from_before_the_first_update(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    import torch

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(1))
    path = tmp_path / "rec.h5"
    with probe.Recorder(path, model, every=5) as rec:
        for step in range(11):
            rec.step(step)   # step 0: before the first update, the initial weights
            loss = model(batch, labels=batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
    res = probe.regime(path, step="all")
    assert [r.step for r in res] == [0, 5, 10]
    W0, Wt = _weights(path, "layer0/W_V", 0), _weights(path, "layer0/W_V", 2)
    assert res[-1].rd["layer0/W_V"] == pytest.approx(np.linalg.norm(Wt - W0) / np.linalg.norm(W0), rel=1e-9)
    assert 0 < res[1].groups["MLP out"] < res[2].groups["MLP out"]


def test_the_width_slope_is_numpys_per_seed_then_their_mean(widths):
    res = probe.regime_widths(widths, step="latest")
    assert len(res) == 1 and res[0].widths == [16, 32, 64] and sorted(res[0].seeds) == [0, 1, 2]
    files = sorted(widths.glob("*.h5"))
    per_seed = {}
    for f in files:
        with probe.Run(f) as run:
            seed, d, last = run.config["seed"], run.config["d_model"], len(run.steps) - 1
        W0, Wt = _weights(f, "layer0/W_Q", 0), _weights(f, "layer0/W_Q", last)
        K0, Kt = _weights(f, "layer0/W_K", 0), _weights(f, "layer0/W_K", last)
        Q0, Qt = _weights(f, "layer1/W_Q", 0), _weights(f, "layer1/W_Q", last)
        L0, Lt = _weights(f, "layer1/W_K", 0), _weights(f, "layer1/W_K", last)
        num = sum(np.sum((b - a) ** 2) for a, b in ((W0, Wt), (K0, Kt), (Q0, Qt), (L0, Lt)))
        den = sum(np.sum(a ** 2) for a in (W0, K0, Q0, L0))
        per_seed.setdefault(seed, {})[d] = math.sqrt(num / den)
    slopes = [np.polyfit(np.log(list(v)), np.log(list(v.values())), 1)[0] for _, v in sorted(per_seed.items())]
    got = res[0].slopes["attention QK"]
    assert sorted(got["per_seed"]) == pytest.approx(sorted(slopes), rel=1e-9)
    assert got["mean"] == pytest.approx(np.mean(slopes), rel=1e-9)
    assert got["ci_lo"] <= got["mean"] <= got["ci_hi"]
    assert got["regime"] == regime_of(got["ci_lo"], got["ci_hi"])
    out = run_cli("probe", "regime", "--widths", widths, "--step", "latest")
    assert out.returncode == 0 and "widths 16, 32, 64; 3 seed(s)" in out.stdout, out.stderr


def test_after_one_adam_update_the_slope_is_the_closed_forms(widths):
    """Adam's first update moves every entry by the learning rate (bias-corrected m / sqrt(v) is the
    gradient's sign), so ||dW|| = lr sqrt(rows cols) and RD = lr / std: a matrix of fan-in d_model, drawn
    with std d^-gamma, moves by RD ~ d^gamma; the MLP's output matrix, of fan-in d_ff (32 at every width
    of this sweep), by a constant. The step grammar takes a list (0:2 is steps 0 and 1)."""
    res = probe.regime_widths(widths, step="0:2")
    assert [r.step for r in res] == [0, 1]
    assert all(math.isnan(s["mean"]) for s in res[0].slopes.values())      # RD = 0 at step 0: no slope
    slopes = res[1].slopes
    gamma = probe.info(sorted(widths.glob("*.h5"))[0])["config"]["gamma"]
    for group in ("attention QK", "attention VO", "MLP in"):
        assert slopes[group]["mean"] == pytest.approx(gamma, abs=0.05), group
    assert slopes["MLP out"]["mean"] == pytest.approx(0.0, abs=0.05)
    assert slopes["MLP out"]["regime"] == "critical"


def test_the_regime_by_the_interval_of_the_slope():
    assert regime_of(-0.5, -0.2) == "linear"
    assert regime_of(0.2, 0.6) == "condensed"
    assert regime_of(-0.05, 0.08) == "critical"
    assert regime_of(-0.3, 0.3) == "not shown"      # straddles a boundary
    assert regime_of(0.05, 0.3) == "not shown"
    assert regime_of(float("nan"), float("nan")) == "not shown"   # one seed
    assert slope([16, 32, 64], [1, 2, 4]) == pytest.approx(1.0)
    assert slope([16, 32, 64], [4, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(slope([16, 16], [1, 2]))
    assert group_of("layer3/W_gate") == "MLP in" and group_of("layer0/attn_norm") is None


def test_bad_input_is_one_line(widths, tmp_path):
    def one_line(*args):
        res = run_cli("probe", *args)
        assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith("Error: ")
        return res.stderr

    files = sorted(widths.glob("*.h5"))
    same = tmp_path / "one-width"
    same.mkdir()
    for f in files:
        if "dmodel16" in f.name:
            os.link(f, same / f.name)
    assert "all of width 16: a slope against the width needs runs of two widths or more" in one_line(
        "regime", "--widths", same)
    other = tmp_path / "other"
    other.mkdir()
    os.link(files[0], other / "a.h5")
    _train(other / "b.h5", "--d-model", "32", "--lr", "0.003")
    said = one_line("regime", "--widths", other)
    assert "differs from" in said and "in lr (0.003 against 0.001)" in said and "width and seed alone" in said
    assert "no run files" in one_line("regime", "--widths", tmp_path / "nothing-*.h5")
    # a file whose first snapshot is not step 0: a Recorder started after the first update
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=32, n_positions=8))
    with probe.Recorder(tmp_path / "late.h5", model, every=5) as rec:
        rec.step(5)
        rec.step(10)
    assert "its first snapshot is step 5, not step 0" in one_line("regime", tmp_path / "late.h5")


# --- the knobs a width sweep and the phase diagram need, each read back by probe gamma ---------------

def _config(**kw):
    from probe_train.config import preset

    return preset("tiny", **kw)


def test_qk_and_vo_gammas_are_apart_and_unset_draw_the_same_weights_as_before(tmp_path):
    import torch

    from probe_train.models import build_model

    run = _train(tmp_path / "qkvo.h5", "--d-model", "32", "--gamma", "0.8", "--gamma-qk", "1.2", "--gamma-vo", "0.4")
    g = probe.gamma(run, step=0)[0].groups
    assert g["attention QK"]["gamma"] == pytest.approx(1.2, abs=0.04)
    assert g["attention VO"]["gamma"] == pytest.approx(0.4, abs=0.04)
    assert g["MLP in"]["gamma"] == pytest.approx(0.8, abs=0.04)
    a = build_model(_config(gamma=0.8), torch.Generator().manual_seed(0)).state_dict()
    b = build_model(_config(gamma=0.8, gamma_qk=0.8, gamma_vo=0.8), torch.Generator().manual_seed(0)).state_dict()
    c = build_model(_config(gamma=0.8, gamma_attn=0.8), torch.Generator().manual_seed(0)).state_dict()
    assert all(torch.equal(a[k], b[k]) and torch.equal(a[k], c[k]) for k in a)


def test_a_reference_width_keeps_the_std_and_d_ff_follows_d_model(tmp_path):
    run = _train(tmp_path / "ref.h5", "--d-model", "64", "--gamma", "0.8", "--gamma-ref-width", "16",
                 "--d-ff-ratio", "4")
    r = probe.gamma(run, step=0)[0]
    assert r.numbers["token_embedding"]["std"] == pytest.approx(16 ** -0.8, rel=0.05)   # not 64^-0.8 = 0.036
    assert r.numbers["layer0/W_out"]["fan_in"] == 256 and probe.info(run)["config"]["d_ff"] == 256
    assert _config(d_model=32, d_ff_ratio=4.0).replace(d_model=128).d_ff == 512   # a sweep's width moves it
    assert "init std 16^-0.8 = 0.109 (gamma_ref_width)" in run_cli("probe", "info", run).stdout


def test_depth_scale_draws_the_residual_outputs_at_std_over_root_2L(tmp_path):
    run = _train(tmp_path / "depth.h5", "--d-model", "64", "--gamma", "0.5", "--depth-scale")
    n = probe.gamma(run, step=0)[0].numbers
    for layer in (0, 1):   # 2 layers: sqrt(2 * 2) = 2
        assert n[f"layer{layer}/W_O"]["std"] / n[f"layer{layer}/W_V"]["std"] == pytest.approx(0.5, rel=0.08)
        assert n[f"layer{layer}/W_out"]["std"] == pytest.approx(32 ** -0.5 / 2, rel=0.08)   # d_ff 32 of tiny
    assert n["layer0/W_Q"]["std"] == pytest.approx(64 ** -0.5, rel=0.08)


def test_adam_eps_reaches_the_optimizer(tmp_path):
    from probe_train.trainer import Trainer

    assert Trainer(_config(adam_eps=1e-12), tmp_path / "a.h5").opt.param_groups[0]["eps"] == 1e-12
    assert Trainer(_config(), tmp_path / "b.h5").opt.param_groups[0]["eps"] == 1e-8


@pytest.mark.parametrize("args, said", [
    (("--adam-eps", "0"), "--adam-eps 0.0: need a positive epsilon"),
    (("--gamma-ref-width", "1"), "need 2 or more"),
    (("--model", "emb-mlp", "--depth-scale"), "the Emb-MLP has none"),
    (("--init-std", "0.02", "--gamma-ref-width", "16"), "not both"),
])
def test_a_bad_knob_is_one_line(tmp_path, args, said):
    res = run_cli("probe-train", "--preset", "tiny", "--out", tmp_path / "x.h5", "--quiet", *args)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and said in res.stderr, res.stderr
    assert not (tmp_path / "x.h5").exists()


def test_gamma_init_of_any_model_takes_qk_and_vo_by_rule_and_attn_for_them_otherwise():
    """A rule may put a model's q/k and v/o projections in the toolkit's qk and vo groups; not given,
    they take attn's gamma (then the default's)."""
    import torch.nn as nn

    from probe_train.gamma import gamma_init_

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.v_proj = nn.Linear(64, 64, bias=False), nn.Linear(64, 64, bias=False)

    rules = {"q_proj.*": "qk", "v_proj.*": "vo"}
    table = gamma_init_(Attn(), {"qk": 1.0, "attn": 0.5, "default": 0.3}, rules=rules, seed=0)
    assert table["q_proj.weight"].std == pytest.approx(64 ** -1.0) and table["q_proj.weight"].group == "qk"
    assert table["v_proj.weight"].std == pytest.approx(64 ** -0.5)   # vo not given: attn's
    table = gamma_init_(Attn(), {"default": 0.3}, rules=rules, seed=0)
    assert table["v_proj.weight"].std == pytest.approx(64 ** -0.3)
