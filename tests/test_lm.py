"""The real-language experiment: logic + stories, GPT-2 BPE, per-source losses, ΔL, token groups."""
import html
import json

import h5py
import numpy as np
import pytest

import probe
from probe_train import preset
from probe_train.tasks.lm import make_text_task, source_groups
from probe_train.text import synthetic_stories

from conftest import run_cli


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """A tiny mixed run on a story file the test writes itself, trained through the real CLI."""
    d = tmp_path_factory.mktemp("lm")
    stories = d / "stories.txt"
    stories.write_text("\n<|endoftext|>\n".join(synthetic_stories(300, seed=3)))
    out = d / "lm.h5"
    res = run_cli("probe-train", "--preset", "lm-tiny", "--stories", stories, "--steps", "60", "--gamma", "0.8",
                  "--threads", "1", "--quiet", "--out", out)
    assert res.returncode == 0, res.stderr
    return out


def test_run_holds_sources_groups_and_vocabulary(lm_run):
    assert probe.validate(lm_run) == []
    info = probe.info(lm_run)
    assert info["task"]["kind"] == "lm" and info["task"]["splits"] == ["logic", "story"]
    assert info["task"]["story_text"] == f"300 stories read from {lm_run.parent / 'stories.txt'}"
    groups = info["groups"]
    assert set(groups) == {"logic", "story"} and not set(groups["logic"]) & set(groups["story"])
    words = info["group_strings"]
    assert " Every" in words["logic"] and " So" in words["logic"]        # the proofs' own words
    assert " the" in words["story"] or " was" in words["story"]
    with h5py.File(lm_run) as f:
        ids = f["run/vocab/ids"][...]
        strings = f["run/vocab/strings"].asstr()[...]
        tokens = f["run/probe_batch/tokens"][...]
        V = f["snapshots/weights/token_embedding"].shape[1]
    assert len(ids) == len(strings) == V == json.loads(json.dumps(info["config"]))["vocab_size"]
    assert np.all(np.diff(ids) > 0) and ids[-1] == 50256                # compact, keeps <|endoftext|>
    text = "".join(strings[t] for t in tokens[0])
    assert len(text) > 20 and tokens.max() < V


def test_similarity_and_pca_tables_show_token_text(lm_run):
    from conftest import run_cli

    info = probe.info(lm_run)
    every = info["groups"]["logic"][info["group_strings"]["logic"].index(" Every")]
    assert probe.token_text(lm_run, [every]) == [" Every"]
    res = run_cli("probe", "similarity", lm_run, "--tokens", "logic")
    assert res.returncode == 0, res.stderr
    assert f"{every} ' Every'" in res.stdout
    res = run_cli("probe", "pca", lm_run, "--tokens", "logic,story")
    assert res.returncode == 0, res.stderr
    assert f"{every} ' Every'" in res.stdout


def test_words_are_looked_up_in_the_stored_vocabulary(lm_run):
    info = probe.info(lm_run)
    every = info["groups"]["logic"][info["group_strings"]["logic"].index(" Every")]
    with pytest.warns(probe.ProbeWarning, match="'zyzzyva' is not a token"):
        r = probe.similarity(lm_run, words=["Every", "zyzzyva", "So"])[0]
    assert r.ids[0] == every and len(r.ids) == 2
    res = run_cli("probe", "condense", lm_run, "--words", "Every,So,is", "--format", "json")   # not only similarity
    assert res.returncode == 0, res.stderr
    res = run_cli("probe", "pca", lm_run, "--words", "Every", "--tokens", "logic")
    assert res.returncode == 2 and "give --tokens or --words, not both" in res.stderr


def test_words_on_a_synthetic_run_name_the_parameter(tiny_run):
    with pytest.raises(probe.ProbeError, match=r"stores no vocabulary .* words cannot be looked up; select ids "
                                               r"with tokens$"):
        probe.pca(tiny_run, words="cat")
    res = run_cli("probe", "pca", tiny_run, "--words", "cat")
    assert res.returncode == 2 and "--words cannot be looked up; select ids with --tokens" in res.stderr


def test_losses_fall_and_delta_l_has_sign_and_trend(lm_run):
    m = probe.info(lm_run)["metrics"]
    with probe.Run(lm_run) as run:
        first = {s: float(run.metrics()[s]["loss"][0]) for s in ("logic", "story")}
    assert m["logic"]["loss"] < first["logic"] - 0.3 and m["story"]["loss"] < first["story"] - 0.1
    bias = probe.bias(lm_run, step="all")          # default pair for text runs: story vs logic
    assert (bias[0].split_a, bias[0].split_b) == ("story", "logic")
    delta = np.array([b.delta_L for b in bias])
    # at init both sources cost ~log V; the regular logic text is learned first, so ΔL turns positive and grows
    assert abs(delta[0]) < 0.02
    assert delta[-1] > 0.03 and delta[-1] > delta[0] + 0.03


def test_cli_similarity_on_logic_tokens(lm_run):
    res = run_cli("probe", "similarity", lm_run, "--tokens", "logic", "--format", "json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)["results"][0]
    assert len(r["ids"]) == 50 and -1 <= r["mean_offdiag"] <= 1
    res = run_cli("probe", "bias", lm_run, "--step", "latest")
    assert res.returncode == 0 and "loss[story]" in res.stdout


def test_windows_never_mix_train_and_validation_documents():
    cfg = preset("lm-tiny", logic_docs=40, story_docs=40, seq_len=16)
    task = make_text_task(cfg)
    assert task.is_val.any() and (~task.is_val).any()
    assert np.array_equal(task.tokens[:, 1:], task.targets[:, :-1])          # targets are the shifted inputs
    tr, va = set(map(tuple, task.tokens[~task.is_val])), set(map(tuple, task.tokens[task.is_val]))
    assert not tr & va
    assert task.describe()["documents"] == {"logic": 40, "story": 40}
    full = make_text_task(cfg.replace(lm_vocab="full"))
    assert len(full.vocab_ids) == 50257


def test_source_groups_pick_tokens_frequent_in_one_source():
    a = np.array([100, 50, 10, 0, 6])
    b = np.array([1, 50, 0, 100, 0])
    g = source_groups({"logic": a, "story": b}, ratio=10, size=10)
    assert list(g["logic"]) == [0, 2, 4] and list(g["story"]) == [3]


@pytest.mark.parametrize("flag,value,needle", [
    ("--stories", "/nonexistent/stories.txt", "stories"),
    ("--tokenizer", "/nonexistent/tok", "tokenizer"),
    ("--lm-vocab", "half", "--lm-vocab"),
])
def test_bad_text_options_fail_cleanly(tmp_path, flag, value, needle):
    res = run_cli("probe-train", "--preset", "lm-tiny", flag, value, "--out", tmp_path / "x.h5", "--quiet")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error:") and needle in err[0]
    assert not (tmp_path / "x.h5").exists()


def test_theory_refuses_text_runs_cleanly(lm_run):
    res = run_cli("probe", "theory", lm_run, "--tokens", "logic")
    assert res.returncode == 2 and res.stderr.startswith("Error:")


def test_report_shows_the_token_groups_with_their_text(lm_run, tmp_path):
    out = tmp_path / "lm.html"
    res = run_cli("probe", "report", lm_run, "-o", out, "-p", "similarity", "-p", "bias", "--max-steps", "2")
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    groups = page[page.index("<section id='groups'>"):page.index("</section>", page.index("<section id='groups'>"))]
    assert "<th>text</th>" in groups and "<td>logic</td>" in groups and "<td>story</td>" in groups
    assert "' Every'" in html.unescape(groups)                # the words themselves, quoted, not their ids
    # the probes pick the run's own groups (a language run has no 'reasoning' group)
    assert "tokens: logic,story" in page and "not applicable" not in page
