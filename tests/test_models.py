import numpy as np
import pytest
import torch

from probe_train.config import preset
from probe_train.models import build_model


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


# --- gamma per module, init_std, the LLaMA-style family ------------------------------------------

def _module_of(name: str) -> str:
    if name in ("W_E", "W_pos"):
        return "embed"
    if name in ("W_U", "W_2"):
        return "head"
    return "attn" if ".attn." in name else "mlp"


def _expected_fan(cfg, name: str) -> int:
    d, ff = cfg.d_model, cfg.d_ff
    if name.endswith("attn.W_O"):
        return cfg.heads * cfg.head_dim
    return ff if name.endswith("mlp.W_out") or name == "W_2" else d


@pytest.mark.parametrize("model", ["transformer", "llama", "emb-mlp"])
@pytest.mark.parametrize("init", [dict(gamma=0.5), dict(gamma=1.0),
                                  dict(gamma=0.5, gamma_embed=1.0, gamma_attn=0.8, gamma_mlp=0.3, gamma_head=1.2),
                                  dict(gamma=0.7, init_std=0.02)])
def test_every_weight_std_follows_its_module_rule(model, init):
    """Measured std of every weight matrix against std = fan_in^-gamma(module) (or init_std), for all
    three families; norms start at 1, biases at 0."""
    extra = dict(gated_attention=True, kv_heads=2) if model == "llama" else {}
    cfg = preset("tiny", model=model, d_model=128, d_ff=192, heads=4, vocab_size=401, **extra, **init)
    m = build_model(cfg, torch.Generator().manual_seed(0))
    checked = set()
    for name, p in m.named_parameters():
        if name.rsplit(".", 1)[-1].startswith("W"):
            mod = _module_of(name)
            want = cfg.init_std or _expected_fan(cfg, name) ** -(init.get(f"gamma_{mod}") or cfg.gamma)
            assert p.std().item() == pytest.approx(want, rel=0.08), (name, mod)
            assert abs(p.mean().item()) < 0.1 * want, name
            checked.add(mod)
        elif name.endswith(".weight"):
            assert torch.all(p == 1), name      # LayerNorm / RMSNorm gains
        else:
            assert torch.all(p == 0), name
    assert checked == ({"embed", "mlp", "head"} if model == "emb-mlp" else {"embed", "attn", "mlp", "head"})


def test_llama_tied_embeddings_use_the_embedding_gamma():
    cfg = preset("llm-tiny", vocab_size=300, tie_embeddings=True, gamma=0.5, gamma_embed=1.0, gamma_head=0.3)
    m = build_model(cfg, torch.Generator().manual_seed(0))
    assert m.W_U is None and "unembedding" not in m.roles()
    assert m.W_E.std().item() == pytest.approx(cfg.d_model ** -1.0, rel=0.05)
    x = torch.randint(0, 300, (2, 8))
    h = m._run(x)[0]
    assert torch.allclose(m.lm_logits(x), m.ln_f(h) @ m.W_E.T, atol=1e-6)


def _llama_reference(m, x: torch.Tensor) -> torch.Tensor:
    """The LLaMA forward written out head by head: RMSNorm, RoPE, causal softmax, SwiGLU."""
    import math

    cfg = m.cfg
    T, e = x.shape[1], cfg.head_dim

    def rms(v, w):
        return v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * w

    pos = torch.arange(T, dtype=torch.float32)[:, None]
    freq = cfg.rope_theta ** (-torch.arange(0, e, 2, dtype=torch.float32) / e)
    ang = pos * freq                                       # (T, e/2): pair (i, i + e/2) rotates by ang[:, i]

    def rope(v):                                           # (T, e)
        a, b = v[:, : e // 2], v[:, e // 2:]
        return torch.cat([a * ang.cos() - b * ang.sin(), b * ang.cos() + a * ang.sin()], dim=-1)

    h = m.W_E[x[0]]
    for blk in m.blocks:
        a_in = rms(h, blk.ln1.weight)
        out = torch.zeros_like(h)
        for hd in range(cfg.heads):
            kv = hd // (cfg.heads // cfg.n_kv_heads)
            q, k, v = rope(a_in @ blk.attn.W_Q[hd]), rope(a_in @ blk.attn.W_K[kv]), a_in @ blk.attn.W_V[kv]
            s = q @ k.T / math.sqrt(e) + torch.full((T, T), float("-inf")).triu(1)
            z = s.softmax(-1) @ v
            if blk.attn.W_G is not None:
                z = z * torch.sigmoid(a_in @ blk.attn.W_G[:, hd])[:, None]
            out = out + z @ blk.attn.W_O[hd]
        h = h + out
        f_in = rms(h, blk.ln2.weight)
        h = h + (torch.nn.functional.silu(f_in @ blk.mlp.W_gate) * (f_in @ blk.mlp.W_in)) @ blk.mlp.W_out
    return rms(h, m.ln_f.weight) @ m.W_U


@pytest.mark.parametrize("extra", [{}, dict(kv_heads=1), dict(gated_attention=True)])
def test_llama_matches_a_head_by_head_reference(extra):
    cfg = preset("llm-tiny", vocab_size=50, d_model=32, heads=4, d_ff=48, gamma=0.5, **extra)
    m = build_model(cfg, torch.Generator().manual_seed(2))
    x = torch.randint(0, 50, (1, 12))
    full = m.lm_logits(x)[0]
    torch.testing.assert_close(full, _llama_reference(m, x), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(m(x)[0], full[-1], atol=1e-5, rtol=1e-4)   # the last-position shortcut
    a = m.attention_maps(x)
    assert a.shape == (cfg.layers, cfg.heads, 1, 12, 12) and torch.all(a.triu(1) == 0)


def test_inspect_reports_each_norm_site():
    cfg = preset("llm-tiny", vocab_size=50, gamma=1.0)
    m = build_model(cfg, torch.Generator().manual_seed(0)).eval()
    x = torch.randint(0, 50, (3, 16))
    seen = m.inspect(x)
    assert list(m.norms()) == ["layer0/attn_norm", "layer0/mlp_norm", "layer1/attn_norm", "layer1/mlp_norm",
                               "final_norm"]
    # the first site normalises the embeddings: its mean square is that of the embedding rows
    assert seen["norm_ms"][0].item() == pytest.approx(m.W_E[x].pow(2).mean().item(), rel=1e-5)
    assert seen["hidden_norm"].shape == (cfg.layers + 1, 3, 16)
    torch.testing.assert_close(seen["hidden_norm"][0], m.W_E[x].norm(dim=-1))
    assert seen["attention"].shape == (cfg.layers, cfg.heads, 3, 16, 16)


def test_the_trainer_optimizes_with_torchs_adamw(tmp_path):
    """torch.optim.AdamW (not fused on a CPU), its weight decay on the matrices and none on the vectors,
    the configuration's learning rate and betas."""
    import torch

    from probe_train import Trainer

    cfg = preset("tiny", weight_decay=0.1, beta2=0.98)
    trainer = Trainer(cfg, tmp_path / "r.h5", show_progress=False)
    trainer.release()
    opt = trainer.opt
    assert type(opt) is torch.optim.AdamW and not opt.defaults["fused"]
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and all(p.ndim >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.ndim < 2 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(trainer.model.parameters()))
    assert decay["lr"] == cfg.lr and decay["betas"] == (cfg.beta1, 0.98)
