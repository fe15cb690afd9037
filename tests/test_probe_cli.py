"""Every probe command through the real CLI: formats, figures, bad input."""
import os
import shutil
import json

import pytest

from conftest import run_cli

COMMANDS = [
    ["pca", "--tokens", "keys,reasoning,memory"],
    ["align", "--layer", "1", "--head", "1"],
    ["condense", "--neurons", "layer0/W_Q"],
    ["theory", "--tokens", "reasoning", "--anchor", "15"],
    ["ood"],
    ["attention", "--layer", "0"],
    ["bias", "--splits", "mem", "--splits", "rsn_test"],
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_probe_command_figure_and_step_range(tiny_run, tmp_path, cmd):
    """(JSON and CSV of every command: tests/test_contract.py; bad input: tests/test_bad_input.py.)"""
    fig = tmp_path / f"{cmd[0]}.png"
    res = run_cli("probe", cmd[0], tiny_run, *cmd[1:], "--plot", fig, "--step", "10:31", "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert fig.stat().st_size > 5000
    lines = res.stdout.strip().splitlines()
    assert lines[0] == "step,metric,key,value"
    assert {ln.split(",")[0] for ln in lines[1:]} == {"10", "20", "30"}


def test_attention_on_an_emb_mlp_run_is_a_clear_error(tmp_path):
    out = tmp_path / "e.h5"
    assert run_cli("probe-train", "--preset", "tiny", "--model", "emb-mlp", "--steps", "5", "--out", out,
                   "-q").returncode == 0
    res = run_cli("probe", "attention", out)
    assert res.returncode == 2 and "no attention maps" in res.stderr
    res = run_cli("probe", "condense", out, "--format", "json")  # no W_Q: neurons skipped, not an error
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_cli_json_equals_python_api(tiny_run, cmd):
    import probe

    res = run_cli("probe", cmd[0], tiny_run, *cmd[1:], "--format", "json", "--step", "all")
    assert res.returncode == 0, res.stderr
    kwargs = {
        "pca": dict(tokens="keys,reasoning,memory"), "align": dict(layer=1, head=1),
        "condense": dict(neurons="layer0/W_Q"), "theory": dict(tokens="reasoning", anchor=15),
        "ood": {}, "attention": dict(layer=0), "bias": dict(splits=("mem", "rsn_test")),
    }[cmd[0]]
    api = getattr(probe, cmd[0])(tiny_run, step="all", **kwargs)
    from_api = json.loads(json.dumps([r.to_dict() for r in api], default=float))
    assert json.loads(res.stdout)["results"] == from_api


def test_info_says_the_two_tensor_lists_are_one_set_of_data(tiny_run):
    import h5py

    import probe

    d = probe.info(tiny_run)
    assert d["canonical"] and set(d["canonical"]) < set(d["tensors"])
    out = run_cli("probe", "info", str(tiny_run)).stdout
    first, second = out.split("tensors (per snapshot), by canonical name\n")[1].split(
        "every parameter by the model's own name (the tensors above are links to these)\n")
    assert {ln.split()[0] for ln in first.splitlines()} == set(d["canonical"])
    assert {ln.split()[0] for ln in second.splitlines()} == set(d["tensors"]) - set(d["canonical"])
    with h5py.File(tiny_run, "r") as f:   # what the heading claims: each canonical name is a link to a parameter
        params = []
        f["snapshots/params"].visititems(lambda n, o: params.append(o.id) if isinstance(o, h5py.Dataset) else None)
        assert all(f[f"snapshots/weights/{n}"].id in params for n in d["canonical"])


def test_info_fits_80_columns_and_wraps_to_a_narrower_terminal(tmp_path, tiny_run):
    """Issue 58: ``probe info`` printed lines of 83, 88 and 106 columns at COLUMNS=80 (the model, the
    training environment and the parameter-names title); a llama run with every init option and a stop is
    the widest header a run of the trainer has."""
    wide = tmp_path / "wide.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--model", "llama", "--gamma-embed", "0.3", "--gamma-attn",
                  "0.4", "--gamma-mlp", "0.6", "--gamma-head", "0.7", "--kv-heads", "1", "--tie-embeddings",
                  "--gated-attention", "--stop-at", "20", "--out", wide, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    shutil.copy(tiny_run, tmp_path / "tiny.h5")   # a short name: a path wider than the terminal stays whole
    for name in ("tiny.h5", "wide.h5"):
        out = run_cli("probe", "info", name, env={**os.environ, "COLUMNS": "80"}, cwd=tmp_path).stdout
        assert out and max(map(len, out.splitlines())) <= 80, out
    out = run_cli("probe", "info", "wide.h5", env={**os.environ, "COLUMNS": "60"}, cwd=tmp_path).stdout
    lines = out.splitlines()
    assert all(len(ln) <= 60 for ln in lines if not ln.startswith("  ")), out   # tensor rows: one name each
    said = " ".join(out.split())   # broken between words, nothing lost
    assert "stopped at step 20 as asked (--stop-at; --resume trains on)" in said
    assert "init std 16^-0.3 = 0.435 gamma_embed=0.3 gamma_attn=0.4 gamma_mlp=0.6 gamma_head=0.7" in said


def test_info_states_the_init_std_beside_gamma(tiny_run):
    """The same gamma is another regime at another width: the std it draws is said with it."""
    out = run_cli("probe", "info", tiny_run).stdout.splitlines()
    assert f"           norm=pre  norm_eps=1e-05  init std 16^-0.8 = {16 ** -0.8:.3g}" in out
