"""Text from a file is data (issue 35, point 3): what a file holds or is named is shown, never obeyed.

Tensor names in a safetensors header, token-group names and config values stored in a snapshot, a
run's file name, words of a words file and the tokenizer pieces a warning quotes hold terminal
controls: ESC sequences that retitle the window (``ESC ] 0 ; pwned BEL``) or clear it (``ESC [ 2 J``),
BS, CR, TAB, LF, DEL, the C1 CSI (U+009B) and a bidi override (U+202E). Every way such text reaches a
terminal (a table, ``probe info``, ``probe validate``, a warning line, an ``Error:`` line, a progress
line off and on a terminal, batch's rows and error column, probe-train's lines) shows it through
:func:`probe.printable.terminal`: each control as ``\\xNN`` / ``\\uXXXX``, no raw control byte on stdout or
stderr (on a terminal, only the progress bar's own codes). JSON and CSV keep the exact text: read
back, each name is the original string.
"""
from __future__ import annotations

import csv
import io
import json
import re
import shutil

import h5py
import numpy as np
import pytest

from conftest import BIN, popen_cli, run_cli, without_status
from waiting import Terminal

# a run's or a tensor's name: every kind of control a terminal obeys (no "/": a file or HDF5 name holds it)
P = "x\x1b]0;pwned\x07\x1b[2J\x08\r\t\n\x7f\x9b\u202ey"
SHOWN = r"x\x1b]0;pwned\x07\x1b[2J\x08\x0d\x09\x0a\x7f\x9b\u202ey"
# a word of a words file: no whitespace (the file splits words at it)
W = "\x1b]0;pwned\x07\x1b[2J\x9b\u202e"
W_SHOWN = r"\x1b]0;pwned\x07\x1b[2J\x9b\u202e"
TENSOR = f"evil{P}.weight"
# what must never reach a terminal: C0 controls but tab and newline (the toolkit's own separators), DEL,
# C1, and the bidi and zero-width format characters
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def clean(*texts: str) -> None:
    for text in texts:
        assert RAW.findall(text) == [], text


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_run):
    """A folder holding every hostile input: a safetensors file, runs with hostile group names, config
    values and file names, and a GPT-2 folder with a tokenizer and a words file."""
    from safetensors.numpy import save_file

    d = tmp_path_factory.mktemp("untrusted")
    save_file({TENSOR: np.eye(4, dtype=np.float32) * 2, "ok.weight": np.zeros((2, 2), np.float32)},
              str(d / "evil.safetensors"))
    shutil.copy(tiny_run, d / "groups.h5")
    # datasets added with a checksum, as the trainer writes them (schema 1.4)
    with h5py.File(d / "groups.h5", "a") as f:    # a group of tokens no stored group holds
        f["run/token_groups"].create_dataset(P, data=np.arange(40, 50), fletcher32=True)
        task = json.loads(f.attrs["task"])
        task["token_groups"] = list(task["token_groups"]) + [P]
        f.attrs["task"] = json.dumps(task)
    shutil.copy(tiny_run, d / "config.h5")
    with h5py.File(d / "config.h5", "a") as f:
        cfg = json.loads(f.attrs["config"])
        cfg.update({"norm": P, P: P})
        f.attrs["config"] = json.dumps(cfg)
        env = json.loads(f.attrs["environment"])
        env["torch"] = P
        f.attrs["environment"] = json.dumps(env)
    shutil.copy(tiny_run, d / "findings.h5")
    with h5py.File(d / "findings.h5", "a") as f:  # a group of float ids: a finding that names it
        f["run/token_groups"].create_dataset(P, data=np.linspace(0, 1, 4), fletcher32=True)
    shutil.copy(tiny_run, d / f"{P}.h5")
    return d


@pytest.fixture(scope="module")
def tokenized(work):
    """A tiny GPT-2 folder whose tokenizer splits ``W`` into its characters (each a piece of the
    warning), ``a`` and ``b`` one token each; and a words file of the three."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = work / "gpt2"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=2, n_head=4, vocab_size=50, n_positions=8)).save_pretrained(folder)
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(set(W + "ab")))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    (work / "words.txt").write_text(f"a\n{W}\nb\n")
    return folder


def exact(*args, cwd) -> tuple[int, str, str]:
    """``probe ARGS``'s exit code and output as written (run_cli reads text mode: a CR would read as LF)."""
    proc = popen_cli("probe", *args, cwd=cwd)
    out, err = proc.stdout.buffer.read(), proc.stderr.buffer.read()   # small: neither pipe fills
    return proc.wait(), out.decode(), err.decode()


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


# --- the one door -----------------------------------------------------------------------------------

def test_terminal_escapes_what_a_terminal_obeys_and_keeps_the_rest():
    from probe.printable import terminal

    assert terminal(P) == SHOWN
    controls = "".join(map(chr, [*range(0x20), 0x7f, *range(0x80, 0xa0)]))
    assert terminal(controls) == "".join(f"\\x{c:02x}" for c in [*range(0x20), 0x7f, *range(0x80, 0xa0)])
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    assert terminal(bidi) == r"\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    assert terminal("zero\u200bwidth\u2028line\ufeff") == r"zero\u200bwidth\u2028line\ufeff"
    assert terminal("run-\udcff.h5") == r"run-\xff.h5"          # a byte that is not UTF-8, as shown() spells it
    kept = "Δ é 日本 'quoted' \"double\" back\\slash [bold] :smile: ok"
    assert terminal(kept) is kept


# --- a checkpoint's tensor names -----------------------------------------------------------------------

def test_info_of_a_checkpoint_shows_tensor_names_escaped(work):
    res = run_cli("probe", "info", "evil.safetensors", cwd=work)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ("file       evil.safetensors\n"
                          "format     safetensors, step -\n"
                          "layout     unknown (evil.safetensors: unknown checkpoint layout)\n"
                          "parameters 20\n"
                          "tensors\n"
                          f"  {'evil' + SHOWN + '.weight':<48} {'4 x 4':>16}  f32\n"
                          f"  {'ok.weight':<48} {'2 x 2':>16}  f32\n")
    clean(res.stdout, res.stderr)


def test_info_of_a_checkpoint_as_csv_and_json_keeps_the_exact_names(work):
    code, out, err = exact("info", "evil.safetensors", "-f", "csv", cwd=work)
    assert code == 0, err
    assert [(r[1], r[2], r[3]) for r in _csv(out) if r[1] == "shape"] == [
        ("shape", TENSOR, "4x4"), ("shape", "ok.weight", "2x2")]
    res = run_cli("probe", "info", "evil.safetensors", "-f", "json", cwd=work)
    assert res.returncode == 0, res.stderr
    assert list(json.loads(res.stdout)["tensors"]) == [TENSOR, "ok.weight"]
    assert "\x1b" not in res.stdout and "\\u001b]0;pwned\\u0007" in res.stdout   # JSON's own escapes


def test_a_probe_table_shows_tensor_names_escaped(work):
    res = run_cli("probe", "spectrum", "evil.safetensors", "--wide", cwd=work)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "step 0" and lines[1].split() == [
        "layer", "shape", "spectral_norm", "log_norm", "stable_rank", "entropy_rank", "alpha", "xmin", "xmax",
        "ks_distance"]
    assert [ln.split()[:3] for ln in lines[2:4]] == [["evil" + SHOWN + ".weight", "4x4", "4.0000"],
                                                     ["ok.weight", "2x2", "0.0000"]]
    clean(res.stdout, res.stderr)


def test_a_probe_table_cut_to_fit_shows_no_control_either(work):
    res = run_cli("probe", "spectrum", "evil.safetensors", cwd=work)
    assert res.returncode == 0, res.stderr
    # cut to 40 columns after escaping, its middle given up for …: no escape is cut into a control
    assert res.stdout.splitlines()[2].split()[0] == r"evilx\x1b]0;pwned\x…7f\x9b\u202ey.weight"
    clean(res.stdout, res.stderr)


def test_a_probe_csv_and_json_keep_the_exact_tensor_names(work):
    code, out, err = exact("spectrum", "evil.safetensors", "-f", "csv", cwd=work)
    assert code == 0, err
    assert sorted({r[2] for r in _csv(out)[1:]}) == sorted([TENSOR, "ok.weight"])
    res = run_cli("probe", "spectrum", "evil.safetensors", "-f", "json", cwd=work)
    assert res.returncode == 0, res.stderr
    assert [lay["name"] for lay in json.loads(res.stdout)["results"][0]["layers"]] == [TENSOR, "ok.weight"]


def test_an_error_line_shows_the_names_it_lists_escaped(work):
    res = run_cli("probe", "rank", "evil.safetensors", cwd=work)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (
        f"Error: evil.safetensors: unknown checkpoint layout; tensors found: evil{SHOWN}.weight, ok.weight. Pass a "
        'name-mapping JSON file ({"heads": H, "token_embedding": "raw.name", "layer0/W_V": ...}, raw tensors in '
        'x @ W layout or with "transpose": [names]) as --mapping\n')


# --- a snapshot's group names and config values -------------------------------------------------------

def test_info_of_a_run_shows_config_values_group_names_and_versions_escaped(work):
    res = run_cli("probe", "info", "config.h5", cwd=work)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[2] == "model      transformer  gamma=0.8  d_model=16  layers=2  heads=2  d_ff=32"
    # the escaped text is wider than the terminal: broken at the space after it
    assert lines[3] == f"           norm={SHOWN}" and lines[4].startswith("           norm_eps=1e-05  init std ")
    assert f"torch {SHOWN}, numpy " in " ".join(res.stdout.split())   # broken before the long version
    clean(res.stdout, res.stderr)
    res = run_cli("probe", "info", "groups.h5", cwd=work)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    at = lines.index("groups")
    assert lines[at + 1:at + 5] == ["  keys         10 tokens  21:31", "  memory       10 tokens  1:11",
                                    "  reasoning    10 tokens  11:21", f"  {SHOWN}   10 tokens  40:50"]
    clean(res.stdout, res.stderr)


def test_info_of_a_run_as_csv_and_json_keeps_the_exact_text(work):
    code, out, err = exact("info", "config.h5", "-f", "csv", cwd=work)
    assert code == 0, err
    config = {r[2]: r[3] for r in _csv(out) if r[1] == "config"}
    assert config["norm"] == P and config[P] == P
    res = run_cli("probe", "info", "groups.h5", "-f", "json", cwd=work)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["groups"][P] == list(range(40, 50))


def test_a_summary_table_shows_group_names_escaped(work):
    res = run_cli("probe", "cohesion", "groups.h5", "--wide", cwd=work)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["step", "within[keys]", "within[memory]", "within[reasoning]", f"within[{SHOWN}]",
                                "between[keys|memory]", "between[keys|reasoning]", f"between[keys|{SHOWN}]",
                                "between[memory|reasoning]", f"between[memory|{SHOWN}]",
                                f"between[reasoning|{SHOWN}]", "separation"]
    clean(res.stdout, res.stderr)
    res = run_cli("probe", "cohesion", "groups.h5", cwd=work)     # too wide: a table per keyed metric
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[lines.index("within:") + 1].split() == ["step", "keys", "memory", "reasoning",
                                                         r"x\x1b]0;pwned\x07\x…9\x0a\x7f\x9b\u202ey"]   # cut
    clean(res.stdout, res.stderr)


def test_a_group_name_is_the_exact_key_of_the_csv(work):
    code, out, err = exact("cohesion", "groups.h5", "-f", "csv", cwd=work)
    assert code == 0, err
    assert [(r[1], r[2]) for r in _csv(out) if P in r[2]] == [
        ("within", P), ("between", f"keys|{P}"), ("between", f"memory|{P}"), ("between", f"reasoning|{P}")]


def test_validate_shows_findings_escaped_and_json_keeps_them(work):
    res = run_cli("probe", "validate", "findings.h5", cwd=work)
    assert res.returncode == 1 and res.stderr == ""
    assert res.stdout == f"findings.h5: 'run/token_groups/{SHOWN}' has dtype float64, expected int64\n"
    res = run_cli("probe", "validate", "findings.h5", "-f", "json", cwd=work)
    assert res.returncode == 1
    assert json.loads(res.stdout)["findings"] == [f"'run/token_groups/{P}' has dtype float64, expected int64"]


# --- a file name --------------------------------------------------------------------------------------

def test_a_file_name_in_validate_info_and_error_lines_is_escaped(work):
    res = run_cli("probe", "validate", f"{P}.h5", cwd=work)
    assert (res.returncode, res.stdout, res.stderr) == (0, f"{SHOWN}.h5: valid\n", "")
    res = run_cli("probe", "info", f"{P}.h5", cwd=work)
    # the escaped name is wider than the terminal: what follows it goes to the next line
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines[0].startswith(f"file       {SHOWN}.h5")
    clean(res.stdout)
    res = run_cli("probe", "info", f"missing {P}.h5", cwd=work)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"Error: missing {SHOWN}.h5: no such file or folder\n"


def test_a_usage_error_line_escapes_the_value_it_quotes(work):
    res = run_cli("probe", "info", "groups.h5", "--format", W, cwd=work)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (f"Error: Invalid value for '--format' / '-f': '{W_SHOWN}' is not one of 'table', 'json', "
                          "'csv'. (see 'probe info --help')\n")


def test_a_file_name_in_plain_progress_lines_and_the_report_is_escaped(work, tmp_path):
    res = run_cli("probe", "report", work / f"{P}.h5", "-o", tmp_path / "page.html", "--probe", "cohesion")
    assert res.returncode == 0, res.stderr
    assert res.stderr == (f"report: {SHOWN}.h5: cohesion (1/1)\n"
                          f"wrote {tmp_path / 'page.html'}: 1 run(s), 1 probes\n")
    page = (tmp_path / "page.html").read_text()
    assert r"x\x1b]0;pwned\x07\x1b[2J\x08" in page and "\x1b" not in page and "\x07" not in page


def test_a_report_page_shows_c1_del_and_bidi_controls_escaped(work, tmp_path):
    """A page is read by people too: a bidi override in a group name would draw the name (and what
    follows it) backwards; C1 and DEL are invisible. The page spells them as the terminal does."""
    res = run_cli("probe", "report", work / "groups.h5", "-o", tmp_path / "page.html", "--probe", "cohesion")
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "page.html").read_text()
    assert r"\x7f\x9b\u202ey" in page
    assert [c for c in "\x7f\x9b\u202e\x1b\x07\x08" if c in page] == []


def test_a_file_name_in_a_progress_line_on_a_terminal_is_escaped(work, tmp_path):
    name = f"[bold]{P}.h5"      # rich markup in it too: shown as written, not as a style
    shutil.copy(work / "groups.h5", tmp_path / name)
    page = tmp_path / "page.html"
    term = Terminal([str(BIN / "probe"), "report", str(tmp_path / name), "-o", str(page), "--probe", "cohesion"])
    term.wait_for(re.escape(f"report: [bold]{SHOWN}.h5: cohesion (1/1)"), "the progress line")
    out, shown = term.finish()
    assert term.proc.returncode == 0 and out == "", shown
    # rich's own codes are there (it drew the line, then took it away), the file's are not
    assert "\x1b[?25l" in term.seen and "\x1b]0;pwned" not in term.seen and "\x1b[2J" not in term.seen
    clean(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.seen).replace("\r", ""))
    assert shown.strip().splitlines()[-1] == f"wrote {page}: 1 run(s), 1 probes"


# --- warnings: words of a words file, tokenizer pieces -------------------------------------------------

def test_a_warning_line_shows_the_word_and_its_tokenizer_pieces_escaped(work, tokenized):
    res = run_cli("probe", "similarity", tokenized, "--words-file", work / "words.txt")
    assert res.returncode == 0, res.stderr
    pieces = r"\x1b ] 0 ; p w n e d \x07 \x1b [ 2 J \x9b \u202e"     # each character a piece
    assert without_status(res.stderr) == f"warning: '{W_SHOWN}' is 16 tokens ({pieces}); left out\n"
    clean(res.stdout, res.stderr)



def test_token_pieces_label_table_rows_escaped(tokenized):
    res = run_cli("probe", "similarity", tokenized, "--tokens", "0,1,2")    # ids 0, 1: BEL and ESC
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == ["cosine similarity, step 0", "   token     0      1      2"]
    assert [ln.strip().split("  ")[0] for ln in lines[2:5]] == [r"0 '\x07'", r"1 '\x1b'", "2 '0'"]
    clean(res.stdout, res.stderr)


# --- batch: its rows, its error column, its warning rows -------------------------------------------------

def _batch_error(path) -> str:
    return (f"{path}: unknown checkpoint layout; tensors found: {TENSOR}, ok.weight. Pass a name-mapping JSON file "
            '({"heads": H, "token_embedding": "raw.name", "layer0/W_V": ...}, raw tensors in x @ W layout or with '
            '"transpose": [names]) as mapping')


def test_batch_table_shows_paths_and_the_error_column_escaped(work):
    res = run_cli("probe", "batch", work / "evil.safetensors", work / f"{P}.h5", "--probe", "cohesion")
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["path", "step", "probe", "key", "metric", "value"]
    assert {ln.split()[0] for ln in lines[1:-1]} == {f"{work}/{SHOWN}.h5"} and len(lines) == 9
    assert lines[-1].split()[:4] == [f"{work}/evil.safetensors", "-", "cohesion", "error"]
    assert lines[-1].endswith("error  unknown checkpoint layout")   # the reason; stderr says it whole
    whole = _batch_error(work / "evil.safetensors").replace(f"{work / 'evil.safetensors'}: ", "")
    assert f"error: {work}/evil.safetensors (cohesion): {whole.replace(TENSOR, f'evil{SHOWN}.weight')}\n" \
        in without_status(res.stderr)
    clean(res.stdout, res.stderr)


def test_batch_csv_json_and_its_table_file_keep_the_exact_text(work, tmp_path):
    code, out, err = exact("batch", "evil.safetensors", f"{P}.h5", "--probe", "cohesion", "-f", "csv", cwd=work)
    assert code == 1, err
    rows = _csv(out)
    assert {r[0] for r in rows[1:]} == {str(work / f"{P}.h5"), str(work / "evil.safetensors")}
    assert rows[-1] == [str(work / "evil.safetensors"), "", "cohesion", "", "error",
                        _batch_error(work / "evil.safetensors")]
    res = run_cli("probe", "batch", "evil.safetensors", "--probe", "cohesion", "-f", "json", cwd=work)
    assert res.returncode == 1 and json.loads(res.stdout)[0]["value"] == _batch_error(work / "evil.safetensors")
    table = tmp_path / f"{P}.csv"
    res = run_cli("probe", "batch", "evil.safetensors", "--probe", "cohesion", "-o", table, cwd=work)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == f"wrote {tmp_path}/{SHOWN}.csv: 1 rows, 1 error rows\n"
    with open(table, newline="") as fh:
        assert list(csv.reader(fh))[1][5] == _batch_error(work / "evil.safetensors")


def test_batch_warning_rows_show_tokenizer_pieces_escaped_and_csv_keeps_them(work, tokenized):
    args = ("batch", tokenized, "--probe", "cohesion", "--words-file", work / "words.txt")
    res = run_cli("probe", *args)
    assert res.returncode == 0, res.stderr
    pieces = r"\x1b ] 0 ; p w n e d \x07 \x1b [ 2 J \x9b \u202e"
    warned = [ln for ln in res.stdout.splitlines() if " warning  " in ln]
    assert len(warned) == 1 and warned[0].endswith(f"warning  '{W_SHOWN}' is…")   # its reason, in 40 columns
    assert f"warning: {tokenized} (cohesion): '{W_SHOWN}' is 16 tokens ({pieces}); left out\n" \
        in without_status(res.stderr)
    clean(res.stdout, res.stderr)
    code, out, err = exact(*args, "-f", "csv", cwd=work)
    assert code == 0, err
    assert [r[5] for r in _csv(out) if r[4] == "warning"] == [f"'{W}' is 16 tokens ({' '.join(W)}); left out"]


# --- probe-train ------------------------------------------------------------------------------------------

def test_probe_train_says_the_file_it_wrote_escaped(tmp_path):
    res = run_cli("probe-train", "--preset", "tiny", "--out", tmp_path / f"{P}.h5", "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(rf"wrote {re.escape(f'{tmp_path}/{SHOWN}.h5')}: 9 snapshots, 40 steps in \d+\.\d s\n",
                        res.stderr), res.stderr
    assert (tmp_path / f"{P}.h5").is_file()
    clean(res.stdout, res.stderr)


def test_a_sweep_says_its_folder_escaped(tmp_path):
    out = tmp_path / f"sweep{W}"
    res = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "seed=0:1", "--out", out)
    assert res.returncode == 0, res.stderr
    shown = f"{tmp_path}/sweep{W_SHOWN}"
    lines = res.stderr.splitlines()
    assert lines[0] == f"training 1 run(s), 2 at a time, into {shown}" and lines[-1] == f"{shown}: 1 of 1 runs done"
    assert re.fullmatch(r"seed0\tdone\tseed0-[0-9a-f]{10}\.h5\n", res.stdout), res.stdout
    clean(res.stdout, res.stderr)


def test_print_config_as_yaml_keeps_the_exact_text_in_escapes():
    import yaml

    res = run_cli("probe-train", "--preset", "tiny", "--tokenizer", W, "--stories", P, "--print-config",
                  "--format", "yaml")
    assert res.returncode == 0, res.stderr
    clean(res.stdout)
    assert 'tokenizer: "\\e]0;pwned\\a\\e[2J\\x9B\\u202E"\n' in res.stdout     # PyYAML's escapes
    config = yaml.safe_load(res.stdout)
    assert (config["tokenizer"], config["stories"]) == (W, P)
