"""What a newcomer meets first: ``probe-train --version``, ``--help`` (its commands and examples),
``presets``, ``--print-config``; sweep-summary's errors on a sweep of another task; the paper tables
(examples/) on a sweep folder that is not there yet."""
import json
import shutil
import subprocess
import sys
from importlib.metadata import version

import pytest
import yaml

import probe
from probe_train.cli import COMMANDS, config_text
from probe_train.config import PRESETS, PURPOSES, preset

from conftest import ROOT, run_cli


def one_error(res, *needles: str) -> str:
    """The run ended in one ``Error: ...`` line and exit 2, with every needle in it."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def block(text: str, title: str) -> list[str]:
    """The lines of the help block whose first line starts with ``title`` (``Examples:``) up to the next
    blank line, without their frame."""
    lines = [ln.strip(" │") for ln in text.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith(title))
    out = []
    for ln in lines[start + 1:]:
        if not ln.strip():
            break
        out.append(ln.strip())
    return out


# --- --version --------------------------------------------------------------------------------------

def test_version_is_the_installed_distribution_and_imports_no_torch(tmp_path):
    res = run_cli("probe-train", "--version", real=True)
    assert res.returncode == 0 and res.stdout == f"probe-train {version('gamma-probe')}\n" and res.stderr == ""
    # the console script's own entry point, in a fresh interpreter: torch is never imported for it
    code = ("import sys\nsys.argv = ['probe-train', '--version']\nfrom probe_train._entry import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "print('torch' in sys.modules, file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0 and res.stderr.strip() == "False", res.stderr
    assert res.stdout.startswith("probe-train ")


# --- --help -----------------------------------------------------------------------------------------

def test_help_lists_the_commands_and_examples_that_run():
    res = run_cli("probe-train", "--help")
    assert res.returncode == 0, res.stderr
    commands = block(res.stdout, "Commands")
    assert [ln.split()[0] for ln in commands] == list(COMMANDS) == ["sweep", "presets", "ensemble", "coord-check"]
    examples = block(res.stdout, "Examples:")
    # 3-5 commands, each whole on its line (not wrapped at 80 columns)
    assert 3 <= len(examples) <= 5 and all(ln.startswith("probe-train ") for ln in examples), examples
    assert "probe-train presets" in examples and any("--print-config" in ln for ln in examples)
    assert any(ln.startswith("probe-train sweep ") and "--grid" in ln and ln.split()[-2] in ("-o", "--out")
               for ln in examples)
    # the examples that train nothing run as written
    for line in examples:
        if "--print-config" in line or line == "probe-train presets":
            ran = run_cli(*line.split())
            assert ran.returncode == 0 and ran.stdout, (line, ran.stderr)
    # the preset's values behind "default: the preset's value" are one flag away
    assert "default to the preset's value; --print-config shows them all" in " ".join(res.stdout.split())
    assert "probe-train presets says what each is for" in " ".join(res.stdout.replace("│", " ").split())


@pytest.mark.parametrize("argv, command", [(("probe-train",), "train_command"), (("probe-train", "sweep"), "sweep"),
                                           (("probe-train", "presets"), "presets")])
def test_a_flag_is_shown_as_a_flag_and_a_value_with_its_kind(argv, command):
    """``-q, --quiet`` alone (no ``<bool>`` or BOOLEAN after it, as Typer once showed), ``--out TEXT``
    with what it takes."""
    import re

    import click

    from probe_train import cli

    res = run_cli(*argv, "--help")
    assert res.returncode == 0, res.stderr
    shown = [re.split(r"\s{2,}", ln.strip())[0] for ln in res.stdout.splitlines() if ln.startswith("  -")]
    for p in getattr(cli, command).params:
        if not isinstance(p, click.Option) or p.hidden:
            continue
        line = next(s for s in shown if p.opts[0] in s.replace(",", " ").split())
        words = line.replace(",", " ").split()
        if p.is_flag:
            assert all(w.startswith("-") or w == "/" for w in words), line
        else:
            assert not words[-1].startswith("-") and "bool" not in words[-1].lower(), line
    assert "-q, --quiet" in shown if command == "train_command" else True


def test_help_lists_every_option_under_one_heading():
    """The options were 186 lines of one list: each is under one heading, the config fields' under the
    group their declaration in config.py gives, and every option of the command is shown once."""
    import re
    from dataclasses import fields

    from probe_train.cli import train_command
    from probe_train.config import RunConfig

    res = run_cli("probe-train", "--help")
    assert res.returncode == 0, res.stderr
    heading, under = None, {}
    for line in res.stdout.splitlines():
        if re.fullmatch(r"[A-Z][a-z ]+:", line):
            heading = line[:-1]
            under[heading] = []
        elif line.startswith("  -"):
            assert heading is not None, line   # no option before the first heading
            under[heading] += [w for w in re.split(r"\s{2,}", line.strip())[0].replace(",", " ").split()
                               if w.startswith("--")]
    assert list(under) == ["Run control", "Output", "Task", "Model", "Optimisation", "Snapshots"]
    shown = [flag for flags in under.values() for flag in flags]
    every = [o for p in train_command.params for o in p.opts + p.secondary_opts if o.startswith("--")] + ["--help"]
    assert sorted(shown) == sorted(every)                       # each once, none left out
    for f in fields(RunConfig):
        assert "--" + f.name.replace("_", "-") in under[f.metadata["group"]], f.name
    assert {"--preset", "--resume", "--print-config"} <= set(under["Run control"])
    assert {"--out", "--overwrite", "--tensorboard"} <= set(under["Output"])


@pytest.mark.parametrize("command", ["sweep", "presets"])
def test_each_command_has_its_own_examples(command):
    res = run_cli("probe-train", command, "--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"Usage: probe-train {command} ")
    examples = block(res.stdout, "Examples:")
    assert len(examples) >= 3 and all(ln.startswith(("probe-train ", "probe ")) for ln in examples), examples
    assert any(ln.startswith(f"probe-train {command}") for ln in examples)


def test_a_mistyped_command_word_is_named():
    one_error(run_cli("probe-train", "sweeps", "--preset", "tiny"), "unknown command 'sweeps'", "sweep, presets")


def test_training_needs_no_command_word(tmp_path):
    out = tmp_path / "run.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--steps", "4", "--snapshot-every", "2", "--out", out, "--quiet")
    assert res.returncode == 0 and out.exists(), res.stderr
    one_error(run_cli("probe-train", "--preset", "tiny"), "Missing option '--out'", "--print-config")


# --- presets ----------------------------------------------------------------------------------------

def test_every_preset_has_a_one_line_purpose():
    assert list(PURPOSES) == list(PRESETS)
    assert all(p.strip() and "\n" not in p and len(p) <= 90 for p in PURPOSES.values())


def test_presets_table_json_and_csv():
    table = run_cli("probe-train", "presets")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert max(map(len, lines)) <= 80   # an 80-column terminal: the purposes wrap on lines of their own
    assert lines[0].split() == ["preset", "task", "model", "layers", "d_model", "steps"]
    rows = []   # a preset's line, then its purpose's lines, indented
    for ln in lines[1:]:
        if ln.startswith("    "):
            rows[-1].append(ln.strip())
        else:
            rows.append([ln])
    assert [r[0].split()[0] for r in rows] == list(PRESETS)
    for r, (name, purpose) in zip(rows, PURPOSES.items()):
        c = preset(name)
        assert r[0].split()[1:] == [c.task, c.model, str(c.layers), str(c.d_model), str(c.steps)]
        assert " ".join(r[1:]) == purpose   # every word of it, in order
    assert table.stderr == ""   # no note: no time is shown (it depends on the machine: figures --dry-run)

    rows = json.loads(run_cli("probe-train", "presets", "--format", "json").stdout)
    assert [r["preset"] for r in rows] == list(PRESETS) and [r["purpose"] for r in rows] == list(PURPOSES.values())
    by = {r["preset"]: r for r in rows}
    assert by["llm-gpu"]["model"] == "llama" and by["llm-gpu"]["layers"] == 12
    assert by["quick"]["d_ff"] == preset("quick").d_ff

    csv = run_cli("probe-train", "presets", "-f", "csv").stdout.splitlines()
    assert csv[0] == "preset,task,model,layers,d_model,heads,d_ff,steps,batch_size,purpose"
    assert len(csv) == len(PRESETS) + 1 and csv[1].startswith("paper1,anchor,transformer,2,400,")

    one_error(run_cli("probe-train", "presets", "--format", "xml"), "--format", "xml")


# --- --print-config ---------------------------------------------------------------------------------

def test_print_config_is_the_resolved_configuration_and_trains_nothing(tmp_path):
    res = run_cli("probe-train", "--preset", "quick", "--gamma", "0.8", "--print-config", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert json.loads(res.stdout) == preset("quick", gamma=0.8).to_dict()
    # --out is optional, and not written when given
    res = run_cli("probe-train", "--preset", "tiny", "--out", tmp_path / "x.h5", "--print-config", "--format", "yaml",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load(res.stdout) == preset("tiny").to_dict()
    assert list(tmp_path.iterdir()) == []
    # bad values are refused as training refuses them
    one_error(run_cli("probe-train", "--print-config", "--gamma", "-1"), "--gamma")
    one_error(run_cli("probe-train", "--print-config", "--preset", "nope"), "unknown preset 'nope'", "quick")
    one_error(run_cli("probe-train", "--format", "yaml", "--out", tmp_path / "y.h5"), "--format yaml", "--print-config")
    assert not (tmp_path / "y.h5").exists()


@pytest.mark.parametrize("name", list(PRESETS))
def test_print_config_yaml_reads_back_as_the_same_values(name):
    # 1e-05 must read back as a float, strings as strings
    cfg = preset(name)
    assert yaml.safe_load(config_text(cfg, "yaml")) == cfg.to_dict() == json.loads(config_text(cfg, "json"))


def test_print_config_with_resume_shows_the_stored_run(tiny_run):
    before = tiny_run.stat().st_mtime_ns
    res = run_cli("probe-train", "--resume", "--out", tiny_run, "--steps", "80", "--print-config")
    assert res.returncode == 0, res.stderr
    cfg = json.loads(res.stdout)
    assert (cfg["gamma"], cfg["steps"], cfg["d_model"]) == (0.8, 80, preset("tiny").d_model)
    assert tiny_run.stat().st_mtime_ns == before
    one_error(run_cli("probe-train", "--resume", "--print-config"), "Missing option '--out'", "the run to continue")


# --- sweep-summary on a sweep of another task ---------------------------------------------------------

@pytest.fixture(scope="module")
def composite_sweep(tmp_path_factory):
    """One tiny composite run (splits train, test, ood_*; token groups anchors and keys), a few seconds."""
    d = tmp_path_factory.mktemp("sweep") / "composite"
    res = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "task=composite", "--grid", "gamma=0.5",
                  "--grid", "steps=10", "--out", d, "--jobs", "1")
    assert res.returncode == 0, res.stderr
    return d


def test_a_missing_split_blames_the_option_that_holds_it(composite_sweep):
    line = one_error(run_cli("probe", "sweep-summary", composite_sweep, "--outcome", "acc[rsn_test]>0.5"),
                     "Error: --outcome acc[rsn_test]>0.5: no split 'rsn_test'",
                     "train, test, ood_inferential, ood_symmetric")
    assert "--metric" not in line
    one_error(run_cli("probe", "sweep-summary", composite_sweep, "--metric", "acc[rsn_test]"),
              "Error: --metric acc[rsn_test]: no split 'rsn_test'", "ood_inferential")
    # a term of both: --metric, where it stands alone
    one_error(run_cli("probe", "sweep-summary", composite_sweep, "--metric", "loss[mem]", "--outcome", "loss[mem]<1"),
              "Error: --metric loss[mem]:")
    # the Python API names its own parameter
    with pytest.raises(probe.ProbeError, match=r"^outcome='acc\[rsn_test\]>0.5': no split 'rsn_test'"):
        probe.sweep_summary(composite_sweep, outcome="acc[rsn_test]>0.5")


def test_a_missing_default_token_group_shows_the_groups_and_the_brackets(composite_sweep):
    line = one_error(run_cli("probe", "sweep-summary", composite_sweep, "--metric", "similarity:mean_offdiag"),
                     "Error: --metric similarity:mean_offdiag:", "'reasoning'", "anchors, keys",
                     "similarity(tokens=anchors):mean_offdiag")
    assert "--tokens" not in line   # the probe command's option, which sweep-summary has not
    one_error(run_cli("probe", "sweep-summary", composite_sweep, "--outcome", "similarity:mean_offdiag>0.5"),
              "Error: --outcome similarity:mean_offdiag>0.5:", "similarity(tokens=anchors):mean_offdiag")
    # the suggestion works as written
    ok = run_cli("probe", "sweep-summary", composite_sweep, "--metric", "similarity(tokens=anchors):mean_offdiag",
                 "--format", "json")
    assert ok.returncode == 0, ok.stderr
    assert "similarity(tokens=anchors):mean_offdiag" in ok.stdout


# --- the paper tables on a sweep that is not there ----------------------------------------------------

def example(script: str, *args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / script), *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_p4_table_without_its_sweep_says_how_to_make_it(tmp_path, composite_sweep):
    make = "probe-train sweep --preset llm-quick --grid gamma="
    res = example("p4_critical_table.py", cwd=tmp_path)   # its default folder, sweeps/p4
    one_error(res, "Error: sweeps/p4: no sweep there", make, "--out sweeps/p4")
    assert res.stdout == ""
    (tmp_path / "empty").mkdir()
    one_error(example("p4_critical_table.py", "empty", cwd=tmp_path), "Error: empty: no sweep there", make)
    one_error(example("p4_critical_table.py", "sweeps/p4", "missing", cwd=tmp_path), "sweeps/p4", make)
    # a sweep of another task: no table either
    one_error(example("p4_critical_table.py", composite_sweep, cwd=tmp_path), "not a run of the lm task", make)


def test_p2_table_without_its_sweeps_says_how_to_make_them(tmp_path, composite_sweep):
    make = "probe-train sweep --preset composite-quick --grid gamma="
    res = example("p2_direction_table.py", "nowhere", cwd=tmp_path)
    one_error(res, "Error: nowhere: none of the direction map's sweeps there", "examples/p2_direction_map.sh nowhere",
              make, "--out nowhere/base")
    assert res.stdout == ""   # no empty table
    one_error(example("p2_direction_table.py", cwd=tmp_path), "Error: sweeps/p2-map:", make)
    # a sweep whose runs are gone: the folder's own line, no half table
    (tmp_path / "gone" / "base").mkdir(parents=True)
    shutil.copy(composite_sweep / "sweep.json", tmp_path / "gone" / "base")
    res = example("p2_direction_table.py", "gone", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines()[-1] == "Error: gone/base: no finished run to summarise", res.stderr
    # with the sweep in place, the table
    shutil.copytree(composite_sweep, tmp_path / "map" / "base")
    res = example("p2_direction_table.py", "map", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = res.stdout.splitlines()
    assert rows[0].startswith("| setting | γ |") and len(rows) == 3 and rows[2].startswith("| composite-quick")
    # -o: the same numbers as a docs results file, with what they were measured on
    res = example("p2_direction_table.py", "map", "-o", "map.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "map.json").read_text())
    assert data["values"]["table"] == res.stdout.strip() and data["values"]["cells"] == 1
    (cell,) = data["values"]["base"].values()
    assert set(cell) >= {"std", "fit", "inf>sym", "inf>0.5", "sym>0.5", "inf", "sym"}
    assert cell["inf>sym"]["shown"] in rows[2] and f"{cell['inf']['mean']:.2f} / {cell['sym']['mean']:.2f}" in rows[2]
    assert data["meta"]["seeds"] and data["meta"]["command"].startswith("python examples/p2_direction_table.py map")
