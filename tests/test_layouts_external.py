"""Layouts of models saved by ``transformers``: every canonical tensor and every head's value-output
map against the model's own projections (grouped-query attention included), sharded .bin folders,
bf16 rows read lazily, tied weights counted once, files recognised by their content."""
import json
import os

import numpy as np
import pytest
import torch

import probe
from probe.readers.checkpoints import open_checkpoint, sniff, step_from_name
from probe.readers.layouts import CanonicalReader
from probe.readers.source import CheckpointRun

from conftest import run_cli

D, FF, V = 32, 48, 60


def _configs():
    import transformers as T

    common = dict(vocab_size=V, hidden_size=D, intermediate_size=FF, num_hidden_layers=2, max_position_embeddings=16)
    return {
        "llama": T.LlamaConfig(num_attention_heads=8, num_key_value_heads=2, **common),
        "mistral": T.MistralConfig(num_attention_heads=4, num_key_value_heads=2, **common),
        "qwen2": T.Qwen2Config(num_attention_heads=4, num_key_value_heads=2, **common),
        "gemma": T.GemmaConfig(num_attention_heads=4, num_key_value_heads=1, head_dim=16, **common),
        "phi": T.PhiConfig(num_attention_heads=4, num_key_value_heads=2, partial_rotary_factor=0.5, **common),
        "phi3": T.Phi3Config(num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, **common),
    }


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    import transformers as T

    out = {}
    for family, cfg in _configs().items():
        torch.manual_seed(0)
        model = T.AutoModelForCausalLM.from_config(cfg).eval()
        d = tmp_path_factory.mktemp(family)
        model.save_pretrained(d)
        out[family] = (d, model)
    return out


def _projections(family, attn, x):
    """(q, k, v) of input rows x as the model computes them, without biases: (B, heads, e) each."""
    def lin(mod):
        y = mod(x)
        return y - mod.bias if getattr(mod, "bias", None) is not None else y

    if family == "phi3":
        H, KV = attn.config.num_attention_heads, attn.config.num_key_value_heads
        qkv = lin(attn.qkv_proj)
        e = qkv.shape[1] // (H + 2 * KV)
        q, k, v = qkv[:, :H * e], qkv[:, H * e:(H + KV) * e], qkv[:, (H + KV) * e:]
    else:
        q, k, v = lin(attn.q_proj), lin(attn.k_proj), lin(attn.v_proj)
    e = attn.head_dim
    return (t.reshape(len(x), -1, e) for t in (q, k, v))


def _out_proj(family, attn):
    return attn.dense if family == "phi" else attn.o_proj


@pytest.mark.parametrize("family", list(_configs()))
def test_every_canonical_tensor_matches_the_models_projections(saved, family):
    d, model = saved[family]
    r = CanonicalReader(open_checkpoint(d))
    cfg = model.config
    H, KV = cfg.num_attention_heads, cfg.num_key_value_heads
    assert (r.layout.layers, r.layout.heads) == (2, H) and r.layout.name == {"mistral": "llama", "qwen2": "llama",
                                                                              "gemma": "llama"}.get(family, family)
    x = torch.randn(5, D)
    with torch.no_grad():
        for i in range(2):
            layer = model.model.layers[i]
            attn = layer.self_attn
            q, k, v = _projections(family, attn, x)
            WQ, WK, WV, WO = (torch.from_numpy(r.read(f"layer{i}/{n}")) for n in ("W_Q", "W_K", "W_V", "W_O"))
            assert WQ.shape[0] == H and WK.shape[0] == KV and WV.shape[0] == KV and WO.shape[0] == H
            for want, W in ((q, WQ), (k, WK), (v, WV)):
                assert torch.allclose(torch.einsum("bd,hde->bhe", x, W), want, atol=1e-5)
            out = _out_proj(family, attn)
            z = torch.randn(5, H, WO.shape[1])
            ref = out(z.reshape(5, -1)) - (out.bias if getattr(out, "bias", None) is not None else 0)
            assert torch.allclose(torch.einsum("bhe,hed->bd", z, WO), ref, atol=1e-5)
            mlp = layer.mlp
            W_in = torch.from_numpy(r.read(f"layer{i}/W_in"))
            if family == "phi":
                assert torch.allclose(x @ W_in, mlp.fc1(x) - mlp.fc1.bias, atol=1e-5)
            elif family == "phi3":
                gate, up = mlp.gate_up_proj(x).chunk(2, dim=-1)
                assert torch.allclose(x @ W_in, up, atol=1e-5)
                assert torch.allclose(x @ torch.from_numpy(r.read(f"layer{i}/W_gate")), gate, atol=1e-5)
            else:
                assert torch.allclose(x @ W_in, mlp.up_proj(x), atol=1e-5)
                assert torch.allclose(x @ torch.from_numpy(r.read(f"layer{i}/W_gate")), mlp.gate_proj(x), atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gemma", "phi3"])
def test_align_pairs_each_query_head_with_its_value_head(saved, family):
    """Under grouped-query attention head h reads value head h // (H / KV): the OV map of every head
    against the model's own v and output projections."""
    d, model = saved[family]
    H, KV = model.config.num_attention_heads, model.config.num_key_value_heads
    attn = model.model.layers[1].self_attn
    eye = torch.eye(D)
    with torch.no_grad():
        _, _, v = _projections(family, attn, eye)                      # (D, KV, e): row j = basis vector j
        W_out = _out_proj(family, attn).weight.detach().T             # (H*e, D)
    e = v.shape[-1]
    for h in range(H):
        r = probe.align(d, layer=1, head=h)[0]
        kv = h // (H // KV)
        assert r.value_head == kv
        ov = (v[:, kv] @ W_out[h * e:(h + 1) * e]).numpy()
        np.testing.assert_allclose(r.ov_singular_values[:e], np.linalg.svd(ov, compute_uv=False)[:e], rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_allclose(r.singular_values, np.linalg.svd(v[:, kv].numpy(), compute_uv=False), rtol=1e-4)
    res = run_cli("probe", "align", d, "--layer", "1", "--head", H)
    assert res.returncode == 2 and f"--head {H} out of range" in res.stderr


def test_phi_weight_probes_and_info_through_the_cli(saved, tmp_path):
    d, _ = saved["phi"]
    named = tmp_path / "phi-2"                                       # a name with a number is not a step
    os.symlink(d, named)
    for cmd in (["similarity", "--tokens", "0:10"], ["pca", "--tokens", "0:10"], ["condense"], ["spectrum"],
                ["align", "--head", "3"]):
        res = run_cli("probe", cmd[0], named, *cmd[1:], "--format", "json")
        assert res.returncode == 0, (cmd, res.stderr)
        assert json.loads(res.stdout)["results"][0]["step"] == 0
    res = run_cli("probe", "info", named, "--format", "json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert (info["format"], info["layout"], info["layers"], info["heads"], info["step"]) == \
        ("safetensors", "phi", 2, 4, None)
    assert info["tensors"]["model.embed_tokens.weight"] == {"shape": [V, D], "dtype": "f32"}
    res = run_cli("probe", "info", named)
    assert "layout     phi: 2 layers, 4 heads" in res.stdout


def test_sharded_pytorch_bin_folder(saved, tmp_path):
    _, model = saved["llama"]
    sd = model.state_dict()
    names = list(sd)
    half = len(names) // 2
    shards = {"pytorch_model-00001-of-00002.bin": names[:half], "pytorch_model-00002-of-00002.bin": names[half:]}
    for file, keys in shards.items():
        torch.save({k: sd[k].clone() for k in keys}, tmp_path / file)
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"weight_map": {k: f for f, keys in shards.items() for k in keys}}))
    (tmp_path / "config.json").write_text(model.config.to_json_string())
    r = CanonicalReader(open_checkpoint(tmp_path))
    assert r.source.kind == "sharded pytorch" and r.layout.name == "llama"
    ref = CanonicalReader(open_checkpoint(saved["llama"][0]))
    for n in ref.names():
        np.testing.assert_array_equal(r.read(n), ref.read(n), err_msg=n)
    res = run_cli("probe", "similarity", tmp_path, "--tokens", "0:8", "--format", "json")
    assert res.returncode == 0, res.stderr
    (tmp_path / "pytorch_model-00002-of-00002.bin").unlink()
    res = run_cli("probe", "similarity", tmp_path, "--tokens", "0:8")
    assert res.returncode == 2 and "shard pytorch_model-00002-of-00002.bin is missing" in res.stderr


def test_bf16_rows_are_read_lazily_and_equal_the_fp32_ones(saved, tmp_path):
    from safetensors.torch import save_file

    _, model = saved["qwen2"]
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    save_file(sd, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(model.config.to_json_string())
    with CheckpointRun(str(tmp_path)) as run:
        assert run.tensor("token_embedding").shape == (1, V, D)
        res = probe.similarity(tmp_path, "3:9")[0]
        assert run.tensor("token_embedding")._last is None            # the shape came from the header
    from probe.readers.source import open_source

    with open_source(tmp_path) as run:
        t = run.tensor("token_embedding")
        rows = t[0, 3:9]
        assert t._last is None and rows.shape == (6, D)               # only the rows were read
    want = sd["model.embed_tokens.weight"][3:9].float().numpy()
    np.testing.assert_array_equal(rows, want)
    v = want / np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(res.matrix, v @ v.T, atol=1e-6)


def test_nanogpt_tied_lm_head_is_counted_once(tmp_path):
    wte = torch.randn(V, D)
    sd = {"transformer.wte.weight": wte, "lm_head.weight": wte,       # tied: one storage, two names
          "transformer.h.0.attn.c_attn.weight": torch.randn(3 * D, D),
          "transformer.h.0.attn.c_proj.weight": torch.randn(D, D)}
    torch.save({"model": sd, "model_args": {"n_head": 4}, "iter_num": 3}, tmp_path / "ckpt.pt")
    layers = probe.spectrum(tmp_path / "ckpt.pt")[0].layers
    assert [l.name for l in layers] == ["transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_proj.weight",
                                        "transformer.wte.weight"]
    info = probe.info(tmp_path / "ckpt.pt")
    assert info["tensors"]["lm_head.weight"]["tied_to"] == "transformer.wte.weight"
    assert info["step"] == 3 and info["layout"] == "nanogpt"


@pytest.mark.parametrize("name,step", [("phi-2", None), ("llama-7b", None), ("gpt2-xl-1", None),
                                       ("pythia-160m-step143000", 143000), ("checkpoint-500", 500),
                                       ("model_20.pt", 20), ("epoch_3.pt", 3), ("run-iter_300.pt", 300)])
def test_only_step_patterns_give_a_step(name, step):
    assert step_from_name(name) == step


def test_files_are_recognised_by_content_without_torch(tmp_path):
    fake = tmp_path / "run.h5"
    fake.write_text("col1,col2\n1,2\n")
    assert sniff(str(fake)) == "unknown"
    code = ("import sys, probe\n"
            "try:\n    probe.similarity(sys.argv[1], '0:2')\n"
            "except probe.ProbeError as e:\n    print(e)\n"
            "print('torch' in sys.modules)\n")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code, str(fake)], capture_output=True, text=True).stdout.splitlines()
    assert out == [f"{fake}: not an HDF5 file: its content is neither HDF5, safetensors, a torch.save file nor a "
                   "JSON index", "False"]
    res = run_cli("probe", "info", fake)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [f"Error: {out[0]}"]
