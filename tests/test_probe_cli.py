"""Every probe command through the real CLI: formats, figures, bad input."""
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
def test_probe_command_formats_and_figure(tiny_run, tmp_path, cmd):
    res = run_cli("probe", cmd[0], tiny_run, *cmd[1:], "--format", "json", "--step", "all")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["probe"] == cmd[0] and len(d["results"]) >= 2
    res = run_cli("probe", cmd[0], tiny_run, *cmd[1:], "--format", "csv", "--step", "10:31")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0] == "step,metric,key,value"
    assert {ln.split(",")[0] for ln in lines[1:]} == {"10", "20", "30"}
    fig = tmp_path / f"{cmd[0]}.png"
    res = run_cli("probe", cmd[0], tiny_run, *cmd[1:], "--plot", fig)
    assert res.returncode == 0, res.stderr
    assert fig.stat().st_size > 5000
    assert "step" in res.stdout or "metric" in res.stdout


@pytest.mark.parametrize("args,fragment", [
    (["align", "--layer", "7"], "layer 7 out of range"),
    (["align", "--head", "5"], "head 5 out of range"),
    (["attention", "--layer", "-1"], "out of range"),
    (["bias", "--splits", "mem", "--splits", "nope"], "unknown split 'nope'"),
    (["bias", "--splits", "mem"], "exactly two splits"),
    (["theory", "--anchor", "99"], "not among the chosen tokens"),
    (["condense", "--neurons", "W_nope"], "no tensor 'W_nope'"),
    (["pca", "--tokens", "nope"], "unknown token group"),
    (["ood", "--step", "77"], "no snapshot at step 77"),
])
def test_probe_command_bad_input(tiny_run, args, fragment):
    res = run_cli("probe", args[0], tiny_run, *args[1:])
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], res.stderr


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
