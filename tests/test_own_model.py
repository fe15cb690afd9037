"""Recording a model of your own (issue 58, item 12): ``probe validate`` reports whatever ``probe info``
refuses. Real torch modules, real files, the real CLI."""
import json

import h5py
import numpy as np
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
