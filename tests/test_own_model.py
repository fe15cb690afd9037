"""Recording a model of your own (issue 58, item 12): a name-mapping file's ``transpose`` takes the
model's own names too and refuses one it does not know; PyTorch's ``nn.MultiheadAttention`` /
``nn.TransformerEncoder`` (fused ``in_proj_weight``) is a layout, its heads checked against the module's
own forward; a wrong mapping is refused at record time in one line; and ``probe validate`` reports
whatever ``probe info`` refuses. Real torch modules, real files, the real CLI."""
import json
import math

import h5py
import numpy as np
import pytest
import torch

import probe
from conftest import run_cli
from probe.format import Run
from probe.readers.checkpoints import open_checkpoint
from probe.readers.layouts import CanonicalReader

D, FF, V, H = 16, 24, 20, 4


class Tiny(torch.nn.Module):
    """A plain model with names of its own: one attention block (q, k, v, o) and an MLP (up, down)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(V, D)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D, bias=False) for _ in range(4))
        self.up, self.down = torch.nn.Linear(D, FF), torch.nn.Linear(FF, D)
        self.out = torch.nn.Linear(D, V)


OWN = {"heads": 2, "token_embedding": "emb.weight", "unembedding": "out.weight", "layer0/W_Q": "q.weight",
       "layer0/W_K": "k.weight", "layer0/W_V": "v.weight", "layer0/W_O": "o.weight", "layer0/W_in": "up.weight",
       "layer0/W_out": "down.weight"}


def _mapping(tmp_path, m, name="map.json"):
    path = tmp_path / name
    path.write_text(json.dumps(m))
    return str(path)


def _record(path, model, mapping, **kw):
    with probe.Recorder(path, model, every=1, mapping=mapping, **kw) as rec:
        rec.step(0, loss=1.0)


def test_transpose_takes_the_models_own_names(tmp_path):
    model = Tiny()
    own = [OWN[k] for k in OWN if k not in ("heads", "token_embedding")]   # every nn.Linear, by its own name
    _record(tmp_path / "t.h5", model, _mapping(tmp_path, {**OWN, "transpose": own}))
    res = run_cli("probe", "validate", tmp_path / "t.h5")
    assert res.returncode == 0 and res.stdout.strip() == f"{tmp_path / 't.h5'}: valid", res.stdout + res.stderr
    with Run(tmp_path / "t.h5") as run:
        np.testing.assert_array_equal(run.tensor("unembedding")[0], model.out.weight.detach().numpy().T)
        np.testing.assert_array_equal(run.tensor("layer0/W_in")[0], model.up.weight.detach().numpy().T)
        wq = model.q.weight.detach().numpy().T       # x @ W: head h is columns h*e:(h+1)*e
        np.testing.assert_array_equal(run.tensor("layer0/W_Q")[0][1], wq[:, D // 2:])
        assert run.dims["heads"] == 2 and run.dims["layers"] == 1 and run.dims["d_ff"] == FF


class Stack(torch.nn.Module):
    """Blocks of a model of one's own, each with one fused q, k, v matrix (nanoGPT's kind, x @ W = [q | k | v])."""

    def __init__(self, blocks=3):
        super().__init__()
        torch.manual_seed(2)
        self.emb = torch.nn.Embedding(V, D)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({"qkv": torch.nn.Linear(D, 3 * D), "proj": torch.nn.Linear(D, D)})
                                          for _ in range(blocks))


def test_one_entry_with_i_maps_every_layer_and_a_fused_qkv_is_split(tmp_path):
    model = Stack()
    mapping = {"heads": H, "token_embedding": "emb.weight", "layer{i}/W_QKV": "blocks.{i}.qkv.weight",
               "layer{i}/W_O": "blocks.{i}.proj.weight", "transpose": ["blocks.{i}.qkv.weight", "layer{i}/W_O"]}
    _record(tmp_path / "s.h5", model, _mapping(tmp_path, mapping))
    e = D // H
    with Run(tmp_path / "s.h5") as run:
        assert run.dims["layers"] == 3 and run.dims["heads"] == H and run.dims["d_head"] == e
        for i, block in enumerate(model.blocks):
            w = block["qkv"].weight.detach().numpy().T          # x @ W: (d, 3d), columns q | k | v
            for j, nm in enumerate(("W_Q", "W_K", "W_V")):
                for h in range(H):
                    np.testing.assert_array_equal(run.tensor(f"layer{i}/{nm}")[0][h], w[:, j * D + h * e:j * D + (h + 1) * e])
            np.testing.assert_array_equal(run.tensor(f"layer{i}/W_O")[0][1], block["proj"].weight.detach().numpy().T[e:2 * e])
    with pytest.raises(probe.ProbeError, match=r"maps layer\{i\}/W_O to 'block.\{i\}.proj.weight', which matches no tensor"):
        _record(tmp_path / "x.h5", model, _mapping(tmp_path, {**mapping, "layer{i}/W_O": "block.{i}.proj.weight"}))


def test_a_transpose_name_the_mapping_does_not_know_is_refused_naming_the_valid_ones(tmp_path):
    for bad, said in [({**OWN, "transpose": ["out.weights"]}, "transpose lists 'out.weights'"),
                      ({"token_embedding": "emb.weight", "layer0/Wq": "q.weight"}, "'layer0/Wq' is no canonical name"),
                      ({"token_embedding": "emb.weigth"}, "did you mean 'emb.weight'")]:
        with pytest.raises(probe.ProbeError) as err:
            _record(tmp_path / "x.h5", Tiny(), _mapping(tmp_path, bad))
        msg = str(err.value)
        assert said in msg and "\n" not in msg, msg
        if "transpose" in said:   # the valid names: the canonical ones and the model's own
            assert "unembedding" in msg and "out.weight" in msg, msg
        assert not (tmp_path / "x.h5").exists()


def test_shapes_that_do_not_fit_are_refused_at_record_time_in_one_line(tmp_path):
    cases = [   # (mapping, what the one line says)
        (OWN, "map.json: unembedding is 'out.weight' of shape (20, 16): in x @ W layout it has d_model=16 "
              'rows; list it in "transpose"'),                             # nn.Linear is out x in
        ({"token_embedding": "emb.weight", "layer0/W_in": "up.weight"}, "list it in \"transpose\""),
        ({**OWN, "heads": 3, "transpose": [v for k, v in OWN.items() if k not in ("heads", "token_embedding")]},
         "3 heads do not divide"),
        ({**OWN, "layer0/W_out": "o.weight",     # it fits d_model, not the d_ff of W_in: the file's schema says so
          "transpose": ["unembedding", "layer0/W_Q", "layer0/W_K", "layer0/W_V", "layer0/W_O", "layer0/W_in"]},
         "'snapshots/weights/layer0/W_out' axis 1 is 16, expected d_ff=24"),
    ]
    for mapping, said in cases:
        with pytest.raises(probe.ProbeError) as err:
            _record(tmp_path / "x.h5", Tiny(), _mapping(tmp_path, mapping))
        assert said in str(err.value) and "\n" not in str(err.value), str(err.value)
        assert not (tmp_path / "x.h5").exists()


def test_validate_reports_whatever_info_refuses(tmp_path):
    """An MLP mapped without attention (no layers counted): validate checked only the layers' datasets
    it expected, so a weight of another size passed there and info refused the file."""
    path = tmp_path / "mlp.h5"
    _record(path, Tiny(), _mapping(tmp_path, {"token_embedding": "emb.weight", "layer0/W_in": "up.weight",
                                             "layer0/W_out": "down.weight", "transpose": ["layer0/W_in", "layer0/W_out"]}))
    assert run_cli("probe", "validate", path).returncode == 0
    with h5py.File(path, "r+") as f:          # a file whose dims no longer fit its MLP
        dims = json.loads(f.attrs["dims"])
        f.attrs["dims"] = json.dumps({**dims, "d_ff": FF + 1})
    info = run_cli("probe", "info", path)
    assert info.returncode == 2 and "expected d_ff=25" in info.stderr, info.stderr
    refused = info.stderr.strip().removeprefix(f"Error: {path}: ")
    res = run_cli("probe", "validate", path)
    assert res.returncode == 1 and refused in res.stdout, res.stdout + res.stderr


# --- PyTorch's own attention: nn.MultiheadAttention, nn.TransformerEncoder -----------------------

class Encoder(torch.nn.Module):
    """A small encoder of PyTorch's own modules: an embedding, nn.TransformerEncoder, a head."""

    def __init__(self, norm_first=False):
        super().__init__()
        torch.manual_seed(1)
        self.emb = torch.nn.Embedding(V, D)
        layer = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(D), enable_nested_tensor=False)
        self.head = torch.nn.Linear(D, V)

    def forward(self, x):
        return self.head(self.encoder(self.emb(x)))


EMB = {"token_embedding": "emb.weight", "unembedding": "head.weight", "transpose": ["head.weight"]}


def test_the_torch_layout_matches_multihead_attentions_own_forward(tmp_path):
    model = Encoder().eval()
    torch.save(model.state_dict(), tmp_path / "enc.pt")
    r = CanonicalReader(open_checkpoint(tmp_path / "enc.pt"), _mapping(tmp_path, {**EMB, "heads": H}))
    assert r.layout.name == "torch" and r.layout.layers == 2 and r.layout.heads == H
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    x = np.random.default_rng(0).standard_normal((5, D)).astype(np.float32)
    e = D // H
    for i, layer in enumerate(model.encoder.layers):
        mha = layer.self_attn
        want, maps = mha(*(torch.from_numpy(x)[None],) * 3, need_weights=True, average_attn_weights=False)
        bq, bk, bv = np.split(sd[f"encoder.layers.{i}.self_attn.in_proj_bias"], 3)
        wq, wk, wv, wo = (r.read(f"layer{i}/{n}") for n in ("W_Q", "W_K", "W_V", "W_O"))
        assert wq.shape == wk.shape == wv.shape == (H, D, e) and wo.shape == (H, e, D)
        got = sd[f"encoder.layers.{i}.self_attn.out_proj.bias"].astype(np.float64)
        for h in range(H):   # each head: its attention map, and its share of the output
            q, k = x @ wq[h] + bq[h * e:(h + 1) * e], x @ wk[h] + bk[h * e:(h + 1) * e]
            s = q @ k.T / math.sqrt(e)
            a = np.exp(s - s.max(1, keepdims=True))
            a /= a.sum(1, keepdims=True)
            np.testing.assert_allclose(a, maps[0, h].detach().numpy(), atol=1e-5)
            got = got + a @ (x @ wv[h] + bv[h * e:(h + 1) * e]) @ wo[h]
        np.testing.assert_allclose(got, want[0].detach().numpy(), atol=1e-5)
        np.testing.assert_array_equal(r.read(f"layer{i}/W_in"), layer.linear1.weight.detach().numpy().T)
        np.testing.assert_array_equal(r.read(f"layer{i}/W_out"), layer.linear2.weight.detach().numpy().T)
        np.testing.assert_array_equal(r.read(f"layer{i}/attn_norm"), layer.norm1.weight.detach().numpy())
        np.testing.assert_array_equal(r.read(f"layer{i}/mlp_norm"), layer.norm2.weight.detach().numpy())
    np.testing.assert_array_equal(r.read("final_norm"), model.encoder.norm.weight.detach().numpy())
    np.testing.assert_array_equal(r.read("token_embedding"), sd["emb.weight"])


def test_a_transformer_encoder_model_records_and_align_and_similarity_read_it(tmp_path):
    model = Encoder(norm_first=True)
    path = tmp_path / "enc.h5"
    opt = torch.optim.AdamW(model.parameters(), 1e-2)
    x = torch.randint(0, V, (8, 10), generator=torch.Generator().manual_seed(0))
    with probe.Recorder(path, model, every=2, mapping=_mapping(tmp_path, EMB), groups={"a": [1, 2, 3, 4, 5]}) as rec:
        rec.snapshot(0)
        for step in range(1, 5):
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, V), x.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
            rec.step(step, loss=loss.item())
    res = run_cli("probe", "validate", path)
    assert res.returncode == 0, res.stdout + res.stderr
    with Run(path) as run:   # the head count read from the module's nn.MultiheadAttention
        assert run.dims["heads"] == H and run.dims["layers"] == 2 and run.config["layout"] == "torch"
    align = run_cli("probe", "align", path, "--layer", "1", "--head", str(H - 1), "--step", "all")
    assert align.returncode == 0 and align.stdout.count("\n") >= 3, align.stdout + align.stderr
    sim = run_cli("probe", "similarity", path, "--tokens", "a", "--step", "all")
    assert sim.returncode == 0, sim.stderr
    # its state dict saved as a file: the head count is the mapping's, since no module says it
    torch.save(model.state_dict(), tmp_path / "enc.pt")
    res = run_cli("probe", "align", tmp_path / "enc.pt", "--head", "1",
                  "--mapping", _mapping(tmp_path, {**EMB, "heads": H}, "heads.json"))
    assert res.returncode == 0, res.stderr
    res = run_cli("probe", "align", tmp_path / "enc.pt", "--head", "1", "--mapping",
                  _mapping(tmp_path, EMB))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and 'give "heads" in the name-mapping file' in res.stderr, \
        res.stderr


def test_without_a_mapping_the_encoder_is_refused_saying_what_to_map(tmp_path):
    with pytest.raises(probe.ProbeError, match="token_embedding") as err:
        probe.Recorder(tmp_path / "x.h5", Encoder())
    msg = str(err.value)   # the 2-D weights no layout name reads: what it may be mapped to
    assert "the torch layout names no token embedding" in msg and "emb.weight" in msg and "\n" not in msg and not (tmp_path / "x.h5").exists(), msg
