"""What a user reads on a terminal: every probe's table fits 80 columns (``--wide`` prints it whole),
one row per step, integers without decimals, the tensor names and metric names the Python results
use, a warning where a derived number means nothing, no empty table, and no library warning.

The probes come from :mod:`probe.registry`: a new probe is run here with no change to this file (if it
needs more than a snapshot file of the anchor task, :data:`NEEDS` says what).
"""
import json
import re

import numpy as np
import pytest

from conftest import RAW_TEX, run_cli, svg_texts
from probe import registry

WIDTH = 80   # the terminal ls and git assume (probe.render.WIDTH)
COMMANDS = [spec for spec in registry.probes() if spec.command is not None]
NEEDS = {"tokens": ("text", ["--step", "0", "--step-b", "latest"]),   # per-token losses: a text run, two steps
         "cka": ("anchor", ["--step", "all", "--step-b", "latest"]),   # two models: here two steps of one run
         "regime_widths": ("widths", ["--step", "latest"])}   # a sweep of widths, not one run   # two models: here two steps of one run
LIBRARY_WARNING = re.compile(r"\w*Warning\b")   # UserWarning, RuntimeWarning, 'Warning:'; ours are 'warning: ...'


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """A text run (logic + stories) that stores per-token losses."""
    out = tmp_path_factory.mktemp("runs") / "lm.h5"
    res = run_cli("probe-train", "--preset", "lm-tiny", "--token-probe", "4", "--out", out, "--quiet",
                  "--threads", "1")
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A GPT-2 style Hugging Face folder: weights only, no token groups."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    d, vocab = 8, 40
    sd = {"transformer.wte.weight": rng.standard_normal((vocab, d)),
          "transformer.h.0.attn.c_attn.weight": rng.standard_normal((d, 3 * d)),
          "transformer.h.0.attn.c_proj.weight": rng.standard_normal((d, d)),
          "transformer.h.0.mlp.c_fc.weight": rng.standard_normal((d, 4 * d)),
          "transformer.h.0.mlp.c_proj.weight": rng.standard_normal((4 * d, d))}
    folder = tmp_path_factory.mktemp("ckpt") / "gpt2"
    folder.mkdir()
    save_file({k: v.astype(np.float32) for k, v in sd.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"n_head": 2}))
    return folder


def _calls(spec) -> list[list[str]]:
    """The step selections a probe is run at: the latest step (its detail) and every step (the
    trajectory), or its one whole-run call."""
    if spec.name in NEEDS:
        return [NEEDS[spec.name][1]]
    if spec.whole_run is not None:
        return [[]]
    return [[], ["--step", "all"]]


def _long_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def _check_readable(res, what: str) -> None:
    assert res.returncode == 0, f"{what}: {res.stderr}"
    assert res.stdout.strip(), what
    assert not _long_lines(res.stdout), f"{what}: lines over {WIDTH} columns:\n" + "\n".join(_long_lines(res.stdout))
    assert not LIBRARY_WARNING.search(res.stderr), f"{what}: a library warning on stderr:\n{res.stderr}"
    # steps are rows: never a header with a column per step ('metric  step 0  step 20')
    assert not re.search(r"step \d+ +step \d+", res.stdout), f"{what}: steps as columns:\n{res.stdout}"


@pytest.mark.parametrize("spec", COMMANDS, ids=[s.name for s in COMMANDS])
def test_every_probe_table_fits_80_columns_and_its_figure_draws_its_labels(spec, tiny_run, text_run, tmp_path,
                                                                           request):
    file = text_run if NEEDS.get(spec.name, ("",))[0] == "text" else tiny_run
    if NEEDS.get(spec.name, ("",))[0] == "widths":   # runs of several widths
        file = request.getfixturevalue("width_sweep")
    for n, args in enumerate(_calls(spec)):
        plot = tmp_path / f"{spec.name}-{n}.svg"
        res = run_cli("probe", *(spec.command or spec.name).split(), file, *args, "--plot", plot)
        _check_readable(res, f"probe {spec.command or spec.name} {' '.join(args)}")
        texts = svg_texts(plot)
        assert texts and not [t for t in texts if RAW_TEX.search(t)], \
            f"{spec.name}: raw TeX in the figure: {[t for t in texts if RAW_TEX.search(t)]}"


@pytest.mark.parametrize("spec", COMMANDS, ids=[s.name for s in COMMANDS])
def test_every_probe_on_a_text_run_fits_or_says_in_one_line_why_not(spec, text_run):
    """A text run has other groups and splits (logic, story): a probe answers, or says in one line what
    is missing (similarity's default group 'reasoning'), never with a crash (ood once did)."""
    args = NEEDS[spec.name][1] if spec.name in NEEDS else []
    res = run_cli("probe", *(spec.command or spec.name).split(), text_run, *args)
    what = f"probe {spec.command or spec.name} on a text run"
    if res.returncode == 2:
        errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and "unexpected" not in errors[0], f"{what}: {res.stderr}"
    else:
        _check_readable(res, what)


def test_text_from_a_file_is_drawn_as_written_next_to_the_toolkits_math(tiny_run, tmp_path):
    """A file name holding ``$...$`` is shown as written, not read as math, in the same figure whose
    log axis draws 10⁻¹ as math (text from files is escaped where it enters a figure)."""
    import shutil

    run = tmp_path / "run $\\alpha$ 10$.h5"
    shutil.copy(tiny_run, run)
    plot = tmp_path / "norms.svg"
    res = run_cli("probe", "norms", run, "--step", "all", "--plot", plot)
    assert res.returncode == 0, res.stderr
    texts = svg_texts(plot)
    assert any(t.endswith(f"{run.name}: norms") for t in texts), texts
    assert "10−1" in texts                                  # the log axis: 10 to the −1, drawn as math
    assert not [t for t in texts if RAW_TEX.search(t) and run.name not in t]


def test_a_wide_similarity_matrix_shows_its_corner_and_wide_prints_it_whole(text_run):
    res = run_cli("probe", "similarity", text_run, "--tokens", "logic")
    _check_readable(res, "probe similarity --tokens logic")
    note = re.search(r"matrix (\d+)×(\d+): its first and last (\d+) tokens shown\s+\(--wide: all", res.stdout)
    assert note and note.group(1) == note.group(2) and 2 * int(note.group(3)) < int(note.group(1))
    k = int(note.group(1))
    assert "…" in res.stdout.splitlines()[1]                     # the header: first ids, …, last ids
    wide = run_cli("probe", "similarity", text_run, "--tokens", "logic", "--wide")
    assert wide.returncode == 0, wide.stderr
    header = wide.stdout.splitlines()[1].split()
    assert header[0] == "token" and len(header) == k + 1 and "…" not in header
    assert _long_lines(wide.stdout) and "tokens shown" not in wide.stdout
    # the summary of every step fits too, with one row per step
    res = run_cli("probe", "similarity", text_run, "--tokens", "logic", "--step", "all")
    _check_readable(res, "probe similarity --tokens logic --step all")


def test_a_summary_too_wide_for_one_table_splits_by_metric_with_steps_as_rows(tiny_run):
    res = run_cli("probe", "condense", tiny_run, "--step", "0,20,40")
    _check_readable(res, "probe condense --step 0,20,40")
    blocks = res.stdout.split("\n\n")
    assert blocks[0].splitlines()[0].split()[:3] == ["step", "eig1", "eig2"]
    assert [line.split()[0] for line in blocks[0].splitlines()[1:]] == ["0", "20", "40"]
    assert "sv1:" in res.stdout.splitlines()
    # norms and sinks, which had a column per step, have a row per step
    for probe in ("norms", "sinks"):
        res = run_cli("probe", probe, tiny_run, "--step", "0,20,40")
        _check_readable(res, f"probe {probe}")
        rows = [line.split()[0] for line in res.stdout.splitlines() if re.match(r"\s*(0|20|40)\s", line)]
        assert rows[:3] == ["0", "20", "40"], res.stdout


def test_integers_print_as_integers(tiny_run):
    from probe import api

    # the loss of the tiny run leaves ln V - 0.05 early: an escape step to print
    res = run_cli("probe", "dynamics", tiny_run, "--delta", "0.05")
    assert res.returncode == 0, res.stderr
    head, row = res.stdout.splitlines()[:2]
    cells = dict(zip(head.split(), row.split()))
    assert re.fullmatch(r"\d+", cells["escape_step"]) and re.fullmatch(r"\d+", cells["spikes"]), res.stdout
    res = run_cli("probe", "dynamics", tiny_run, "--delta", "0.05", "-f", "csv")
    assert re.search(r"^\d+,escape_step,,\d+$", res.stdout, re.M), res.stdout
    res = run_cli("probe", "condense", tiny_run)
    line = next(x for x in res.stdout.splitlines() if x.split()[:1] == ["step"] and "neuron_groups" in x)
    following = res.stdout.splitlines()[res.stdout.splitlines().index(line) + 1]
    assert re.fullmatch(r"\d+", dict(zip(line.split(), following.split()))["neuron_groups"]), res.stdout
    res = run_cli("probe", "rank", tiny_run, "--minima")
    assert res.returncode == 0, res.stderr
    head = res.stdout.splitlines()[2].split()
    for line in res.stdout.split("\n\n")[0].splitlines()[3:]:   # the first block: its other columns wrap below
        assert re.fullmatch(r"\d+", line.split()[head.index("min_step")]), line
    # counts, steps and yes/no in the summaries (tables, CSV, sweep metrics) are ints
    counts = {"condense": ["neuron_groups"], "norms": ["saturated_sites"], "spectrum": ["layers"],
              "dynamics": ["spikes"], "rank_trajectory": ["min_step", "condense_then_expand"]}
    for probe, metrics in counts.items():
        summary = api.probe_function(probe)(tiny_run)[0].summary()
        for key, value in summary.items():
            if key.split("[")[0] in metrics:
                assert type(value) is int, (probe, key, value)


def test_condense_and_spectrum_name_tensors_as_every_probe_does(tiny_run):
    from probe.format import Run

    with Run(tiny_run) as run:
        canonical = set(run.weights())
    res = run_cli("probe", "condense", tiny_run, "-f", "csv")
    keys = {line.split(",")[2] for line in res.stdout.splitlines()[1:] if line.split(",")[1] == "sv1"}
    assert keys and keys <= canonical and "layer0/W_K" in keys, keys
    res = run_cli("probe", "spectrum", tiny_run, "-f", "json")
    names = {layer["name"] for layer in json.loads(res.stdout)["results"][0]["layers"]}
    assert names <= canonical and {"layer1/W_out", "token_embedding", "unembedding"} <= names, names
    for probe in ("condense", "spectrum"):
        res = run_cli("probe", probe, tiny_run)
        assert "layer0/W_K" in res.stdout and "blocks." not in res.stdout, res.stdout


def test_the_cli_names_are_the_python_names(tiny_run):
    from probe import api

    b = api.bias(tiny_run)[0]
    assert b.summary()["delta_L"] == b.delta_L and "delta_L" in b.to_dict()
    assert "delta_L" in run_cli("probe", "bias", tiny_run).stdout.split()
    a = api.align(tiny_run)[0]
    assert a.summary()["sv1_share"] == a.sv1_share
    p = api.pca(tiny_run)[0]
    assert p.summary()["order_pc1[reasoning]"] == p.order_pc1["reasoning"]
    s = api.sinks(tiny_run)[0]
    assert s.summary()["sink_mass[layer1.head0]"] == s.sink_mass[1, 0]
    assert s.summary()["first_norm_ratio[out]"] == s.first_norm_ratio[-1]
    c = api.condense(tiny_run)[0]
    assert c.summary()["neuron_groups"] == len(c.neuron_group_sizes) and not hasattr(c, "neuron_groups")
    # any probe: a summary number named like a scalar attribute of its result is that attribute
    for spec in registry.probes():
        if spec.name in NEEDS:
            continue
        r = api.probe_function(spec.name)(tiny_run)[0]
        for key, value in r.summary().items():
            attr = getattr(r, key, None)
            if isinstance(attr, (int, float)) and not isinstance(attr, bool):
                assert value == attr or (np.isnan(value) and np.isnan(attr)), (spec.name, key, value, attr)


def test_gain_shares_of_a_negative_total_say_they_mean_nothing(text_run):
    # A the untrained step 0, B the last: A predicts worse, its total gain is negative
    res = run_cli("probe", "tokens", text_run, "--step", "0", "--step-b", "latest")
    assert res.returncode == 0, res.stderr
    assert re.search(r"^warning: A.s total gain .* is negative .* not meaningful", res.stderr, re.M), res.stderr
    res = run_cli("probe", "tokens", text_run, "--step", "0", "--step-b", "latest", "-f", "json")
    assert any("not meaningful" in w for w in json.loads(res.stdout)["results"][0]["warnings"])
    # the other way round the gain is real: no warning
    res = run_cli("probe", "tokens", text_run, "--step", "latest", "--step-b", "0")
    assert res.returncode == 0 and "not meaningful" not in res.stderr, res.stderr


def test_a_bias_over_a_near_zero_loss_says_it_means_nothing():
    from probe.analyses.bias import reasoning_bias

    tiny, fine = reasoning_bias(np.array([0.5, 0.5]), np.array([2e-5, 0.4]), np.array([10, 20]), "mem", "rsn_train")
    assert tiny.delta_L > 1000 and any("not meaningful" in w for w in tiny.warnings)
    assert fine.warnings == []


def test_no_groups_prints_no_empty_table_and_no_legend_warning(checkpoint, tmp_path):
    res = run_cli("probe", "align", checkpoint, "--layer", "0", "--head", "1", "--plot", tmp_path / "a.png")
    _check_readable(res, "probe align on a checkpoint")
    lines = res.stdout.splitlines()
    assert "no token groups" in res.stdout and not any(line.split() == ["group"] for line in lines)
    for i, line in enumerate(lines):     # a table header is followed by a row
        if line.split()[:1] in (["group"], ["step"]):
            assert i + 1 < len(lines) and lines[i + 1].strip(), res.stdout


def test_the_report_leaks_no_library_warning(checkpoint, tiny_run, tmp_path):
    res = run_cli("probe", "report", checkpoint, "-o", tmp_path / "ckpt.html")
    assert res.returncode == 0, res.stderr
    assert not LIBRARY_WARNING.search(res.stderr), res.stderr
    res = run_cli("probe", "report", tiny_run, "-p", "align", "-p", "pca", "-p", "sinks", "-o", tmp_path / "run.html")
    assert res.returncode == 0, res.stderr
    assert not LIBRARY_WARNING.search(res.stderr), res.stderr
