"""One result contract: strict JSON (no NaN / Infinity), the same tidy CSV for every command, and a
defined answer (with a warning) for zero vectors — on runs and on external checkpoints."""
import csv
import io
import json
import math

import numpy as np
import pytest
import torch

import probe
from conftest import run_cli
from probe.analyses.bias import reasoning_bias
from probe.analyses.similarity import cosine_similarity, cosine_similarity_blocked


def _strict(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity, as every standard parser does."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _tidy(text: str) -> list[dict]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["step", "metric", "key", "value"]
    assert all(len(r) == 4 for r in rows)
    return [dict(zip(rows[0], r)) for r in rows[1:]]


@pytest.fixture(scope="module")
def zero_bert(tmp_path_factory):
    """A BERT-style folder (transformers, safetensors) whose token 0 ([PAD]) embedding is all zeros,
    as in a freshly initialised BERT, and token 5's too, plus a groups file."""
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    d = tmp_path_factory.mktemp("zero-bert")
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=16))
    model.save_pretrained(d)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    sd["embeddings.word_embeddings.weight"][[0, 5]] = 0.0
    save_file(sd, str(d / "model.safetensors"))
    (d / "groups.json").write_text(json.dumps({"low": [0, 1, 2, 3, 4, 5], "high": [20, 21, 22]}))
    return d


WEIGHT_PROBES = [["similarity", "--tokens", "0:12"], ["pca", "--tokens", "low,high"], ["align"],
                 ["condense", "--tokens", "0:12"], ["spectrum"]]


@pytest.mark.parametrize("cmd", WEIGHT_PROBES, ids=[c[0] for c in WEIGHT_PROBES])
def test_every_probe_on_a_checkpoint_with_zero_rows(zero_bert, cmd):
    args = [cmd[0], zero_bert, *cmd[1:], "--groups", zero_bert / "groups.json"] if cmd[0] != "spectrum" \
        else [cmd[0], zero_bert]
    res = run_cli("probe", *args, "--format", "json")
    assert res.returncode == 0, res.stderr
    out = _strict(res.stdout)
    assert out["probe"] == cmd[0] and len(out["results"]) == 1
    res = run_cli("probe", *args, "--format", "csv")
    assert res.returncode == 0, res.stderr
    rows = _tidy(res.stdout)
    assert rows and all(r["value"].lower() not in ("nan", "inf", "-inf") for r in rows)
    res = run_cli("probe", *args)                                           # the table: no nan either
    assert res.returncode == 0 and "nan" not in res.stdout.lower()


def test_zero_rows_have_cosine_zero_and_a_warning(zero_bert):
    res = run_cli("probe", "similarity", zero_bert, "--tokens", "0:12", "--format", "json")
    r = _strict(res.stdout)["results"][0]
    m = np.array(r["matrix"])
    assert m[0].tolist() == [0.0] * 12 and m[:, 5].tolist() == [0.0] * 12
    assert r["warnings"] and "0, 5" in r["warnings"][0]
    err = res.stderr.strip().splitlines()
    assert err == ["warning: token(s) 0, 5 have an all-zero vector: their cosines are set to 0"]
    with pytest.warns(probe.ProbeWarning, match="all-zero vector"):
        assert probe.similarity(zero_bert, "0:12")[0].matrix[0, 3] == 0.0


def test_undefined_numbers_are_null_in_json_and_empty_in_csv(zero_bert):
    # two zero vectors and one other: every cosine is 0, so their rank correlation with |i - j| is undefined
    res = run_cli("probe", "similarity", zero_bert, "--tokens", "0,5,1", "--format", "json")
    r = _strict(res.stdout)["results"][0]
    assert r["distance_corr"] is None and "distance_corr is undefined" in res.stderr
    res = run_cli("probe", "similarity", zero_bert, "--tokens", "1,2", "--format", "json")   # one pair: null, quietly
    assert _strict(res.stdout)["results"][0]["distance_corr"] is None and "undefined" not in res.stderr
    res = run_cli("probe", "similarity", zero_bert, "--tokens", "0,5,1", "--format", "csv")
    assert {x["metric"]: x["value"] for x in _tidy(res.stdout)}["distance_corr"] == ""


def test_blocked_and_dense_similarity_report_zero_rows_alike():
    v = np.random.default_rng(0).standard_normal((30, 4))
    v[3] = 0
    dense, blocked = cosine_similarity(v), cosine_similarity_blocked(v, block=7)
    assert dense.warnings == blocked.warnings and "token(s) 3" in dense.warnings[0]
    assert dense.mean_offdiag == pytest.approx(blocked.mean_offdiag)


def test_infinite_bias_is_null():
    r = reasoning_bias(np.array([1.0]), np.array([0.0]), np.array([5]), "a", "b")[0]
    assert math.isinf(r.delta_L) and r.to_dict()["delta_L"] is None
    from probe.render import tidy_rows, write_json, write_csv

    buf = io.StringIO()
    write_json({"results": [r.to_dict()], "x": float("nan"), "y": np.float32("inf")}, buf)
    assert _strict(buf.getvalue())["x"] is None
    buf = io.StringIO()
    write_csv(["step", "metric", "key", "value"], tidy_rows([r]), buf)
    assert "inf" not in buf.getvalue()


ALL_COMMANDS = [["info"], ["validate"], ["similarity"], ["pca"], ["align"], ["condense"], ["theory"], ["ood"],
                ["attention"], ["bias"], ["spectrum"]]


@pytest.mark.parametrize("cmd", ALL_COMMANDS, ids=[c[0] for c in ALL_COMMANDS])
def test_every_command_on_a_run_strict_json_and_tidy_csv(tiny_run, cmd):
    step = [] if cmd[0] in ("info", "validate") else ["--step", "all"]
    res = run_cli("probe", cmd[0], tiny_run, *step, "--format", "json")
    assert res.returncode == 0, res.stderr
    _strict(res.stdout)
    res = run_cli("probe", cmd[0], tiny_run, *step, "--format", "csv")
    assert res.returncode == 0, res.stderr
    rows = _tidy(res.stdout)
    assert cmd[0] == "validate" or rows
    if cmd[0] not in ("info", "validate"):                      # the Python side: one contract
        from probe.analyses.base import Result

        results = getattr(probe, cmd[0])(tiny_run, step="all")
        assert all(isinstance(r, Result) for r in results)
        assert [(r["step"], r["metric"], r["key"]) for r in rows] == \
            [(str(r.step), m, k) for r in results for m, k, _ in r.rows()]


def test_rows_split_keyed_summary_names(tiny_run):
    r = probe.align(tiny_run)[0]
    rows = {(m, k) for m, k, _ in r.rows()}
    assert ("cos_top1", "reasoning") in rows and ("sv1", "") in rows
    o = probe.ood(tiny_run)[0]
    assert ("acc", "rsn_test") in {(m, k) for m, k, _ in o.rows()}
