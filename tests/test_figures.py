"""`probe figures` and the example scripts: real runs (tiny sizes), real PNG/PDF files, run reuse."""
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

FIGURES = {"p1-accuracy", "p1-emb-mlp", "p1-cosine", "p1-label-dist", "p1-embedding", "p1-wv-alignment",
           "p1-language", "p2-ood", "p2-transition", "p2-condensation", "p2-singular-values", "p2-attention",
           "p4-saturation", "p4-sinks", "p4-rank", "p4-tokens", "p4-critical"}


def _check_outputs(out, names):
    for n in names:
        png, pdf = out / f"{n}.png", out / f"{n}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
        assert pdf.read_bytes()[:5] == b"%PDF-"


def test_list_names_every_figure():
    res = run_cli("probe", "figures", "--list")
    assert res.returncode == 0, res.stderr
    assert {line.split("\t")[0] for line in res.stdout.splitlines()} == FIGURES


def test_figures_train_once_then_reuse(tmp_path):
    out = tmp_path / "figs"
    names = ("p1-accuracy", "p1-cosine", "p1-emb-mlp")
    res = run_cli("probe", "figures", *names, "--tiny", "-o", out)
    assert res.returncode == 0, res.stderr
    _check_outputs(out, names)
    assert sorted(res.stdout.split()) == sorted(str(out / f"{n}.{e}") for n in names for e in ("png", "pdf"))
    # every figure's missing runs are collected first and trained in one batch, before any figure
    assert res.stderr.count("training 6 run(s)") == 1 and "training 3" not in res.stderr
    assert res.stderr.index("training 6 run(s)") < res.stderr.index("figure p1-accuracy")
    runs = sorted((out / "runs").glob("anchor-*.h5"))
    assert len(runs) == 3                                   # gamma 0.3, 0.5, 0.8, shared by two figures
    stamps = [p.stat().st_mtime_ns for p in runs]
    # the same runs again, through the standalone script: nothing is retrained
    res = subprocess.run([sys.executable, ROOT / "examples" / "fig_p1_label_dist.py", "--size", "tiny",
                          "-o", out], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "training" not in res.stderr
    _check_outputs(out, ["p1-label-dist"])
    assert [p.stat().st_mtime_ns for p in runs] == stamps


def test_changed_config_gets_its_own_run(tmp_path):
    from probe.figures import FigureContext
    from probe_train.runs import run_finished

    ctx = FigureContext(tmp_path, "tiny", log=lambda m: None)
    a = ctx.runs({"r": ("tiny", {"gamma": 0.8})})["r"]
    b = ctx.runs({"r": ("tiny", {"gamma": 0.8, "steps": 20})})["r"]
    assert a != b and run_finished(a, 40) and run_finished(b, 20)


def test_killed_run_is_resumed_not_restarted(tmp_path):
    import signal

    import probe
    from probe.figures import FigureContext
    from probe_train import preset
    from probe_train.runs import config_hash, run_finished

    from conftest import popen_cli
    from waiting import committed, wait_for

    overrides = {"gamma": 0.8, "steps": 1000, "snapshot_every": 50}
    path = tmp_path / "runs" / f"r-{config_hash(preset('tiny', **overrides).to_dict())}.h5"
    path.parent.mkdir()
    proc = popen_cli("probe-train", "--preset", "tiny", "--gamma", "0.8", "--steps", "1000", "--snapshot-every",
                     "50", "--threads", "1", "--quiet", "--out", path)
    wait_for(lambda: committed([path], step=150), "fourth snapshot", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with probe.Run(path) as run:
        done = int(run.steps[-1])
    assert 0 < done < 1000
    logs = []
    ctx = FigureContext(tmp_path, "tiny", log=logs.append)
    assert ctx.runs({"r": ("tiny", overrides)})["r"] == path
    assert any("--resume" in m for m in logs) and run_finished(path, 1000)
    with probe.Run(path) as run:
        assert list(run.steps).count(done) == 1 and int(run.steps[0]) == 0


@pytest.mark.parametrize("args,needle", [
    (["no-such-figure", "--tiny"], "unknown figure"),
    (["--tiny"], "--all"),
    (["p1-accuracy", "--quick", "--tiny"], "exclude"),
    (["--all", "--examples", "/nonexistent"], "no figure scripts"),
])
def test_bad_calls_fail_in_one_line(tmp_path, args, needle):
    res = run_cli("probe", "figures", *args, "-o", tmp_path / "o")
    assert res.returncode == 2, res.stderr
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error:") and needle in err[0]


@pytest.mark.slow
def test_all_figures_tiny(tmp_path):
    res = run_cli("probe", "figures", "--all", "--tiny", "-o", tmp_path, timeout=1200)
    assert res.returncode == 0, res.stderr
    _check_outputs(tmp_path, sorted(FIGURES))


@pytest.mark.parametrize("size", ["tiny", "quick", "full"])
def test_every_size_asks_for_valid_runs(tmp_path, size):
    """The runs each figure asks for build valid configurations at every size (nothing is trained)."""
    from probe.figures import FigureContext
    from probe_train.config import preset

    asked = []

    class Planner(FigureContext):
        def runs(self, wanted):
            for name, overrides in wanted.values():
                asked.append(preset(name, **overrides))
            return {label: tmp_path / f"{label}.h5" for label in wanted}

    ctx = Planner(tmp_path, size)
    ctx.anchor(), ctx.emb_mlp(), ctx.composite(layers=(2, 3)), ctx.lm()
    assert len(asked) == 3 + 3 + 6 + 3
    kinds = {c.task for c in asked}
    assert kinds == {"anchor", "composite", "lm"}
    if size == "full":
        assert {c.d_model for c in asked if c.task != "lm"} == {400} and max(c.d_model for c in asked) == 768


def test_seeds_ask_for_one_run_per_seed_and_reuse_seed_zero(tmp_path):
    from probe.figures import FigureContext

    asked = {}

    class Planner(FigureContext):
        def runs(self, wanted):
            asked.update(wanted)
            return {label: tmp_path / f"{label}.h5" for label in wanted}

    ctx = Planner(tmp_path, "quick", seeds=4)
    runs = ctx.composite((0.5, 0.8), (2,), seeds=True)
    assert [p.name for p in runs[0.8, 2]] == ["composite-g0.8-L2.h5", "composite-g0.8-L2-s1.h5",
                                              "composite-g0.8-L2-s2.h5", "composite-g0.8-L2-s3.h5"]
    assert asked["composite-g0.8-L2"][1] == {"gamma": 0.8, "layers": 2}           # seed 0: the seedless run
    assert asked["composite-g0.8-L2-s3"][1] == {"gamma": 0.8, "layers": 2, "seed": 3}
    assert ctx.composite((0.5,), (2,))[0.5, 2].name == "composite-g0.5-L2.h5"
    assert Planner(tmp_path, "quick").seeds == 3 and Planner(tmp_path, "tiny").seeds == 1


def test_crossing_of_the_mean_with_its_interval():
    from probe.analyses.uncertainty import crossing

    xs = [0.3, 0.5, 0.7, 0.9]
    samples = [[-0.9, -0.8, -1.0], [-0.5, -0.4, -0.6], [0.5, 0.4, 0.6], [0.9, 1.0, 0.8]]
    c = crossing(xs, samples)
    assert c["x"] == pytest.approx(0.6) and c["ci_lo"] <= 0.6 <= c["ci_hi"] and c["found"] == 1.0
    flat = crossing(xs, [[0.0, 0.0]] * 4)               # no solution anywhere: no crossing
    assert flat["found"] == 0.0 and flat["x"] != flat["x"]


def test_dry_run_lists_each_figures_runs_and_writes_nothing(tmp_path):
    out = tmp_path / "figs"

    def planned():
        res = run_cli("probe", "figures", "p1-cosine", "p1-embedding", "--tiny", "--dry-run", "-o", out)
        assert res.returncode == 0, res.stderr
        rows = [line.split() for line in res.stdout.splitlines()[1:]]
        return [(r[0], r[1], r[3]) for r in rows], res.stderr

    rows, err = planned()
    assert rows == [("p1-cosine", "anchor-g0.8", "train"), ("p1-embedding", "anchor-g0.3", "train"),
                    ("p1-embedding", "anchor-g0.8", "train")]   # only what each draws; shared runs once
    assert "2 run(s) to train or resume, 0 to reuse" in err
    assert not out.exists()                                     # nothing written, not even the folder
    assert run_cli("probe", "figures", "p1-cosine", "--tiny", "-o", out).returncode == 0
    rows, err = planned()
    assert rows == [("p1-cosine", "anchor-g0.8", "reuse"), ("p1-embedding", "anchor-g0.3", "train"),
                    ("p1-embedding", "anchor-g0.8", "reuse")]
    assert "1 run(s) to train or resume, 1 to reuse" in err
