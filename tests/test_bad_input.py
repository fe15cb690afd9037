"""The bad-input matrix: every command against a shared set of broken files and bad values, through
real processes (forked from one that imported the CLI once: ``forkcli.ForkCLI``). The bar for each case: exit 2, exactly one ``Error: ...`` line on stderr, no
traceback, and no input changed (a hash of every file before and after the whole matrix)."""
import json
import os
import shutil

import numpy as np
import pytest

from broken import broken_snapshots, digest
from conftest import run_cli
from forkcli import ForkCLI

FILE_COMMANDS = ["info", "validate", "similarity", "pca", "align", "condense", "theory", "ood", "attention", "bias",
                 "spectrum", "norms", "sinks", "rank", "dynamics", "tokens"]
SNAPSHOT_ONLY = {"validate", "theory", "ood", "attention", "bias", "dynamics"}

# broken inputs: (name in the work folder, fragment of the error line; None: any one-line error)
BROKEN = [
    ("nope.h5", "no such file"),
    ("notes.txt", None),
    ("empty.h5", None),
    ("truncated.h5", "truncated"),
    ("corrupt.h5", None),
    ("newer.h5", "99.0"),
    ("garbage.pt", None),
    ("evil.pt", None),
    ("bad-header.safetensors", None),
    ("emptydir", None),
    ("badconfig", None),
    ("missing-shard", None),
]


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_run):
    import torch
    from safetensors.numpy import save_file

    d = tmp_path_factory.mktemp("bad")
    good = d / "good.h5"
    shutil.copy(tiny_run, good)
    broken_snapshots(d, good)
    (d / "empty.h5").write_bytes(b"")
    (d / "garbage.pt").write_bytes(bytes(range(256)) * 4)
    torch.save({"w": torch.zeros(2), "x": _Evil()}, d / "evil.pt")
    (d / "bad-header.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}")
    (d / "emptydir").mkdir()
    (d / "badconfig").mkdir()
    (d / "badconfig" / "config.json").write_text("{not json")
    (d / "badconfig" / "model.safetensors").write_bytes(b"x")
    (d / "missing-shard").mkdir()
    (d / "missing-shard" / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a.weight": "model-00001-of-00002.safetensors"}}))
    ext = d / "ext"                                   # a tiny GPT-2-style folder
    ext.mkdir()
    rng = np.random.default_rng(0)
    save_file({"transformer.wte.weight": rng.standard_normal((40, 8)).astype(np.float32),
               "transformer.h.0.attn.c_attn.weight": rng.standard_normal((8, 24)).astype(np.float32),
               "transformer.h.0.attn.c_proj.weight": rng.standard_normal((8, 8)).astype(np.float32),
               "transformer.h.0.mlp.c_fc.weight": rng.standard_normal((8, 32)).astype(np.float32),
               "transformer.h.0.mlp.c_proj.weight": rng.standard_normal((32, 8)).astype(np.float32)},
              str(ext / "model.safetensors"))
    (ext / "config.json").write_text(json.dumps({"n_head": 2}))
    (d / "groups-bad.json").write_text("{not json: [")
    (d / "groups-wrong.json").write_text(json.dumps({"g": [1, "x"]}))
    (d / "mapping-bad.json").write_text(json.dumps({"token_embedding": "no.such.tensor"}))
    (d / "stories.txt").write_text("one story only\n")
    return d


def _cases():
    cases = []
    # 1. every file command on every broken input
    for cmd in FILE_COMMANDS:
        for name, frag in BROKEN:
            if cmd in SNAPSHOT_ONLY and name in ("garbage.pt", "evil.pt", "bad-header.safetensors", "emptydir",
                                                 "badconfig", "missing-shard"):
                frag = None
            cases.append((["probe", cmd, "{d}/" + name], frag))
    # 2. bad values, per option, on a good run (G) or an external folder (X)
    G, X = "{d}/good.h5", "{d}/ext"
    bad = [
        (["similarity", G, "--format", "xml"], "--format"),
        (["pca", G, "-f", "yaml"], "--format"),
        (["similarity", G, "--step", "soon"], "bad --step 'soon'"),
        (["similarity", G, "--step", "123456"], "no snapshot at step 123456"),
        (["bias", G, "--step", "5:3"], "no snapshot with step in"),
        (["similarity", G, "--tokens", "bogus"], "unknown token group 'bogus'"),
        (["similarity", G, "--tokens", "3,,4"], "empty item in --tokens 3,,4"),
        (["pca", G, "--tokens", "reasoning,,memory"], "empty item"),
        (["condense", G, "--tokens", ","], "empty item"),
        (["similarity", G, "--tokens", "195:250"], "outside the vocabulary"),
        (["similarity", G, "--tokens", "-3,4"], "outside the vocabulary"),
        (["similarity", G, "--tokens", "9:3"], "empty token range"),
        (["similarity", G, "--tokens", "11"], "needs at least 2 tokens"),
        (["pca", G, "--tokens", "11"], "PCA needs at least 2 tokens"),
        (["condense", G, "--tokens", "11"], "covariance spectrum needs at least 2"),
        (["theory", G, "--tokens", "11"], "needs at least 2 tokens"),
        (["similarity", G, "--tensor", "W_nope"], "no tensor 'W_nope'"),
        (["similarity", G, "--words", "cat"], "stores no vocabulary"),
        (["similarity", G, "--words", "a,,b"], "empty item in --words"),
        (["similarity", G, "--words-file", "{d}/no-such-words.txt"], "cannot read words file"),
        (["similarity", G, "--tokens", "11:14", "--words", "x"], "not both"),
        (["similarity", G, "--groups", "{d}/groups-bad.json"], "groups file"),
        (["similarity", G, "--groups", "{d}/groups-wrong.json"], "only token ids or only words"),
        (["similarity", G, "--groups", "{d}/nope.json"], "cannot read groups file"),
        (["similarity", G, "--plot", "{d}/nodir/x.png"], "does not exist"),
        (["similarity", G, "--plot", "{d}/x.gif"], "use a .png"),
        (["similarity", G, "--plot", "/proc/x.png"], "cannot write plot"),
        (["similarity", G, "--plot", "{d}/emptydir"], "is a directory"),
        (["align", G, "--layer", "9"], "--layer 9 out of range"),
        (["align", G, "--layer", "-1"], "out of range"),
        (["align", G, "--head", "5"], "--head 5 out of range"),
        (["align", G, "--head", "x"], "--head"),
        (["align", G, "--top-k", "0"], "--top-k"),
        (["align", G, "--top", "3"], "No such option"),
        (["pca", G, "--n-components", "0"], "--n-components"),
        (["pca", G, "--components", "3"], "No such option"),
        (["condense", G, "--threshold", "nan"], "--threshold nan"),
        (["condense", G, "--threshold", "2"], "between -1.0 and 1.0"),
        (["condense", G, "--threshold", "inf"], "finite"),
        (["condense", G, "--neurons", "W_nope"], "no tensor 'W_nope'"),
        (["theory", G, "--dim", "-3"], "--dim -3"),
        (["theory", G, "--dim", "0"], "--dim 0"),
        (["theory", G, "--seed", "-1"], "--seed -1"),
        (["theory", G, "--anchor", "99"], "--anchor 99 is not among"),
        (["attention", G, "--layer", "4"], "out of range"),
        (["bias", G, "--splits", "mem"], "exactly two splits"),
        (["bias", G, "--splits", "mem", "--splits", "nope"], "unknown split 'nope'"),
        (["bias", G, "--splits", "a", "--splits", "b", "--splits", "c"], "exactly two splits"),
        (["ood", G, "--step", "77"], "no snapshot at step 77"),
        (["ood", G, "--full", "yes"], "Got unexpected extra argument"),
        (["spectrum", G, "--step", "abc"], "bad --step"),
        (["similarity", X, "--tokens", "0:3", "--step", "5"], "holds one step"),
        (["similarity", X], "no token group 'reasoning'"),
        (["similarity", X, "--tokens", "30:60"], "outside the vocabulary"),
        (["similarity", X, "--words", "cat"], "no tokenizer files"),
        (["align", X, "--groups", "{d}/groups-bad.json"], "groups file"),
        (["align", X, "--layer", "3"], "out of range"),
        (["similarity", X, "--mapping", "{d}/mapping-bad.json", "--tokens", "0:3"], "does not hold"),
        (["theory", X], "needs a snapshot file"),
        (["info", G, "--format", "xml"], "--format"),
        (["validate", G, "extra"], "unexpected extra argument"),
        (["nosuchcommand"], "No such command"),
        (["similarity"], "Missing argument"),
        (["batch", "{d}/ext", "--probe", "nope"], "unknown probe 'nope'"),
        (["batch", "{d}/none*.pt", "--probe", "spectrum"], "no checkpoint matches"),
        (["batch", "{d}/ext", "--probe", "spectrum", "-o", "{d}/x.txt"], ".csv or .json"),
        (["batch", "{d}/ext", "--probe", "spectrum", "-o", "/proc/x.csv"], "cannot write results /proc/x.csv"),
        (["batch", "{d}/ext", "--probe", "spectrum", "-o", "{d}/notes.txt"], "use a .csv"),
        (["batch", "{d}/ext", "--probe", "spectrum", "--jobs", "-1"], "--jobs"),
        (["batch", "{d}/ext"], "Missing option"),
        (["batch", "{d}/ext", "--probe", "spectrum", "--scheduler", "tcp://127.0.0.1:9"], "cannot reach"),
        (["norms", G, "--saturation", "2"], "--saturation 2.0: need between 0.0 and 1.0"),
        (["norms", G, "--saturation", "nan"], "--saturation nan"),
        (["norms", G, "--step", "soon"], "bad --step"),
        (["norms", X], "pass --text FILE"),
        (["norms", X, "--text", "{d}/nope.txt"], "cannot read the text file"),
        (["sinks", X, "--text", "{d}/notes.txt"], "no tokenizer files"),
        (["sinks", X, "--text", "{d}/notes.txt", "--window", "1"], "--window"),
        (["sinks", G, "--min-query", "0"], "--min-query"),
        (["sinks", G, "--sink-threshold", "1.5"], "--sink-threshold 1.5"),
        (["rank", G, "--step", "5:3"], "no snapshot with step in"),
        (["rank", X, "--mapping", "{d}/mapping-bad.json"], "does not hold"),
        (["dynamics", G, "--spike-factor", "0.5"], "--spike-factor 0.5"),
        (["dynamics", G, "--smooth", "0"], "--smooth"),
        (["tokens", G], "two models"),
        (["tokens", G, X], "not one of each"),
        (["tokens", G, "--step-b", "10"], "stores no per-token losses"),
        (["tokens", G, G, "--buckets", "0"], "--buckets"),
        (["figures", "nosuchfigure", "--tiny", "-o", "{d}/figs"], "unknown figure"),
        (["figures", "--tiny", "-o", "{d}/figs"], "--all"),
        (["figures", "--all", "--quick", "--tiny", "-o", "{d}/figs"], "exclude"),
        (["figures", "--all", "--examples", "{d}/emptydir", "-o", "{d}/figs"], "no figure scripts"),
    ]
    cases += [(["probe", *args], frag) for args, frag in bad]
    # 3. the trainer
    T = ["probe-train", "--preset", "tiny", "--out"]
    train = [
        (T + ["{d}/t.h5", "--gamma", "inf"], "--gamma inf: need a finite number"),
        (T + ["{d}/t.h5", "--gamma", "0"], "--gamma must be positive"),
        (T + ["{d}/t.h5", "--lr", "nan"], "--lr nan"),
        (T + ["{d}/t.h5", "--steps", "abc"], "--steps"),
        (T + ["{d}/t.h5", "--steps", "0"], "--steps must be positive"),
        (T + ["{d}/t.h5", "--d-model", "0"], "--d-model must be positive"),
        (T + ["{d}/t.h5", "--heads", "3"], "divisible"),
        (T + ["{d}/t.h5", "--seed", "-1"], "--seed -1"),
        (T + ["{d}/t.h5", "--beta2", "1"], "--beta2"),
        (T + ["{d}/t.h5", "--weight-decay", "-1"], "--weight-decay"),
        (T + ["{d}/t.h5", "--held-out", "11,13;;13,11"], "empty item in --held-out"),
        (T + ["{d}/t.h5", "--held-out", "1,2"], "must be 2 reasoning anchors"),
        (T + ["{d}/t.h5", "--vocab-size", "50"], "--vocab-size 50 too small"),
        (T + ["{d}/t.h5", "--norm", "mid"], "--norm"),
        (T + ["{d}/t.h5", "--device", "cuda"], "CUDA is not available"),
        (T + ["{d}/t.h5", "--bogus"], "No such option"),
        (T + ["{d}/nodir/t.h5"], "does not exist"),
        (T + ["{d}/good.h5"], "exists"),
        (["probe-train", "--preset", "nope", "--out", "{d}/t.h5"], "unknown preset"),
        (["probe-train", "--resume", "--out", "{d}/t.h5"], "no such file"),
        (["probe-train", "--resume", "--out", "{d}/good.h5", "--gamma", "0.1"], "cannot change gamma"),
        (["probe-train", "--resume", "--out", "{d}/notes.txt"], None),
        (["probe-train", "--preset", "lm-tiny", "--stories", "{d}/stories.txt", "--out", "{d}/t.h5"], None),
        # its own --out: the matrix runs two cases at a time, and the case above holds t.h5's writer lock
        # while it reads its stories (a second trainer aimed at t.h5 would be refused for that instead)
        (["probe-train", "--preset", "lm-tiny", "--tokenizer", "{d}/nope", "--out", "{d}/t-tok.h5"], "tokenizer"),
        (["probe-train", "--preset", "tiny"], "Missing option '--out'"),
    ]
    return cases + train


CASES = _cases()


@pytest.fixture(scope="module")
def results(work):
    """Every case run once (two at a time), with the work folder's digest before and after."""
    before = digest(work)
    with ForkCLI(jobs=2) as cli:
        outs = cli.run_many([[args[0], *[a.format(d=work) for a in args[1:]]] for args, _ in CASES])
    return outs, before, digest(work)


def test_a_sample_through_the_real_console_scripts(work, results):
    """The matrix runs in forked processes; a few cases through the installed scripts give the same."""
    for i in (0, 7, len(CASES) - 3):
        args, _ = CASES[i]
        res = run_cli(args[0], *[a.format(d=work) for a in args[1:]], timeout=120, real=True)
        mine = results[0][i]
        assert (res.returncode, res.stdout, res.stderr) == (mine.returncode, mine.stdout, mine.stderr)


def test_the_matrix_is_large():
    assert len(CASES) >= 100


@pytest.mark.parametrize("i", range(len(CASES)), ids=[" ".join(a[1:4]).replace("{d}/", "")[:60] + f"#{i}"
                                                       for i, (a, _) in enumerate(CASES)])
def test_bad_input_meets_the_bar(results, work, i):
    args, frag = CASES[i]
    res = results[0][i]
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (args, res.returncode, res.stdout[-300:], res.stderr[-500:])
    assert len(lines) == 1 and lines[0].startswith("Error: "), (args, res.stderr)
    assert "Traceback" not in res.stderr and not lines[0].startswith("Error: unexpected "), (args, lines[0])
    assert res.stdout == "", (args, res.stdout[:300])          # no table before the error
    if frag:
        assert frag in lines[0], (args, lines[0])


def test_nothing_was_written_or_changed(results, work):
    _, before, after = results
    assert after == before
    assert not (work / "pwned").exists()
