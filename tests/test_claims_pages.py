"""A sentence is a claim, on the pages tests/test_claims.py does not cover: getting started, the home
page, the paper-1 tutorial, the how-to pages, robustness, the snapshot file and performance. Each test
quotes the words it holds to account (``says``) and checks them against the file they come from: a
results file (docs/results/*.json), the benchmarks' record (bench/RESULTS.md) for a time or a speed,
the generated reference pages (docs/reference/presets.md, docs/reference/cli.md) for a preset's size or
an option's default. Change the file and the test names the words that are no longer true. Text only:
nothing is trained or run.
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
