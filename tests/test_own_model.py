"""Recording a model of your own (issue 58, item 12): a name-mapping file's ``transpose`` takes the
model's own names too and refuses one it does not know; one ``{i}`` entry maps every layer, a fused
``W_QKV`` is split; a wrong mapping is refused at record time in one line; and ``probe validate`` reports
whatever ``probe info`` refuses. Real torch modules, real files, the real CLI."""
import json

import h5py
import numpy as np
import pytest
import torch

import probe
from conftest import run_cli
from probe.format import Run

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
