"""probe_train.gamma_init_ on a plain torch model, tiny randomly initialised Hugging Face models (GPT-2,
LLaMA, BERT) and the toolkit's own: the measured std of every matrix against fan_in^-gamma, tied
weights drawn once, biases and norms, the same draws as probe-train, seeds, and bad input."""
import json
import math

import pytest
import torch
import torch.nn as nn

from probe.errors import ProbeError
from probe_train import GammaInitTable, gamma_init_
from probe_train.config import preset
from probe_train.models import build_model

T = pytest.importorskip("transformers")
T.logging.set_verbosity_error()


def gpt2():
    return T.GPT2LMHeadModel(T.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=500, n_positions=64,
                                          bos_token_id=0, eos_token_id=0))


def expected_fan_in(module: nn.Module, p: torch.Tensor) -> int:
    """Written out here, apart from the implementation: the fan-in each layer type has."""
    if isinstance(module, nn.Embedding):
        return p.shape[1]              # d_model, the papers' rule for embedding tables
    if type(module).__name__ == "Conv1D":
        return p.shape[0]              # GPT-2's Conv1D: weight (in, out)
    assert isinstance(module, nn.Linear), type(module)
    return p.shape[1]                  # nn.Linear: weight (out, in)


def check_stds(model: nn.Module, table: GammaInitTable, gamma) -> int:
    """Each drawn matrix: its row's fan-in and std are the rule's, and its measured std and mean match.

    The sample std of n draws from N(0, s^2) has a relative standard error of about 1 / sqrt(2n), the
    mean a standard error of s / sqrt(n): six of each bounds a chance failure far below 1e-8 per matrix,
    while a wrong fan-in (64 against 256 at gamma 0.8: a factor 3) lies many times outside."""
    params = dict(model.named_parameters(remove_duplicate=False))
    modules = dict(model.named_modules(remove_duplicate=False))
    drawn = 0
    for row in table:
        if row.init != "normal":
            continue
        p = params[row.name].detach().float()
        fan = expected_fan_in(modules[row.name.rpartition(".")[0]], p)
        g = gamma[row.group] if isinstance(gamma, dict) else gamma
        assert row.fan_in == fan, row
        assert row.std == pytest.approx(fan ** -g), row
        n = p.numel()
        assert abs(p.std().item() / row.std - 1) < 6 / math.sqrt(2 * n), row
        assert abs(p.mean().item()) < 6 * row.std / math.sqrt(n), row
        drawn += 1
    return drawn


def check_small(model: nn.Module, table: GammaInitTable) -> None:
    params = dict(model.named_parameters(remove_duplicate=False))
    for row in table:
        if row.init == "zeroed":
            assert torch.all(params[row.name] == 0), row
        elif row.init == "ones":
            assert torch.all(params[row.name] == 1), row


def test_plain_module_linear_embedding_layernorm():
    model = nn.Sequential(nn.Embedding(300, 32), nn.Linear(32, 48), nn.LayerNorm(48), nn.Linear(48, 10))
    with torch.no_grad():   # norms and biases away from their defaults: gamma_init_ must set them
        for p in model.parameters():
            p.uniform_(2, 3)
    table = gamma_init_(model, 0.7, seed=1)
    assert check_stds(model, table, 0.7) == 3
    check_small(model, table)
    assert [(r.name, r.group, r.init) for r in table] == [
        ("0.weight", "embed", "normal"), ("1.weight", "other", "normal"), ("1.bias", "", "zeroed"),
        ("2.weight", "", "ones"), ("2.bias", "", "zeroed"), ("3.weight", "other", "normal"),
        ("3.bias", "", "zeroed")]
    assert table["1.weight"].fan_in == 32 and table["3.weight"].fan_in == 48


def test_gpt2_conv1d_fan_in_tied_head_and_layernorm():
    model = gpt2()
    table = gamma_init_(model, 0.8, seed=0)
    # 2 embeddings + 4 Conv1D per block; lm_head is wte: drawn once, reported as tied
    assert check_stds(model, table, 0.8) == 2 + 4 * 2
    check_small(model, table)
    head = table["lm_head.weight"]
    assert head.init == "tied" and head.tied_to == "transformer.wte.weight"
    assert model.lm_head.weight is model.transformer.wte.weight
    # Conv1D's fan-in is its first dimension: c_proj of the MLP reads the 256 hidden units
    assert table["transformer.h.0.mlp.c_proj.weight"].fan_in == 256
    assert table["transformer.h.0.mlp.c_fc.weight"].fan_in == 64
    assert {r.group for r in table if r.init == "normal"} == {"embed", "attn", "mlp"}
    assert all(r.init == "ones" for r in table if r.name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")))


def test_per_group_gammas_and_the_tied_head_takes_the_embeddings_gamma():
    model = gpt2()
    gammas = {"embed": 0.3, "attn": 0.6, "mlp": 0.9, "head": 1.2}
    table = gamma_init_(model, gammas, seed=0)
    assert check_stds(model, table, gammas) == 10
    assert table["transformer.wte.weight"].std == pytest.approx(64 ** -0.3)


def test_llama_and_bert():
    llama = T.LlamaForCausalLM(T.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             max_position_embeddings=64))
    gammas = {"embed": 0.5, "attn": 0.8, "mlp": 0.8, "head": 1.0}
    table = gamma_init_(llama, gammas, seed=2)
    assert check_stds(llama, table, gammas) == 1 + 7 * 2 + 1
    check_small(llama, table)
    assert table["lm_head.weight"].group == "head" and table["lm_head.weight"].fan_in == 64
    assert table["model.layers.0.mlp.down_proj.weight"].fan_in == 128
    assert sum(r.init == "ones" for r in table) == 2 * 2 + 1   # the RMSNorm gains

    bert = T.BertModel(T.BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=128, max_position_embeddings=64))
    table = gamma_init_(bert, 0.6, seed=3)
    assert check_stds(bert, table, 0.6) == 3 + 6 * 2 + 1
    check_small(bert, table)
    groups = {r.name: r.group for r in table}
    assert groups["encoder.layer.0.attention.output.dense.weight"] == "attn"
    assert groups["encoder.layer.0.intermediate.dense.weight"] == "mlp"
    assert groups["encoder.layer.0.output.dense.weight"] == "mlp"
    assert groups["embeddings.token_type_embeddings.weight"] == "embed"
    # BERT's word embedding has a padding row (pad_token_id 0): drawn, then zeroed, as torch and HF init it
    words = bert.embeddings.word_embeddings
    assert words.padding_idx == 0 and table["embeddings.word_embeddings.weight"].zero_row == 0
    assert torch.all(words.weight[0] == 0) and torch.all(words.weight[1:].std(1) > 0)
    assert "normal, row 0 zeroed" in str(table)


def test_a_padding_row_is_zeroed_after_the_same_draw():
    plain, padded = nn.Embedding(50, 16), nn.Embedding(50, 16, padding_idx=-1)   # (torch makes it 49)
    gamma_init_(plain, 0.5, seed=7)
    table = gamma_init_(padded, 0.5, seed=7)
    assert table[0].zero_row == 49
    assert torch.all(padded.weight[49] == 0)
    assert torch.equal(padded.weight[:49], plain.weight[:49])   # the other rows: the draws of the same seed


@pytest.mark.parametrize("overrides", [
    dict(gamma=0.8, seed=3),
    dict(gamma=0.6, seed=1, bias=True, gamma_attn=0.9, gamma_head=0.3),
    dict(model="llama", gamma=0.7, seed=2, head_bias=True, gated_attention=True),
    dict(model="emb-mlp", gamma=0.5, seed=4, bias=True, head_bias=True),
    dict(gamma=0.7, seed=5, gamma_embed=0, gamma_mlp=0.4),
], ids=["transformer", "transformer-groups", "llama", "emb-mlp", "a-group-at-0"])
def test_the_toolkit_models_get_probe_trains_draws(overrides):
    cfg = preset("tiny", **overrides)
    ref = build_model(cfg, torch.Generator().manual_seed(cfg.seed))   # as the trainer builds it
    model = build_model(cfg, torch.Generator().manual_seed(cfg.seed + 100))
    # the config's own values, 0 ("not set": --gamma-embed 0) included, beside the default
    gammas = {"default": cfg.gamma, **{g: getattr(cfg, f"gamma_{g}") for g in ("embed", "attn", "mlp", "head")}}
    table = gamma_init_(model, gammas, seed=cfg.seed)
    ref_state = ref.state_dict()
    for name, t in model.state_dict().items():
        assert torch.equal(t, ref_state[name]), name
    assert {r.name for r in table if r.init == "normal"} == set(model.fan_in())
    if cfg.head_bias:
        assert table[model.head_bias_name].init == "uniform"


def test_seeded_and_deterministic_whatever_the_dtype():
    a, b, c = gpt2(), gpt2(), gpt2()
    gamma_init_(a, 0.5, seed=7)
    gamma_init_(b, 0.5, seed=torch.Generator().manual_seed(7))
    gamma_init_(c, 0.5, seed=8)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["transformer.wte.weight"], sc["transformer.wte.weight"])
    # the draws are made in float32: a bf16 model gets the same numbers, rounded
    half = gpt2().to(torch.bfloat16)
    gamma_init_(half, 0.5, seed=7)
    assert torch.equal(half.transformer.h[1].mlp.c_fc.weight, a.transformer.h[1].mlp.c_fc.weight.to(torch.bfloat16))


def test_rules_name_the_groups():
    model = nn.Sequential(nn.Embedding(100, 32), nn.Linear(32, 64), nn.Linear(64, 100))
    gammas = {"embed": 0.5, "mlp": 0.8, "head": 1.0}
    table = gamma_init_(model, gammas, rules={"1.*": "mlp", "2.*": "head"})
    assert [r.group for r in table if r.init == "normal"] == ["embed", "mlp", "head"]
    table = gamma_init_(model, gammas, rules=lambda name: {"1.weight": "mlp", "2.weight": "head"}.get(name))
    assert [r.group for r in table if r.init == "normal"] == ["embed", "mlp", "head"]
    assert check_stds(model, table, gammas) == 3
    # a group with no gamma: one line naming it and a matrix in it, before anything is drawn
    before = model[1].weight.clone()
    with pytest.raises(ProbeError, match=r"^gamma has no value for group 'other' \(1.weight\)"):
        gamma_init_(model, {"embed": 0.5})
    assert torch.equal(model[1].weight, before)
    assert gamma_init_(model, {"embed": 0.5, "default": 0.9})["2.weight"].std == pytest.approx(64 ** -0.9)


def test_the_table_prints_and_is_plain_data():
    model = gpt2()
    table = gamma_init_(model, 0.5, seed=0)
    lines = str(table).splitlines()
    assert lines[0].split() == ["parameter", "module", "shape", "group", "fan_in", "std", "init"]
    assert len(lines) == 1 + len(list(model.named_parameters(remove_duplicate=False)))
    assert lines[1].split() == ["transformer.wte.weight", "Embedding", "500x64", "embed", "64", "0.125", "normal"]
    assert lines[-1].split()[-3:] == ["tied", "to", "transformer.wte.weight"]
    assert len(str(table[:3]).splitlines()) == 4 and table[0].name == "transformer.wte.weight"
    data = json.loads(json.dumps(table.to_dict()))
    assert data["gamma"] == {"default": 0.5} and data["seed"] == 0
    assert data["rows"][0] == {"name": "transformer.wte.weight", "module": "Embedding", "shape": [500, 64],
                               "init": "normal", "group": "embed", "fan_in": 64, "std": 0.125, "tied_to": "",
                               "zero_row": None}


@pytest.mark.parametrize("kwargs, message", [
    (dict(gamma=0), "gamma must be positive"),
    (dict(gamma=-0.5), "gamma must be positive"),
    (dict(gamma=float("nan")), "gamma=nan: need a finite number"),
    (dict(gamma=float("inf")), "gamma=inf: need a finite number"),
    (dict(gamma="0.5"), "gamma='0.5': need a finite number"),
    (dict(gamma=True), "gamma=True: need a finite number"),
    (dict(gamma={"attn": -1}), "gamma['attn'] must be positive (or 0: the default's)"),
    (dict(gamma={"default": 0}), "gamma['default'] must be positive"),
    (dict(gamma={"mpl": 0.5}), "unknown gamma group 'mpl' (known: embed, attn, mlp, head, other, qk, vo, default)"),
    (dict(gamma=0.5, seed=-1), "seed=-1: need an integer 0 or more, or a torch.Generator"),
    (dict(gamma=0.5, seed=1.5), "seed=1.5: need an integer 0 or more, or a torch.Generator"),
    (dict(gamma=0.5, rules={"1.*": "mpl"}), "rules: '1.*' -> 'mpl': a group must be one of embed, attn, mlp, "
                                            "head, other, qk, vo"),
    (dict(gamma=0.5, rules=["1.*"]), "rules must be a dict of name patterns -> group or a function of a name"),
])
def test_bad_input_is_one_line(kwargs, message):
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4))
    with pytest.raises(ProbeError) as err:
        gamma_init_(model, **kwargs)
    assert str(err.value) == message


def test_a_model_without_weight_matrices():
    with pytest.raises(ProbeError, match=r"^LayerNorm has no weight matrix to gamma-initialise"):
        gamma_init_(nn.LayerNorm(8), 0.5)
    with pytest.raises(ProbeError, match=r"^model must be a torch nn.Module, not dict$"):
        gamma_init_({"w": torch.zeros(2, 2)}, 0.5)


def test_the_how_to_pages_claims():
    """docs/how-to/gamma-init.md quotes the measured stds of its GPT-2: the words hold for the draws."""
    from conftest import ROOT

    text = " ".join((ROOT / "docs" / "how-to" / "gamma-init.md").read_text().split())
    assert "within 0.3 % of fan_in^−γ" in text
    assert "a matrix's 12,288 to 32,000 draws (1/√(2n): 0.6 % to 0.4 %)" in text
    assert "the ratios repeat at γ = 1.0" in text and "8-fold (64^0.5)" in text and "16-fold (256^0.5)" in text
    names = ["transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", "transformer.h.0.mlp.c_proj.weight"]
    ratios = {}
    for gamma in (0.5, 1.0):
        model = gpt2()
        table = gamma_init_(model, gamma, seed=0)
        weights = dict(model.named_parameters())
        ratios[gamma] = [weights[n].std().item() / table[n].std for n in names]
        sizes = [weights[n].numel() for n in names]
    assert all(abs(r - 1) < 0.003 for r in ratios[0.5])
    assert ratios[1.0] == pytest.approx(ratios[0.5], abs=1e-5)
    assert (min(sizes), max(sizes)) == (12288, 32000)
    assert (round(100 / math.sqrt(2 * 12288), 1), round(100 / math.sqrt(2 * 32000), 1)) == (0.6, 0.4)
    assert (64 ** 0.5, 256 ** 0.5) == (8, 16)


def test_a_torch_transformer_layer():
    """nn.TransformerEncoderLayer: nn.MultiheadAttention's raw in_proj_weight (PyTorch's fan-in, its
    second dimension) and its biases, the FFN named linear1/linear2, norms named norm1/norm2."""
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    layer.self_attn = nn.MultiheadAttention(32, 4, add_bias_kv=True, batch_first=True)
    table = gamma_init_(layer, {"attn": 0.9, "mlp": 0.6}, seed=0)
    assert [(r.name, r.group, r.fan_in) for r in table if r.init == "normal"] == [
        ("self_attn.in_proj_weight", "attn", 32), ("self_attn.out_proj.weight", "attn", 32),
        ("linear1.weight", "mlp", 32), ("linear2.weight", "mlp", 64)]
    assert {r.name for r in table if r.init == "zeroed"} >= {"self_attn.in_proj_bias", "self_attn.bias_k",
                                                              "self_attn.bias_v", "linear1.bias"}
    assert {r.name for r in table if r.init == "ones"} == {"norm1.weight", "norm2.weight"}
    check_small(layer, table)
    with pytest.raises(ProbeError, match=r"^rules\('self_attn.in_proj_weight'\) gave 'ffn': a group must be"):
        gamma_init_(layer, 0.5, rules=lambda name: "ffn")


def test_gpt_neox_names():
    model = T.GPTNeoXForCausalLM(T.GPTNeoXConfig(vocab_size=300, hidden_size=64, num_hidden_layers=1,
                                                 num_attention_heads=4, intermediate_size=128,
                                                 max_position_embeddings=64))
    table = gamma_init_(model, 0.7, seed=0)
    assert [r.group for r in table if r.init == "normal"] == ["embed", "attn", "attn", "mlp", "mlp", "head"]
    assert check_stds(model, table, 0.7) == 6
    check_small(model, table)


def test_a_norm_that_scales_by_one_plus_its_weight_gets_zero():
    """Gemma's RMSNorm computes x_hat * (1 + weight): its identity is weight 0, and gamma_init_ tells it
    from LLaMA's (x_hat * weight) by what it does, not by its class name."""
    gemma = T.GemmaForCausalLM(T.GemmaConfig(vocab_size=300, hidden_size=64, intermediate_size=128,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                                             head_dim=16, max_position_embeddings=64))
    with torch.no_grad():
        for m in gemma.modules():
            if "RMSNorm" in type(m).__name__:
                m.weight.fill_(0.5)   # away from both identities
    gemma.train()
    table = gamma_init_(gemma, 0.5, seed=0)
    norms = [r for r in table if "norm" in r.name]
    assert len(norms) == 2 * 2 + 1 and all(r.init == "zeroed" for r in norms), [(r.name, r.init) for r in norms]
    assert all(torch.all(dict(gemma.named_parameters())[r.name] == 0) for r in norms)
    assert gemma.training   # the mode it was in, after the norms were run once in eval mode

    class ScaledByWeight(nn.Module):   # a custom norm named as one: x_hat * weight
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.full((8,), 3.0))

        def forward(self, x):
            return x / x.norm(dim=-1, keepdim=True) * self.weight

    model = nn.Sequential()
    model.add_module("proj", nn.Linear(8, 8))
    model.add_module("my_norm", ScaledByWeight())
    model.add_module("bn_norm", nn.BatchNorm1d(8))
    before = model.bn_norm.running_mean.clone()
    table = gamma_init_(model, 0.5, seed=0)
    assert table["my_norm.weight"].init == "ones" and torch.all(model.my_norm.weight == 1)
    assert table["bn_norm.weight"].init == "ones" and torch.equal(model.bn_norm.running_mean, before)
