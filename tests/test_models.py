import numpy as np
import pytest
import torch

from train.config import preset
from train.models import build_model


@pytest.mark.parametrize("gamma", [0.3, 0.5, 0.8])
@pytest.mark.parametrize("model", ["transformer", "emb-mlp"])
def test_gamma_init_std_follows_fan_in_rule(gamma, model):
    cfg = preset("tiny", model=model, gamma=gamma, d_model=96, d_ff=160, heads=2, vocab_size=301)
    m = build_model(cfg, torch.Generator().manual_seed(0))
    d, H, e, ff = cfg.d_model, cfg.heads, cfg.head_dim, cfg.d_ff
    expected_fan = {"W_E": d, "W_pos": d, "W_U": d, "W_1": d, "W_2": ff}
    for i in range(cfg.layers):
        expected_fan.update({f"blocks.{i}.attn.W_Q": d, f"blocks.{i}.attn.W_K": d, f"blocks.{i}.attn.W_V": d,
                             f"blocks.{i}.attn.W_O": H * e, f"blocks.{i}.mlp.W_in": d, f"blocks.{i}.mlp.W_out": ff})
    checked = 0
    for name, p in m.named_parameters():
        if name in expected_fan:
            want = expected_fan[name] ** (-gamma)
            assert p.std().item() == pytest.approx(want, rel=0.1), name
            assert abs(p.mean().item()) < 0.1 * want, name
            checked += 1
        elif ".b_" in name or name.startswith("b_"):
            assert torch.all(p == 0), name
        elif name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
            assert torch.all(p == 1), name
    assert checked == sum(1 for n in expected_fan if n in dict(m.named_parameters()))
    assert checked >= 3


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_last_position_shortcut_matches_full_forward(norm):
    cfg = preset("tiny", norm=norm, gamma=0.5)
    m = build_model(cfg, torch.Generator().manual_seed(1))
    x = torch.randint(21, 31, (5, cfg.seq_len))
    fast = m(x)
    h = m.W_E[x] + m.W_pos
    for block in m.blocks:
        h, _ = block(h)
    assert torch.allclose(fast, m._logits(h[:, -1]), atol=1e-5)


def test_attention_maps_are_causal_distributions():
    cfg = preset("tiny")
    m = build_model(cfg)
    a = m.attention_maps(torch.randint(21, 31, (3, cfg.seq_len)))
    assert a.shape == (cfg.layers, cfg.heads, 3, cfg.seq_len, cfg.seq_len)
    assert torch.allclose(a.sum(-1), torch.ones(()))
    assert torch.all(a.triu(1) == 0)
    assert torch.allclose(a[:, :, :, 0, 0], torch.ones(()))


def test_emb_mlp_reads_key_and_anchors_only():
    cfg = preset("tiny", model="emb-mlp")
    m = build_model(cfg)
    x = torch.tensor([[21, 22, 23, 5, 6, 24, 25, 26, 27]])
    y = torch.tensor([[30, 30, 23, 5, 6, 29, 29, 29, 29]])  # same key + anchors, other noise
    kp = torch.tensor([2])
    assert torch.equal(m(x, kp), m(y, kp))
    expected = torch.relu(m.W_E[torch.tensor([23, 5, 6])].sum(0) @ m.W_1 + m.b_1) @ m.W_2 + m.b_2 \
        if cfg.activation == "relu" else None
    if expected is not None:
        assert torch.allclose(m(x, kp)[0], expected)
