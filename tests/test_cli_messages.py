"""Errors that tell a person what to type instead. A mistyped name gets the closest one suggested, as a
mistyped option does (Click's own): commands, presets, probes, figures and sweep metrics. A step a run
lacks: its steps, the first and the last. One ``Error:`` line, exit 2, nothing made."""
import pytest

from broken import assert_clean_error
from conftest import run_cli


def test_a_mistyped_command_names_the_closest(tiny_run):
    res = run_cli("probe", "simlarity", tiny_run)
    assert_clean_error(res)
    assert res.stderr.strip() == ("Error: No such command 'simlarity'. Did you mean 'similarity'? "
                                  "(see 'probe --help')")
    far = run_cli("probe", "xyzzy", tiny_run)   # nothing close: no guess
    assert_clean_error(far)
    assert far.stderr.strip() == "Error: No such command 'xyzzy'. (see 'probe --help')"


@pytest.mark.parametrize("args, line", [
    (["--preset", "quik"], "Error: unknown preset 'quik'; did you mean 'quick'? (known: paper1, quick,"),
    (["--preset", "quik", "--print-config"], "did you mean 'quick'?"),
    (["sweep", "--preset", "tyny", "--grid", "seed=0:1", "-o", "{d}/s"], "did you mean 'tiny'?"),
    (["presetz"], "Error: unknown command 'presetz'; did you mean 'presets'? (commands: sweep, presets, ensemble, coord-check;"),
])
def test_a_mistyped_preset_or_train_command_names_the_closest(tmp_path, args, line):
    res = run_cli("probe-train", *(a.format(d=tmp_path) for a in args))
    assert_clean_error(res, line)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, fragment", [
    (["batch", "RUN", "--probe", "simlarity"], "unknown probe 'simlarity'; did you mean 'similarity'? (known: "),
    (["batch", "RUN", "-p", "spectrum", "-p", "rnak"], "unknown probe 'rnak'; did you mean 'rank'?"),
    (["report", "RUN", "-p", "simlarity", "-o", "{d}/r.html"], "unknown probe 'simlarity'; did you mean 'similarity'?"),
    (["figures", "p1-cosin", "--dry-run"], "unknown figure 'p1-cosin'; did you mean 'p1-cosine'? (known: "),
    (["figures", "p1-cosin", "p2-od", "nothing-near", "--dry-run"],
     "unknown figures 'p1-cosin' (did you mean 'p1-cosine'?), 'p2-od' (did you mean 'p2-ood'?), 'nothing-near' "
     "(known: "),
    (["batch", "RUN", "--probe", "zzzzzz"], "unknown probe 'zzzzzz' (known: "),   # nothing close: the list alone
])
def test_a_mistyped_probe_or_figure_names_the_closest(tiny_run, tmp_path, args, fragment):
    res = run_cli("probe", *(str(tiny_run) if a == "RUN" else a.format(d=tmp_path) for a in args), cwd=tmp_path)
    assert_clean_error(res, fragment)
    assert list(tmp_path.iterdir()) == []


def test_a_mistyped_sweep_metric_names_the_closest(tmp_path):
    sweep = tmp_path / "sweep"
    res = run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "seed=0:1", "-o", sweep, "-j", "1")
    assert res.returncode == 0, res.stderr
    for metric, fragment in [
            ("simlarity:distance_corr", "--metric simlarity:distance_corr: unknown probe 'simlarity'; did you mean "
                                        "'similarity'? (known: "),
            ("similarity:distance_cor", "probe similarity has no metric 'distance_cor'; did you mean "
                                        "'distance_corr'? (its metrics: "),
            ("similarity(tokens=memory):mean_ofdiag", "did you mean 'mean_offdiag'?")]:
        assert_clean_error(run_cli("probe", "sweep-summary", sweep, "--metric", metric), fragment)


def test_the_suggestion_is_difflibs_closest():
    from probe.errors import closest, did_you_mean

    assert closest("quik", ["paper1", "quick", "tiny"]) == "quick"
    assert closest("zzz", ["paper1", "quick"]) is None
    assert did_you_mean("simlarity", ("similarity", "cohesion")) == "; did you mean 'similarity'?"
    assert did_you_mean("zzz", ("similarity",)) == ""


def test_a_missing_step_lists_the_first_and_the_last_steps(tmp_path):
    run = tmp_path / "many.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--steps", "40", "--snapshot-every", "2", "--no-snapshot-log",
                  "--out", run, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    res = run_cli("probe", "similarity", run, "--step", "99999")
    assert_clean_error(res)
    assert res.stderr.strip() == (f"Error: {run}: no snapshot at step 99999; steps are 0, 2, 4, 6, ..., 38, 40 "
                                  "(21 snapshots)")


def test_the_step_list_elides_the_middle_of_a_long_run():
    from probe.format.steps import listed

    assert listed([0, 1, 2, 4, 8, 10, 20, 30, 40]) == "0, 1, 2, 4, 8, 10, 20, 30, 40"
    assert listed(range(0, 3001, 150)) == "0, 150, 300, 450, ..., 2850, 3000 (21 snapshots)"
