"""Bad input on the reader side (issue 23, items 4 and 7).

1. A generated corpus of ``.safetensors`` files, variants of one small GPT-2-named checkpoint with a
   malformed (or unusual but valid) header. For every file the toolkit refuses exactly the files that
   the safetensors library (``safe_open``, numpy and torch frameworks) refuses — no file the library
   refuses is described or computed on, no file it accepts is refused — with one line naming the
   tensor and the fault; what it accepts is read from each tensor's own bytes, equal to the library's
   reading. In-process for every file, and through the CLI (``probe info``, ``validate``,
   ``similarity``, ``spectrum``, ``batch``, a sharded folder, a hub source read by HTTP ranges).
2. Special files: a FIFO, a character device, a socket or a symbolic link to a FIFO given wherever a
   path is read (a checkpoint, ``--groups``, ``--words-file``, ``--text``, ``--mapping``, a model or
   Trainer folder member, batch and report sources, a results table, a sweep manifest, a snapshot to
   resume, a stories file) is refused at once with one line. Each such call runs with a timeout, so a
   regression (a reader blocking on a FIFO) fails the test instead of hanging the suite.

Every case asserts exit 2, one ``Error:`` line, no traceback, no table on stdout, and that no file of
the work folder changed (regular files hashed, special files never opened).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from forkcli import ForkCLI

# --- the checkpoint every corpus file is a variant of -------------------------------------------
# GPT-2 names, so that the layout is known and every weight probe runs on the accepted variants
SHAPES = [("transformer.wte.weight", (40, 8)), ("transformer.h.0.attn.c_attn.weight", (8, 24)),
          ("transformer.h.0.attn.c_proj.weight", (8, 8)), ("transformer.h.0.mlp.c_fc.weight", (8, 32)),
          ("transformer.h.0.mlp.c_proj.weight", (32, 8))]
NAMES = [n for n, _ in SHAPES]
WTE = NAMES[0]


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype("<f4") for _, s in SHAPES]


class Raw(str):
    """JSON text put into a header as it is (a literal json.dumps cannot write: -0, 8.0, NaN, ...)."""


def _json(v) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, list) and v and all(isinstance(p, tuple) and len(p) == 2 for p in v):   # pairs: an object
        return "{" + ",".join(json.dumps(k) + ":" + _json(x) for k, x in v) + "}"
    if isinstance(v, dict):
        return _json(list(v.items())) if v else "{}"
    if isinstance(v, list):
        return "[" + ",".join(_json(x) for x in v) + "]"
    return json.dumps(v)


@dataclass
class Case:
    name: str
    entries: list            # (key, value) pairs of the header, duplicates allowed
    data: bytes
    refused: str | None      # a fragment of the fault the error line names; None: the library accepts it
    tensor: str | None = None  # the tensor the error line must name
    header: bytes | None = None   # header bytes as they are (instead of the entries)
    length: int | None = None     # the 8-byte header length (instead of the header's)
    whole: bytes | None = None    # the whole file as it is
    same_numbers: bool = False    # accepted and every tensor holds the base file's values

    def file_bytes(self) -> bytes:
        if self.whole is not None:
            return self.whole
        head = self.header if self.header is not None else _json(self.entries).encode()
        head += b" " * (-len(head) % 8)
        n = len(head) if self.length is None else self.length
        return n.to_bytes(8, "little") + head + self.data


def _base() -> tuple[list, bytes]:
    entries, pos = [], 0
    for (name, shape), a in zip(SHAPES, _arrays()):
        entries.append((name, {"dtype": "F32", "shape": list(shape), "data_offsets": [pos, pos + a.nbytes]}))
        pos += a.nbytes
    return entries, b"".join(a.tobytes() for a in _arrays())


def _with(entries, name, **fields):
    """The entries with tensor ``name``'s fields replaced."""
    return [(k, {**v, **fields}) if k == name else (k, v) for k, v in entries]


def _shifted(entries, first: int, by: int):
    """Tensors from index ``first`` on moved ``by`` bytes in the data."""
    out = []
    for i, (k, v) in enumerate(entries):
        s, e = v["data_offsets"]
        out.append((k, {**v, "data_offsets": [s + by, e + by]}) if i >= first else (k, v))
    return out


def corpus() -> list[Case]:
    E, D = _base()
    off = {k: v["data_offsets"] for k, v in E}
    cases = [Case("base", E, D, None, same_numbers=True)]
    C = cases.append
    dtypes = ["F33", "f32", "FLOAT32", "float32", "", "Q4_0"]
    # per tensor: the faults of its own entry
    for i, (name, shape) in enumerate(SHAPES):
        r, c = shape
        C(Case(f"negative-dim-{i}", _with(E, name, shape=[-r, c]), D, "dimensions must be non-negative integers",
               name))
        C(Case(f"fractional-dim-{i}", _with(E, name, shape=[r + 0.5, c]), D, "non-negative integers", name))
        C(Case(f"integral-float-dim-{i}", _with(E, name, shape=Raw(f"[{r}.0, {c}]")), D, "non-negative integers",
               name))
        C(Case(f"wrong-element-count-{i}", _with(E, name, shape=[r + 1, c]), D, "bytes but its data_offsets", name))
        if r != c:
            C(Case(f"transposed-shape-{i}", _with(E, name, shape=[c, r]), D, None))    # the same count: valid
        C(Case(f"reversed-offsets-{i}", _with(E, name, data_offsets=off[name][::-1]), D, "ends before it starts",
               name))
        C(Case(f"unknown-dtype-{i}", _with(E, name, dtype=dtypes[i]), D, "unknown dtype", name))
        C(Case(f"overflowing-shape-{i}", _with(E, name, shape=[2**32, 2**32, r * c]), D, "overflows 64 bits", name))
        C(Case(f"duplicate-key-{i}", E + [(name, dict(E)[name])], D, None, same_numbers=True))
    for i in range(1, len(SHAPES)):
        name = NAMES[i]
        s, e = off[name]
        C(Case(f"overlapping-offsets-{i}", _with(E, name, data_offsets=[s - 4, e - 4]), D, "overlapping byte ranges",
               name))
        C(Case(f"gapped-offsets-{i}", _shifted(E, i, 4), D[:s] + b"\0" * 4 + D[s:], "a gap of 4 bytes", name))
        # two tensors on one byte range: an overlap or a size mismatch, whichever of the two comes first
        C(Case(f"aliased-range-{i}", _with(E, name, data_offsets=off[NAMES[i - 1]]), D, "data", name))
    last = NAMES[-1]
    C(Case("first-not-at-0", _shifted(E, 0, 8), b"\0" * 8 + D, "not at 0", WTE))
    C(Case("past-the-end", E, D[:-4], "past the end of the file", last))
    C(Case("offsets-past-the-end", _with(E, last, data_offsets=[off[last][0], off[last][1] + 64]), D,
           "bytes but its data_offsets", last))
    C(Case("trailing-bytes", E, D + b"\0" * 16, "belong to no tensor"))
    # a repeated name: the library keeps the last entry (serde's map); refused only where that breaks
    # the ranges, else read as the library reads it
    c_attn = dict(E)[NAMES[1]]
    C(Case("duplicate-key-stealing-a-range", [(WTE, dict(E)[WTE])] + E[1:] + [(WTE, c_attn)], D, "not at 0"))
    C(Case("duplicate-key-first-entry-dropped", [(WTE, c_attn)] + E, D, None, same_numbers=True))
    C(Case("duplicate-key-invalid-first", [(WTE, "x")] + E, D, "not an object", WTE))
    C(Case("duplicate-field", [(WTE, Raw('{"dtype":"F32","shape":[40,8],"shape":[40,8],"data_offsets":[0,1280]}'))]
           + E[1:], D, "lists 'shape' twice", WTE))
    C(Case("duplicate-metadata", [("__metadata__", {}), ("__metadata__", {})] + E, D, "__metadata__ appears twice"))
    # dimensions and offsets serde does not read as a u64
    C(Case("negative-zero-dim", _with(E, WTE, shape=Raw("[-0, 8]")), D, "non-negative integers", WTE))
    C(Case("bool-dim", _with(E, WTE, shape=[True, 8]), D, "non-negative integers", WTE))
    C(Case("string-dim", _with(E, WTE, shape=["40", 8]), D, "non-negative integers", WTE))
    C(Case("exponent-dim", _with(E, WTE, shape=Raw("[4e1, 8]")), D, "non-negative integers", WTE))
    C(Case("nan-dim", _with(E, WTE, shape=Raw("[NaN, 8]")), D, "not valid JSON"))
    C(Case("dim-beyond-u64", _with(E, WTE, shape=[2**64, 0]), D, "non-negative integers", WTE))
    C(Case("negative-offset", _with(E, WTE, data_offsets=Raw("[-0, 1280]")), D, "non-negative integers", WTE))
    C(Case("fractional-offset", _with(E, WTE, data_offsets=[0, 1280.5]), D, "non-negative integers", WTE))
    C(Case("three-offsets", _with(E, WTE, data_offsets=[0, 640, 1280]), D, "not [start, end]", WTE))
    C(Case("shape-not-a-list", _with(E, WTE, shape=320), D, "not a list of dimensions", WTE))
    C(Case("missing-dtype", [(WTE, {"shape": [40, 8], "data_offsets": off[WTE]})] + E[1:], D, "has no 'dtype'", WTE))
    C(Case("missing-offsets", [(WTE, {"dtype": "F32", "shape": [40, 8]})] + E[1:], D, "no 'data_offsets'", WTE))
    C(Case("tensor-not-an-object", [(WTE, 1280)] + E[1:], D, "not an object", WTE))
    C(Case("dtype-object-two-names", _with(E, WTE, dtype={"F32": None, "F16": None}), D, "exactly one name", WTE))
    C(Case("dtype-not-a-name", _with(E, WTE, dtype=32), D, "not a dtype name", WTE))
    # the header as a whole
    C(Case("header-an-array", [], b"", "not a JSON object", header=b"[]"))
    C(Case("header-trailing-garbage", [], D, "not valid JSON", header=_json(E).encode() + b"x"))
    C(Case("header-bom", [], D, "not valid JSON", header=b"\xef\xbb\xbf" + _json(E).encode()))
    C(Case("header-not-utf8", [], D, "not UTF-8", header=_json(E).encode().replace(b"wte", b"w\xfftf")))
    C(Case("header-length-past-the-end", E, D, "runs past the end of the file", length=10**6))
    C(Case("header-length-over-the-limit", E, D, "over the format's limit", length=100_000_001))
    C(Case("header-length-zero", [], b"", "not valid JSON", header=b"", length=0))
    C(Case("shorter-than-8-bytes", [], b"", "shorter than the 8-byte header length", whole=b"\x10\0\0\0"))
    C(Case("metadata-not-strings", [("__metadata__", {"format": 1})] + E, D, "not a string"))
    C(Case("metadata-a-list", [("__metadata__", ["pt"])] + E, D, "not an object of strings"))
    C(Case("number-out-of-range", _with(E, WTE, note=Raw("1e400")), D, "number out of range"))
    C(Case("lone-surrogate", [("__metadata__", {"note": Raw('"\\ud800"')})] + E, D, "surrogate"))

    def nested(k):
        return Raw("[" * k + "]" * k)

    C(Case("nested-128-levels", _with(E, WTE, extra=nested(126)), D, "nested more than 127 levels"))
    # valid, if unusual: accepted, numbers unchanged
    C(Case("nested-127-levels", _with(E, WTE, extra=nested(125)), D, None, same_numbers=True))
    C(Case("entries-in-reverse-order", E[::-1], D, None, same_numbers=True))
    C(Case("leading-whitespace", [], D, None, header=b" \n\t" + _json(E).encode(), same_numbers=True))
    C(Case("extra-fields", [(k, {**v, "note": "kept out"}) for k, v in E], D, None, same_numbers=True))
    C(Case("array-form", [(k, [v["dtype"], v["shape"], v["data_offsets"]]) for k, v in E], D, None,
           same_numbers=True))
    C(Case("dtype-object-form", [(k, {**v, "dtype": {"F32": None}}) for k, v in E], D, None, same_numbers=True))
    C(Case("metadata-null", [("__metadata__", None)] + E, D, None, same_numbers=True))
    C(Case("metadata-strings", [("__metadata__", {"format": "pt", "emoji": Raw('"\\ud83d\\ude00"')})] + E, D, None,
           same_numbers=True))
    C(Case("empty-tensor-with-huge-dims", E + [("extra.empty", {"dtype": "F32", "shape": [0, 2**63, 2**63],
                                                                "data_offsets": [len(D), len(D)]})], D, None))
    C(Case("bf16-view-of-the-embedding", _with(E, WTE, dtype="BF16", shape=[40, 16]), D, None))
    return cases


CORPUS = corpus()
BY_NAME = {c.name: c for c in CORPUS}


def _digest(folder: Path) -> dict:
    """sha256 of every regular file, the kind of everything else (special files are never opened)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            mode = os.lstat(p).st_mode
            if stat.S_ISREG(mode):
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, folder)] = hashlib.sha256(fh.read()).hexdigest()
            else:
                out[os.path.relpath(p, folder)] = stat.filemode(mode)[0] + (os.readlink(p) if stat.S_ISLNK(mode) else "")
        out.update({os.path.relpath(os.path.join(root, d), folder) + "/": "dir" for d in dirs})
    return out


@pytest.fixture(scope="module")
def st(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("st-corpus")
    for c in CORPUS:
        (d / f"{c.name}.safetensors").write_bytes(c.file_bytes())
    (d / "config.json").write_text(json.dumps({"n_head": 2}))
    return d


def _library(path: Path):
    """(accepted?, {name: (shape, dtype)}) by safetensors.safe_open, numpy and torch frameworks alike."""
    from safetensors import safe_open

    verdicts = []
    for fw in ("np", "pt"):
        try:
            with safe_open(str(path), fw) as f:
                verdicts.append({k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()})
        except Exception:           # the library's SafetensorError (and its binding's own errors)
            verdicts.append(None)
    assert (verdicts[0] is None) == (verdicts[1] is None), path    # both frameworks, one verdict
    return verdicts[0] is not None, verdicts[0]


def test_the_corpus_is_generated_large_and_two_sided():
    refused = [c for c in CORPUS if c.refused]
    accepted = [c for c in CORPUS if not c.refused]
    assert len(CORPUS) >= 80 and len(refused) >= 60 and len(accepted) >= 15, (len(refused), len(accepted))
    assert len({c.name for c in CORPUS}) == len(CORPUS)
    assert len({c.file_bytes() for c in CORPUS}) == len(CORPUS)        # every file differs


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_refused_exactly_when_the_library_refuses(st, case):
    """In-process: the reader's verdict is the library's; a refusal is one line naming the tensor and
    the fault; an accepted file lists the library's names, shapes and dtypes and every tensor reads as
    the library reads it (its own bytes, never a neighbour's)."""
    import torch
    from safetensors.torch import load_file

    from probe.errors import ProbeError
    from probe.readers.checkpoints import open_checkpoint

    path = st / f"{case.name}.safetensors"
    ok, listed = _library(path)
    assert ok == (case.refused is None), f"the library {'accepts' if ok else 'refuses'} {case.name}"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            src = open_checkpoint(path)
    except ProbeError as exc:
        assert not ok, f"refused a file the library accepts: {exc}"
        msg = str(exc)
        assert "\n" not in msg and msg.startswith(f"{path}: not a valid safetensors file: "), msg
        assert case.refused in msg, msg
        if case.tensor:
            assert f"tensor '{case.tensor}'" in msg, msg
        return
    assert ok, f"accepted a file the library refuses: {case.name}"
    assert {k: (tuple(s), d) for k, s in src.shapes().items() for d in [src.dtypes()[k].upper()]} == listed
    assert bool(caught) == case.name.startswith("duplicate-key"), [str(w.message) for w in caught]
    want = load_file(str(path)) if "huge" not in case.name else {}
    for name, t in want.items():
        got = src.read(name)
        arr = t.float().numpy() if t.dtype in (torch.float16, torch.bfloat16) else t.numpy()
        np.testing.assert_array_equal(got, arr, err_msg=name)
        if arr.ndim and arr.shape[0] > 3:
            np.testing.assert_array_equal(src.read_rows(name, 1, 3), got[1:3], err_msg=name)
    if case.same_numbers:
        for (name, _), a in zip(SHAPES, _arrays()):
            np.testing.assert_array_equal(src.read(name), a, err_msg=name)


def _one_error_line(res, args):
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (args, res.returncode, res.stdout[-300:], res.stderr[-500:])
    assert len(lines) == 1 and lines[0].startswith("Error: "), (args, res.stderr)
    assert "Traceback" not in res.stderr and not lines[0].startswith("Error: unexpected "), (args, lines[0])
    assert res.stdout == "", (args, res.stdout[:300])
    return lines[0]


ISSUE_CLASSES = ("negative-dim", "fractional-dim", "wrong-element-count", "reversed-offsets", "overlapping-offsets",
                 "gapped-offsets", "past-the-end", "duplicate-key", "unknown-dtype", "overflowing-shape", "aliased-range")


def _cli_calls(st: Path) -> list[tuple[list[str], Case]]:
    calls = []
    for c in CORPUS:
        f = str(st / f"{c.name}.safetensors")
        calls.append((["probe", "info", f], c))
        if c.refused:
            calls.append((["probe", "validate", f], c))
        if c.name.startswith(ISSUE_CLASSES) or c.same_numbers or c.name == "base":
            calls.append((["probe", "similarity", f, "--tokens", "0:12", "-f", "json"], c))
        if c.name.startswith(ISSUE_CLASSES) and c.name.endswith("-1") or c.name == "base":
            calls.append((["probe", "spectrum", f, "-f", "json"], c))
    return calls


@pytest.fixture(scope="module")
def cli_results(st):
    calls = _cli_calls(st)
    before = _digest(st)
    with ForkCLI(jobs=2) as cli:
        outs = cli.run_many([argv for argv, _ in calls])
    return calls, outs, before, _digest(st)


def test_the_cli_refuses_exactly_what_the_library_refuses(cli_results):
    """``probe info`` / ``validate`` / ``similarity`` / ``spectrum`` on every corpus file: a refused file
    gets exit 2 and the reader's one line (the same line from every command), an accepted one is
    described and computed on; nothing is printed from a file the library refuses."""
    calls, outs, before, after = cli_results
    first_line: dict[str, str] = {}
    for (argv, case), res in zip(calls, outs):
        if case.refused:
            line = _one_error_line(res, argv)
            assert "not a valid safetensors file" in line and case.refused in line, (argv, line)
            if case.tensor:
                assert f"tensor '{case.tensor}'" in line, (argv, line)
            assert first_line.setdefault(case.name, line) == line, (argv, line, first_line[case.name])
        elif argv[1] == "validate":
            continue
        else:
            assert res.returncode == 0 and res.stdout, (argv, res.stderr[-500:])
            warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
            assert bool(warned) == case.name.startswith("duplicate-key"), (argv, res.stderr)
            assert "listed more than once" in "".join(warned) or not warned
    assert after == before


def test_accepted_variants_give_the_base_numbers(cli_results):
    """Reordered entries, extra fields, the array and dtype-object forms, whitespace, a repeated name:
    the library reads the same bytes as from the plain file, and so do the probes."""
    calls, outs, _, _ = cli_results
    sims = {case.name: json.loads(res.stdout)["results"] for (argv, case), res in zip(calls, outs)
            if argv[1] == "similarity" and res.returncode == 0}
    same = [c.name for c in CORPUS if c.same_numbers]
    assert len(same) >= 12 and set(same) <= set(sims)
    for name in same:
        assert [{k: v for k, v in r.items() if k != "file"} for r in sims[name]] == \
            [{k: v for k, v in r.items() if k != "file"} for r in sims["base"]], name


def test_the_cli_cases_count(cli_results):
    calls, _, _, _ = cli_results
    refused = sum(1 for _, c in calls if c.refused)
    assert refused >= 150, refused


def test_a_sharded_folder_names_the_shard_and_the_tensor(tmp_path):
    """A sharded model whose second shard has a header the library refuses: refused when that shard's
    tensors are listed (info) or read, naming the shard file and the tensor."""
    E, D = _base()
    good = Case("s1", E[:2], D[:E[1][1]["data_offsets"][1]], None)
    rest = E[2:]
    base = rest[0][1]["data_offsets"][0]
    rest = [(k, {**v, "data_offsets": [v["data_offsets"][0] - base, v["data_offsets"][1] - base]}) for k, v in rest]
    bad = Case("s2", _with(rest, NAMES[3], shape=[8, -32]), D[base:], "non-negative")
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(good.file_bytes())
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(bad.file_bytes())
    wm = {k: "model-00001-of-00002.safetensors" for k, _ in E[:2]} | {k: "model-00002-of-00002.safetensors"
                                                                       for k, _ in rest}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    (tmp_path / "config.json").write_text(json.dumps({"n_head": 2}))
    before = _digest(tmp_path)
    for cmd in (["info"], ["similarity", "--tokens", "0:12"], ["spectrum"], ["validate"]):
        args = [cmd[0], str(tmp_path / ("model.safetensors.index.json" if cmd == ["validate"] else "")), *cmd[1:]]
        res = run_cli("probe", *args, timeout=120)
        if cmd == ["validate"]:
            assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
            continue
        line = _one_error_line(res, args)
        assert "model-00002-of-00002.safetensors: not a valid safetensors file" in line, line
        assert f"tensor '{NAMES[3]}'" in line, line
    assert _digest(tmp_path) == before


def test_a_shard_without_a_tensor_its_index_lists_is_named(tmp_path):
    """Issue 58: a shard that lacks a tensor the index puts in it (a shard of another save) was left out of
    the tensor list without a word (info showed a model missing a matrix; a probe said only 'no tensor')."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    t = {"transformer.wte.weight": rng.standard_normal((16, 8), dtype=np.float32),
         "transformer.h.0.attn.c_attn.weight": rng.standard_normal((8, 24), dtype=np.float32)}
    save_file({k: v for k, v in t.items() if k != "transformer.h.0.attn.c_attn.weight"},
              str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({"transformer.h.0.attn.c_proj.weight": rng.standard_normal((8, 8), dtype=np.float32)},
              str(tmp_path / "model-00002-of-00002.safetensors"))
    wm = {"transformer.wte.weight": "model-00001-of-00002.safetensors",
          "transformer.h.0.attn.c_attn.weight": "model-00002-of-00002.safetensors",
          "transformer.h.0.attn.c_proj.weight": "model-00002-of-00002.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    (tmp_path / "config.json").write_text(json.dumps({"n_head": 2}))
    for cmd in (["info"], ["spectrum"]):
        line = _one_error_line(run_cli("probe", cmd[0], tmp_path, timeout=120), cmd)
        assert "model.safetensors.index.json: lists tensor transformer.h.0.attn.c_attn.weight in " \
               "model-00002-of-00002.safetensors, which does not hold it" in line, line


def test_batch_turns_each_refusal_into_its_error_row(st, tmp_path):
    """``probe batch`` over a folder of corpus files: every refused file is one error row holding the
    reader's line, every accepted one has numbers, and the batch says it saw failures."""
    import csv
    import io

    pick = ["base", "negative-dim-0", "overlapping-offsets-1", "duplicate-key-stealing-a-range", "unknown-dtype-0",
            "past-the-end", "entries-in-reverse-order", "duplicate-key-0"]
    folder = tmp_path / "ckpts"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"n_head": 2}))
    for name in pick:
        shutil.copy(st / f"{name}.safetensors", folder / f"{name}.safetensors")
    res = run_cli("probe", "batch", str(folder), "-p", "similarity", "--tokens", "0:12", "-f", "csv", timeout=300)
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    errors = {Path(r["path"]).stem: r["value"] for r in rows if r["metric"] == "error"}
    numbers = {Path(r["path"]).stem for r in rows if r["metric"] not in ("error", "warning")}
    assert set(errors) == {n for n in pick if BY_NAME[n].refused}, errors
    assert numbers == {n for n in pick if not BY_NAME[n].refused}
    for name, msg in errors.items():
        assert "not a valid safetensors file" in msg and BY_NAME[name].refused in msg, msg
    assert res.returncode in (0, 1), res.stderr     # exit codes of batch: another item of the issue


def test_a_hub_file_read_by_ranges_is_checked_the_same(tmp_path):
    """A hub revision whose model.safetensors the library refuses: refused from the header and the
    file size (Content-Range), by HTTP ranges, with the same fault; a valid unusual one is read."""
    from hubserver import HubServer
    from test_hub_http import _env

    repo = "toy-org/bad-header"
    revs = {}
    for rev, case in (("bad", BY_NAME["overlapping-offsets-2"]), ("odd", BY_NAME["leading-whitespace"])):
        d = tmp_path / rev
        d.mkdir()
        (d / "model.safetensors").write_bytes(case.file_bytes())
        (d / "config.json").write_text(json.dumps({"n_head": 2, "model_type": "gpt2"}))
        revs[rev] = str(d)
    with HubServer({repo: revs}) as hub:
        env = _env(hub.url, tmp_path / "cache")
        bad = run_cli("probe", "info", f"hf:{repo}@bad", env=env, timeout=120)
        odd = run_cli("probe", "similarity", f"hf:{repo}@odd", "--tokens", "0:12", "-f", "json", env=env, timeout=120)
        served = hub.served("model.safetensors")
    line = _one_error_line(bad, "hf bad")
    assert f"hf:{repo}@" in line and "/model.safetensors: not a valid safetensors file" in line, line
    assert f"tensor '{NAMES[2]}'" in line and "overlapping" in line, line
    assert odd.returncode == 0 and json.loads(odd.stdout)["results"], odd.stderr
    assert served and all(rng and rng.startswith("bytes=") for _, rng in served)    # ranges only
    assert not list((tmp_path / "cache").rglob("model.safetensors"))                # nothing downloaded


# --- special files ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Special:
    kind: str        # fifo, link-to-fifo, chardev, socket, blockdev
    words: str       # what the error line says of it


KINDS = [Special("fifo", "a FIFO (named pipe)"), Special("link-to-fifo", "a FIFO (named pipe) (through a symbolic link)"),
         Special("chardev", "a character device"), Special("socket", "a socket")]


def _block_device() -> str | None:
    for name in sorted(os.listdir("/dev")):
        p = os.path.join("/dev", name)
        try:
            if stat.S_ISBLK(os.stat(p).st_mode):
                return p
        except OSError:
            continue
    return None


def _make(kind: str, path: Path, keep: list) -> None:
    """A special file of ``kind`` at ``path`` (never opened)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-to-fifo":
        target = path.with_name("." + path.name + ".fifo")
        os.mkfifo(target)
        os.symlink(target.name, path)
    elif kind == "chardev":
        os.symlink("/dev/null", path)        # a device node cannot be made without privileges: link to one
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        keep.append(s)
    elif kind == "blockdev":
        os.symlink(_block_device(), path)


@pytest.fixture(scope="module")
def sp(tmp_path_factory, tiny_run, st):
    """A short folder (UNIX socket paths are limited to ~100 bytes) holding a real snapshot, a model
    folder and, per kind of special file, the special files each case names."""
    root = Path(tempfile.mkdtemp(prefix="sp", dir="/tmp"))
    keep: list = []
    shutil.copy(tiny_run, root / "good.h5")
    ext = root / "ext"
    ext.mkdir()
    shutil.copy(st / "base.safetensors", ext / "model.safetensors")
    (ext / "config.json").write_text(json.dumps({"n_head": 2}))
    kinds = [k.kind for k in KINDS] + (["blockdev"] if _block_device() else [])
    for kind in kinds:
        d = root / kind
        d.mkdir()
        for name in ("x.safetensors", "x.h5", "x.pt", "x.bin", "groups.json", "words.txt", "text.txt", "map.json",
                     "table.csv", "stories.txt"):
            _make(kind, d / name, keep)
        # folders with one member special: config, weights, index, a shard, tokenizer, Trainer state
        for member in ("config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json"):
            f = d / ("m-" + member.split(".")[0].replace("_", "-") + ("-index" if "index" in member else ""))
            f.mkdir()
            if member != "model.safetensors":
                shutil.copy(st / "base.safetensors", f / "model.safetensors")
            if member != "config.json":
                (f / "config.json").write_text(json.dumps({"n_head": 2}))
            if member == "model.safetensors.index.json":
                (f / "model.safetensors").unlink()
            _make(kind, f / member, keep)
        shard = d / "m-shard"
        shard.mkdir()
        (shard / "config.json").write_text(json.dumps({"n_head": 2}))
        (shard / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {n: "model-00001-of-00001.safetensors" for n in NAMES}}))
        _make(kind, shard / "model-00001-of-00001.safetensors", keep)
        trainer = d / "run" / "checkpoint-500"
        trainer.mkdir(parents=True)
        shutil.copy(st / "base.safetensors", trainer / "model.safetensors")
        (trainer / "config.json").write_text(json.dumps({"n_head": 2}))
        _make(kind, trainer / "trainer_state.json", keep)
        listing = d / "listing"
        listing.mkdir()
        shutil.copy(st / "base.safetensors", listing / "a.safetensors")
        _make(kind, listing / "b.safetensors", keep)
        sweep = d / "sweep"
        sweep.mkdir()
        _make(kind, sweep / "sweep.json", keep)
        figs = d / "figs"
        figs.mkdir()
        _make(kind, figs / "fig_x.py", keep)
    yield root, kinds
    for s in keep:
        s.close()
    shutil.rmtree(root, ignore_errors=True)


# (argv with {k} for the kind's folder, {r} for the root; the special path the line names, relative to {k})
_FILE_COMMANDS = ["info", "validate", "similarity", "pca", "align", "condense", "spectrum", "rank", "norms", "sinks",
                  "tokens", "theory", "ood", "attention", "bias", "dynamics"]
SPECIAL_CASES = (
    [([c, "{k}/x.safetensors"], "x.safetensors") for c in _FILE_COMMANDS]
    + [(["info", "{k}/x.h5"], "x.h5"), (["similarity", "{k}/x.pt"], "x.pt"), (["spectrum", "{k}/x.bin"], "x.bin"),
       (["tokens", "{r}/ext", "{k}/x.h5"], "x.h5"),
       (["similarity", "{r}/good.h5", "--groups", "{k}/groups.json"], "groups.json"),
       (["similarity", "{r}/ext", "--groups", "{k}/groups.json"], "groups.json"),
       (["pca", "{r}/good.h5", "--words-file", "{k}/words.txt"], "words.txt"),
       (["similarity", "{r}/ext", "--words-file", "{k}/words.txt"], "words.txt"),
       (["norms", "{r}/ext", "--text", "{k}/text.txt"], "text.txt"),
       (["sinks", "{r}/ext", "--text", "{k}/text.txt"], "text.txt"),
       (["similarity", "{r}/ext", "--mapping", "{k}/map.json"], "map.json"),
       (["info", "{k}/m-config"], "config.json"),
       (["info", "{k}/m-model"], "model.safetensors"),
       (["info", "{k}/m-model-index"], "model.safetensors.index.json"),
       (["info", "{k}/m-shard"], "model-00001-of-00001.safetensors"),
       (["similarity", "{k}/m-tokenizer", "--words", "cat"], "tokenizer.json"),
       (["report", "{k}/run", "-o", "{r}/out-{kind}.html"], "trainer_state.json"),
       (["batch", "{k}/x.safetensors", "-p", "similarity"], "x.safetensors"),
       (["batch", "{k}/listing", "-p", "similarity"], "b.safetensors"),
       (["batch", "{r}/ext", "-p", "similarity", "-o", "{k}/table.csv"], "table.csv"),
       (["report", "{k}/x.safetensors", "-o", "{r}/out2-{kind}.html"], "x.safetensors"),
       (["sweep-summary", "{k}/sweep"], "sweep.json"),
       (["figures", "--list", "--examples", "{k}/figs"], "fig_x.py"),
       (["probe-train", "--preset", "tiny", "--resume", "--out", "{k}/x.h5"], "x.h5"),
       (["probe-train", "--preset", "tiny", "--task", "lm", "--stories", "{k}/stories.txt", "--out",
         "{r}/lm-{kind}.h5"], "stories.txt")])


def _special_ids():
    return [f"{k.kind}:{' '.join(a)[:60]}".replace("{k}/", "").replace("{r}/", "") for k in
            KINDS + [Special("blockdev", "a block device")] for a, _ in SPECIAL_CASES]


@pytest.mark.parametrize("i", range((len(KINDS) + 1) * len(SPECIAL_CASES)), ids=_special_ids())
def test_special_files_are_refused_at_once(sp, i):
    root, kinds = sp
    kind = (KINDS + [Special("blockdev", "a block device")])[i // len(SPECIAL_CASES)]
    if kind.kind not in kinds:
        pytest.skip("no block device on this machine")
    args, special = SPECIAL_CASES[i % len(SPECIAL_CASES)]
    argv = [a.format(k=root / kind.kind, r=root, kind=kind.kind) for a in args]
    script, argv = ("probe-train", argv[1:]) if argv[0] == "probe-train" else ("probe", argv)
    before = _digest(root)
    try:
        res = run_cli(script, *argv, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{script} {' '.join(argv)} did not end within 90 s: a reader blocked on {kind.kind}")
    line = _one_error_line(res, argv)
    words = kind.words if kind.kind != "chardev" else "a character device (through a symbolic link)"
    if kind.kind == "blockdev":
        words = "a block device (through a symbolic link)"
    assert f"{special}: " in line and f"is {words}, not a regular file" in line, line
    assert _digest(root) == before


@pytest.mark.parametrize("argv", [["info", "/dev/null"], ["validate", "/dev/null"], ["similarity", "/dev/zero"],
                                  ["ood", "/dev/zero"], ["batch", "/dev/null", "-p", "rank"]])
def test_a_device_node_itself_is_refused(argv):
    res = run_cli("probe", *argv, timeout=90)
    line = _one_error_line(res, argv)
    assert f"{argv[1]}: " in line and "is a character device, not a regular file" in line, line


def test_a_symlink_to_a_regular_file_is_read(sp, tmp_path):
    """Users link checkpoints and groups files: a link to a regular file is as good as the file."""
    root, _ = sp
    (tmp_path / "model.safetensors").symlink_to(root / "ext" / "model.safetensors")
    (tmp_path / "config.json").symlink_to(root / "ext" / "config.json")
    (tmp_path / "groups.json").write_text(json.dumps({"g": [1, 2, 3]}))
    (tmp_path / "g.json").symlink_to(tmp_path / "groups.json")
    res = run_cli("probe", "similarity", tmp_path, "--groups", tmp_path / "g.json", "--tokens", "g", "-f", "json",
                  timeout=120)
    assert res.returncode == 0 and json.loads(res.stdout)["results"], res.stderr
    run = tmp_path / "run.h5"
    run.symlink_to(root / "good.h5")
    res = run_cli("probe", "validate", run, timeout=120)
    assert res.returncode == 0, res.stderr


_HELPER_CHECK = r"""
import os, sys
from probe.files import open_regular, regular_file
from probe.errors import ProbeError
d = sys.argv[1]
fifo = os.path.join(d, "p")
os.mkfifo(fifo)
for call in (lambda: regular_file(fifo, "groups file"), lambda: open_regular(fifo, what="groups file")):
    try:
        call()
        raise SystemExit("not refused")
    except ProbeError as exc:
        assert str(exc) == f"{fifo}: groups file is a FIFO (named pipe), not a regular file; only regular files are read", exc
with open(os.path.join(d, "f"), "w") as fh:
    fh.write("x")
with open_regular(os.path.join(d, "f")) as fh:
    assert fh.read() == "x"
for path, words in ((d, "is a directory"), (os.path.join(d, "nope"), "cannot read groups file (No such file")):
    try:
        regular_file(path, "groups file")
        raise SystemExit("not refused")
    except ProbeError as exc:
        assert words in str(exc), exc
print("ok")
"""


def test_the_helper_never_opens_a_fifo(tmp_path):
    """probe.files: stat decides, and the open itself is non-blocking and re-checked. Run in a child
    with a timeout: were the helper to open the FIFO, the child would block, not this test process."""
    import sys

    res = subprocess.run([sys.executable, "-c", _HELPER_CHECK, str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_a_broken_config_beside_a_weights_file_is_said_not_skipped(tmp_path):
    """Issue 58: a config.json beside a weights file that is not JSON was taken as no config without a word;
    the head count's error then asked for the config.json that is there."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    save_file({"transformer.wte.weight": rng.standard_normal((16, 8), dtype=np.float32),
               "transformer.h.0.attn.c_attn.weight": rng.standard_normal((8, 24), dtype=np.float32),
               "transformer.h.0.attn.c_proj.weight": rng.standard_normal((8, 8), dtype=np.float32)},
              str(tmp_path / "model_100.safetensors"))
    (tmp_path / "config.json").write_text('{"n_head": 2,')
    res = run_cli("probe", "similarity", tmp_path / "model_100.safetensors", "--tokens", "0:8")
    assert res.returncode == 0, res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")] == \
        [f"warning: {tmp_path / 'config.json'}: not valid JSON; the weights beside it are read without a config"]
