"""`probe figures` and the example scripts: real runs (tiny sizes), real PNG/PDF files, run reuse."""
import subprocess
import sys

import pytest

from conftest import RAW_TEX, ROOT, run_cli, svg_texts

FIGURES = {"p1-accuracy", "p1-emb-mlp", "p1-cosine", "p1-label-dist", "p1-embedding", "p1-wv-alignment",
           "p1-language", "p2-ood", "p2-transition", "p2-condensation", "p2-singular-values", "p2-attention",
           "p4-saturation", "p4-sinks", "p4-rank", "p4-tokens", "p4-critical"}


def _check_outputs(out, names):
    for n in names:
        png, pdf = out / f"{n}.png", out / f"{n}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
        assert pdf.read_bytes()[:5] == b"%PDF-"


def _batches(stderr: str) -> int:
    """How many batches of runs a command trained (its "training N run(s)" lines)."""
    import re

    return len(re.findall(r"^training \d+ run\(s\)", stderr, re.M))


def test_list_names_every_figure():
    res = run_cli("probe", "figures", "--list")
    assert res.returncode == 0, res.stderr
    assert {line.split("\t")[0] for line in res.stdout.splitlines()} == FIGURES


@pytest.mark.slow   # CI time (1003 s in a clean clone here, the CI machine ~170 s slower): 14 s; the dry-run test below trains a figure and plans it again as reused
def test_figures_train_once_then_reuse(tmp_path):
    out = tmp_path / "figs"
    names = ("p1-accuracy", "p1-cosine", "p1-emb-mlp")
    res = run_cli("probe", "figures", *names, "--tiny", "-o", out)
    assert res.returncode == 0, res.stderr
    _check_outputs(out, names)
    assert sorted(res.stdout.split()) == sorted(str(out / f"{n}.{e}") for n in names for e in ("png", "pdf"))
    # every figure's missing runs are collected first and trained in one batch, before any figure
    assert res.stderr.count("training 4 run(s)") == 1 and "training 2" not in res.stderr
    assert res.stderr.index("training 4 run(s)") < res.stderr.index("figure p1-accuracy")
    runs = sorted((out / "runs").glob("anchor-*.h5"))
    assert len(runs) == 2                                   # gamma 0.3 and 0.8, shared by two figures
    stamps = [p.stat().st_mtime_ns for p in runs]
    # the same runs again, through the standalone script: nothing is retrained
    res = subprocess.run([sys.executable, ROOT / "examples" / "fig_p1_label_dist.py", "--size", "tiny",
                          "-o", out], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert _batches(res.stderr) == 0
    _check_outputs(out, ["p1-label-dist"])
    assert [p.stat().st_mtime_ns for p in runs] == stamps


def test_changed_config_gets_its_own_run(tmp_path):
    from probe.figures import FigureContext
    from probe_train.runs import run_finished

    ctx = FigureContext(tmp_path, "tiny", log=lambda m: None)
    a = ctx.runs({"r": ("tiny", {"gamma": 0.8})})["r"]
    b = ctx.runs({"r": ("tiny", {"gamma": 0.8, "steps": 20})})["r"]
    assert a != b and run_finished(a, 40) and run_finished(b, 20)


@pytest.mark.slow   # CI time (the last CI took 1179 s of 1200): 14 s; test_resume.py resumes killed runs in the default set
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


@pytest.mark.parametrize("size", ["tiny", "quick", "full"])
def test_every_size_declares_valid_runs(tmp_path, size):
    """The runs every figure declares build valid configurations at every size (nothing is trained)."""
    from probe.figures import FigureContext, declarations, examples_dir, load_scripts, specs
    from probe_train.config import preset

    scripts = load_scripts(examples_dir())
    ctx = FigureContext(tmp_path / "out", size, create=False)
    declared, failed = declarations(list(scripts), scripts, ctx)
    assert failed == {} and set(declared) == FIGURES
    configs = {s.label: preset(s.preset, **s.config) for d in declared.values() for s in specs(d)}
    assert {c.task for c in configs.values()} == {"anchor", "composite", "lm"}
    assert {c.model for c in configs.values()} == {"transformer", "emb-mlp", "llama"}
    if size == "full":
        assert {c.d_model for c in configs.values() if c.task != "lm"} == {400}
        assert max(c.d_model for c in configs.values()) == 768


def test_seeds_declare_one_run_per_seed_and_share_seed_zero(tmp_path):
    from probe.figures import FigureContext

    ctx = FigureContext(tmp_path, "quick", seeds=4, create=False)
    runs = ctx.composite((0.5, 0.8), (2,), seeds=True)
    assert [s.label for s in runs[0.8, 2]] == ["composite-g0.8-L2", "composite-g0.8-L2-s1", "composite-g0.8-L2-s2",
                                               "composite-g0.8-L2-s3"]
    assert runs[0.8, 2][0].config == {"gamma": 0.8, "layers": 2}              # seed 0: the seedless run
    assert runs[0.8, 2][3].config == {"gamma": 0.8, "layers": 2, "seed": 3}
    assert ctx.composite((0.5,), (2,))[0.5, 2] == runs[0.5, 2][0]
    assert FigureContext(tmp_path, "quick", create=False).seeds == 3
    assert FigureContext(tmp_path, "tiny", create=False).seeds == 1


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


# --- every figure at --tiny, once per module: what each draws, states, plans -------------------------

@pytest.fixture(scope="module")
def tiny_all(tmp_path_factory):
    """`probe figures --all --tiny` from an empty folder (the suite's one run of every figure)."""
    out = tmp_path_factory.mktemp("all-tiny")
    res = run_cli("probe", "figures", "--all", "--tiny", "-o", out, timeout=900)
    assert res.returncode == 0, res.stderr
    return out, res


def test_all_figures_tiny(tiny_all):
    out, res = tiny_all
    _check_outputs(out, sorted(FIGURES))
    # the runs were trained in one batch, each once; a figure is drawn as soon as its runs are there
    assert _batches(res.stderr) == 1
    assert res.stderr.count("  $ probe-train ") == res.stderr.count("  done ")
    draws = [ln for ln in res.stderr.splitlines() if " drawn in " in ln]
    assert len(draws) == len(FIGURES)


READS = '''
import json, sys
from pathlib import Path

import matplotlib.figure

# what a figure reads is decided before its files are written: its PNG and PDF are not rendered
# (71 s -> 9 s); each figure is drawn once, as SVG, for the test of its text
drawn = {}
save_svg = matplotlib.figure.Figure.savefig
svg_dir = Path(sys.argv[2]) / "svg"
svg_dir.mkdir(parents=True)


def once_as_svg(self, *args, **kwargs):
    if id(self) not in drawn:
        drawn[id(self)] = svg_dir / f"{name}-{len(drawn)}.svg"
        save_svg(self, drawn[id(self)], format="svg")


matplotlib.figure.Figure.savefig = once_as_svg

opened = set()
sys.addaudithook(lambda event, args: opened.add(str(Path(args[0]).resolve()))
                 if event == "open" and str(args[0]).endswith(".h5") else None)
from probe.figures import FigureContext, declarations, examples_dir, load_scripts, resolved, specs

ctx = FigureContext(Path(sys.argv[2]), "tiny", runs_dir=Path(sys.argv[1]) / "runs", log=lambda m: None)
scripts = load_scripts(examples_dir())
declared, failed = declarations(list(scripts), scripts, ctx)
assert not failed, failed
out = {}
for name, script in scripts.items():
    need = specs(declared[name])
    paths, todo = ctx.plan({s.label: s.wanted for s in need})
    assert not todo, [j.label for j in todo]
    opened.clear()
    script.make(ctx, resolved(declared[name], {s: paths[s.label] for s in need}))
    out[name] = {"declared": sorted(str(p.resolve()) for p in paths.values()), "read": sorted(opened),
                 "svg": [str(p) for p in drawn.values() if p.name.startswith(name + "-")]}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def redrawn(tiny_all, tmp_path_factory):
    """Every figure drawn again from the --tiny runs, each run file it opens seen, each figure as SVG."""
    import json

    out, _ = tiny_all
    tmp = tmp_path_factory.mktemp("redrawn")
    script = tmp / "reads.py"
    script.write_text(READS)
    res = subprocess.run([sys.executable, script, out, tmp / "figures"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_each_figure_reads_exactly_the_runs_it_declares(redrawn):
    """Figures train only what they draw: drawing a figure opens every run file it declared and no
    other (Python's audit hook sees each open of a run file)."""
    assert set(redrawn) == FIGURES
    for name, s in redrawn.items():
        assert s["read"] == s["declared"], name


def test_every_figure_draws_its_labels(redrawn):
    """Tick labels, titles and legends render (a log axis's 10⁻¹), none printed as raw TeX such as
    ``$\\mathdefault{10^{-1}}$`` (as when math text was switched off for whole figures)."""
    for name, s in redrawn.items():
        assert s["svg"], name
        texts = [t for svg in s["svg"] for t in svg_texts(svg)]
        assert texts and not [t for t in texts if RAW_TEX.search(t)], \
            f"{name}: raw TeX in the figure: {[t for t in texts if RAW_TEX.search(t)]}"


def test_language_runs_read_the_story_source_they_are_given(tmp_path, monkeypatch):
    """--stories reaches the runs on logic + stories (and no other), names their label and the title;
    at --quick the default is the King James text where its program is on the PATH, else the presets'
    own stories, said once on the log."""
    from probe.figures import FigureContext, specs

    ctx = FigureContext(tmp_path, "tiny", create=False, stories="kjv")
    lm, llm, anchor = ctx.lm((0.3,)), ctx.llm((0.5,)), ctx.anchor((0.3,))
    assert lm[0.3].config["stories"] == "kjv" and lm[0.3].label == "lm-g0.3-kjv"
    assert all(s.config["stories"] == "kjv" for s in specs(llm))
    assert "stories" not in anchor[0.3].config
    assert ctx.title("T", text=True) == "T \u2014 logic + King James narrative (kjv)"
    assert ctx.title("T", "what it lacks") == "T\n(what it lacks)"   # the CPU sizes' caveat, no text named
    tiny = FigureContext(tmp_path, "tiny", create=False)   # the test size: the presets' own stories
    assert "stories" not in tiny.lm((0.3,))[0.3].config
    assert tiny.title("T", text=True).endswith("logic + template stories (synthetic)")
    assert FigureContext(tmp_path, "full", create=False).title("T", text=True).endswith("logic + TinyStories")
    bin_dir = tmp_path / "bin"   # a PATH with a 'bible' program: the default at --quick is kjv
    bin_dir.mkdir()
    (bin_dir / "bible").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "bible").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert FigureContext(tmp_path, "quick", create=False).lm((0.3,))[0.3].config["stories"] == "kjv"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))   # none: the presets' own, said once
    logs = []
    quick = FigureContext(tmp_path, "quick", create=False, log=logs.append)
    assert "stories" not in quick.lm((0.3,))[0.3].config and "stories" not in quick.llm((0.5,))[0.5, 1e-5, False].config
    assert len(logs) == 1 and "apt-get install bible-kjv-text bible-kjv" in logs[0]
    assert FigureContext(tmp_path, "quick", create=False, stories="synthetic").lm((0.3,))[0.3].label == "lm-g0.3-synthetic"


def test_check_states_each_figures_claims_with_its_seeds(tiny_all):
    import json

    out, _ = tiny_all
    res = run_cli("probe", "figures", "--all", "--tiny", "-o", out, "--check", "-f", "json")
    assert res.returncode == 0, res.stderr
    assert _batches(res.stderr) == 0                          # every run reused
    claims = json.loads(res.stdout)
    assert set(claims) == FIGURES and all(claims.values())   # every figure states its effect
    for name, cs in claims.items():
        for c in cs:
            assert c["n"] == len(c["values"]) >= 1 and 0 <= c["k"] <= c["n"] and c["claim"]
            assert 0.0 <= c["ci_lo"] <= c["fraction"] <= c["ci_hi"] <= 1.0
    # the P^s prediction is a property of the data: it holds at every size
    assert claims["p1-label-dist"][0]["k"] == 1
    # paper 4's logic-over-story gain is stated as the paper's direction, not as what this size shows
    assert [c["expected"] for c in claims["p4-tokens"]] == [True, True, False]
    assert all(c["expected"] for n, cs in claims.items() if n != "p4-tokens" for c in cs)
    table = run_cli("probe", "figures", "p1-label-dist", "p4-saturation", "--tiny", "-o", out, "--check")
    assert table.returncode == 0, table.stderr
    numbers, words = table.stdout.split("\n\n")
    lines = numbers.splitlines()
    assert lines[0].split()[:3] == ["figure", "shown", "fraction"] and len(lines) == 1 + 1 + 3
    assert [ln.split()[-1] for ln in lines[1:]] == ["1", "2", "3", "4"]           # each row names its claim
    assert [ln.split()[0] for ln in words.splitlines() if not ln.startswith("     ")] == ["1", "2", "3", "4"]
    assert max(map(len, table.stdout.splitlines())) <= 80


def test_dry_run_once_everything_is_trained_reuses_every_run(tiny_all):
    out, _ = tiny_all
    res = run_cli("probe", "figures", "--all", "--tiny", "-o", out, "--dry-run")
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert {r[3] for r in rows} == {"reuse"} and {r[0] for r in rows} == FIGURES
    assert "0 run(s) to train or resume" in res.stderr


def _plan(tmp_path, *args):
    import json

    res = run_cli("probe", "figures", "--all", "--quick", "-o", tmp_path / "o", "--dry-run", "-f", "json", *args)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "o").exists()                     # a dry run writes nothing
    return json.loads(res.stdout), res.stderr


@pytest.mark.slow   # CI time (1003 s in a clean clone here, the CI machine ~170 s slower): 10 s; the budget planner test (slow) plans from the same estimates
def test_dry_run_estimates_the_time_from_each_presets_measured_speed(tmp_path):
    from probe_train.speeds import makespan

    plan, err = _plan(tmp_path)
    todo = {r["file"]: r["estimate_s"] for r in plan["runs"] if r["action"] == "train"}
    assert len(todo) > 30 and all(s and s > 0 for s in todo.values())
    assert plan["train_seconds"] == pytest.approx(makespan([r for r in todo.values()], plan["jobs"]), rel=0.01)
    # drawing shares the cores with training: the wall time is at least either, at most their sum + a figure
    assert max(plan["train_seconds"], plan["draw_seconds"]) < plan["seconds"] < plan["train_seconds"] + plan["draw_seconds"] + 5
    # measured on this machine (whose speed changes with its load): the --quick goal is bench_figures.py's
    assert f"{len(todo)} run(s) to train or resume, 0 to reuse; estimated" in err
    assert set(plan["seeds"]) == FIGURES and plan["seeds"]["p1-accuracy"] == 3 and plan["seeds"]["p1-label-dist"] == 1


@pytest.mark.slow   # three plans, each measuring every quick preset's speed afresh: 85 s on 2 cores
def test_budget_gives_each_figure_the_most_seeds_that_fit(tmp_path):
    small, err = _plan(tmp_path, "--budget", "10")
    big, _ = _plan(tmp_path, "--budget", "40")
    assert small["seconds"] <= 600 and big["seconds"] <= 2400 and big["seconds"] > small["seconds"]
    assert all(big["seeds"][n] >= small["seeds"][n] >= 1 for n in FIGURES)
    assert max(big["seeds"].values()) > max(small["seeds"].values())
    assert "budget 10 min: " in err and "seeds per figure: p1-accuracy" in err
    tiny, err = _plan(tmp_path, "--budget", "0.5")                 # not even one seed each fits
    assert set(tiny["seeds"].values()) == {1} and "over the budget of 0.5 min" in err


def test_a_budget_is_refused_with_seeds_and_without_measured_speeds(tmp_path):
    res = run_cli("probe", "figures", "--all", "--quick", "--budget", "5", "--seeds", "3", "--dry-run")
    assert res.returncode == 2 and "give it or --seeds, not both" in res.stderr
    # the papers' sizes (GPU presets) are not measured on a CPU: no estimate, said by name, nothing made
    res = run_cli("probe", "figures", "p1-embedding", "p4-rank", "-o", tmp_path / "full", "--dry-run")
    assert res.returncode == 0 and "no estimate: never measured on this machine class: llm-gpu, paper1" in res.stderr
    res = run_cli("probe", "figures", "p1-embedding", "p4-rank", "-o", tmp_path / "full", "--budget", "5")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("Error: --budget needs each preset's measured speed")
    assert "llm-gpu, paper1" in res.stderr and not (tmp_path / "full").exists()


def test_the_figures_reference_page_is_made_from_the_declarations():
    from probe.figures import examples_dir
    from probe.figures.scripts import BEGIN, END, reference

    text = (ROOT / "docs" / "figures.md").read_text()
    made = text[text.index(BEGIN):text.index(END) + len(END)] + "\n"
    assert made == reference(examples_dir()), (
        "regenerate the table between the markers of docs/figures.md: "
        "python -c \"import probe.figures as f; print(f.reference(f.examples_dir()), end='')\"")
    for name in FIGURES:
        assert f"| `{name}` |" in made


@pytest.mark.slow
def test_every_quick_figure_shows_the_effect_it_states(tmp_path):
    """The measured claims of docs/figures.md at --quick (about ten minutes on 2 cores): every claim
    holds in most of the seeds it is checked in."""
    import json

    res = run_cli("probe", "figures", "--all", "--quick", "-o", tmp_path, "--check", "-f", "json", timeout=3600)
    assert res.returncode == 0, res.stderr
    claims = json.loads(res.stdout)
    assert set(claims) == FIGURES
    weak = [(n, c["claim"], f"{c['k']}/{c['n']}") for n, cs in claims.items() for c in cs
            if c["expected"] and 2 * c["k"] <= c["n"]]   # a paper's direction this size does not show: reported only
    assert weak == []


def test_figure_claims_writes_the_claims_as_a_results_file(tiny_all, tmp_path):
    """examples/figure_claims.py: probe figures --check's claims with what they were measured on, each
    claim with the k/n and interval a docs page inserts; bad calls get one line."""
    import json
    import subprocess
    import sys

    out, _ = tiny_all
    script = [sys.executable, str(ROOT / "examples" / "figure_claims.py")]
    res = subprocess.run([*script, "-o", tmp_path / "c.json", "--", "p1-accuracy", "p1-label-dist", "--tiny", "-o", out],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "c.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert set(data["values"]) == {"p1-accuracy", "p1-label-dist"} and data["meta"]["seeds"]
    assert "figure_claims.py" in data["meta"]["command"] and data["meta"]["machine"]
    for c in data["values"]["p1-accuracy"]:
        assert c["shown"] == f"{c['k']}/{c['n']}" and c["ci95"] == [c["ci_lo"], c["ci_hi"]] and c["claim"]
    bad = subprocess.run([*script, "-o", tmp_path / "d.json"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("Error: ") and len(bad.stderr.splitlines()) == 1
    assert not (tmp_path / "d.json").exists()
    bad = subprocess.run([*script, "-o", tmp_path / "d.json", "--", "no-such-figure", "--tiny", "-o", out],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Error" in bad.stderr and not (tmp_path / "d.json").exists()
