"""A sentence is a claim: the words of the docs that state a direction, a count, a comparison or
"every", "same", "never", "fewest" are checked here against the results file the page's numbers come
from (docs/results/*.json), or against the toolkit's own interval method. Each test names the page and
quotes the words it holds to account, so a sentence cannot drift from its file: change the file and
the test says which words are no longer true.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from probe.analyses.uncertainty import verdict, wilson

DOCS = Path(__file__).resolve().parents[1] / "docs"
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def values(name: str) -> dict:
    return json.loads((DOCS / "results" / f"{name}.json").read_text())["values"]


def page(path: str) -> str:
    """The page's text with every run of whitespace one space (a sentence may wrap anywhere)."""
    return re.sub(r"\s+", " ", (DOCS / path).read_text())


def says(path: str, words: str) -> None:
    assert re.sub(r"\s+", " ", words) in page(path), f"{path} no longer says: {words}"


def k_of(entry: dict) -> tuple[int, int]:
    k, n = entry["shown"].split("/")
    return int(k), int(n)


def cell_verdict(entry: dict) -> str:
    k, n = k_of(entry)
    return verdict(*wilson(k, n), 0.5)


def interval(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}]"


# --- the seed-count rule: from the Wilson interval itself -------------------------------------------

def fewest(k_of_n) -> int:
    """The fewest seeds n for which ``k_of_n(n)`` seeds of n make the verdict against 1/2 other than
    "not shown"."""
    return next(n for n in range(1, 100) if verdict(*wilson(k_of_n(n), n), 0.5) != "not shown")


def test_the_seed_count_rule_is_the_wilson_intervals():
    """seed-sweep.md plans seed counts from "N seeds are the fewest that can say above": computed here
    from the interval the toolkit prints (a four-seed sweep's 4/4 is `above`; five were once claimed)."""
    all_of, none_of, one_against = fewest(lambda n: n), fewest(lambda n: 0), fewest(lambda n: n - 1)
    assert all_of == none_of                       # the interval is symmetric
    n, m = all_of, one_against
    says("tutorials/seed-sweep.md",
         f"{WORDS[n].capitalize()} seeds are the fewest that can say `above` ({n}/{n} is {interval(*wilson(n, n))}; "
         f"{n - 1}/{n - 1} is {interval(*wilson(n - 1, n - 1))}, not shown) or `below` (0/{n} is {interval(*wilson(0, n))}), "
         f"and only when every seed agrees: {n}/{n + 1} is {interval(*wilson(n, n + 1))}, not shown. With one seed "
         f"against, {WORDS[m]} are the fewest ({m - 1}/{m} is {interval(*wilson(m - 1, m))}).")
    says("tutorials/paper1.md", f"that needs {WORDS[n]} seeds or more ({n}/{n} gives {interval(*wilson(n, n))};")
    says("tutorials/paper1.md", f"three seeds even 3/3 has the [Wilson interval](../reference/glossary.md) "
                                f"{interval(*wilson(3, 3))}, which reaches below ½")
    says("explanation/paper1.md", f"With 5 seeds, 5/5 is {interval(*wilson(5, 5))} and 0/5 is {interval(*wilson(0, 5))}")
    says("tutorials/paper4.md", f"and 1/1 has the interval {interval(*wilson(1, 1))}: an illustration")
    says("tutorials/paper4.md", f"3/3 is still \"not shown\" against ½ (its interval starts at {wilson(3, 3)[0]:.2f})")


# --- paper 1 -----------------------------------------------------------------------------------------

REASONING = ["acc(rsn_test)>0.5", "similarity:distance_corr<-0.7", "pca:order_pc1(reasoning)>0.9",
             "theory:pearson_r>0.8", "theory:profile_r>0.7"]
ALIGN = "align:cos_top1(reasoning)>align:cos_top1(memory)"


def test_paper1_every_reasoning_effect_in_every_small_init_seed_and_the_memorizing_side_not():
    v = values("p1-seeds")
    says("explanation/paper1.md", "Every reasoning effect of the table shows in every seed at small init and in none "
                                  "at large init, except \\(W^V\\)'s alignment, where large init is mixed.")
    for outcome in REASONING:
        k, n = k_of(v["gamma=0.8"][outcome])
        assert k == n, outcome
        assert k_of(v["gamma=0.3"][outcome])[0] == 0, outcome
    assert k_of(v["gamma=0.8"][ALIGN])[0] == k_of(v["gamma=0.8"][ALIGN])[1]
    assert 0 < k_of(v["gamma=0.3"][ALIGN])[0] < k_of(v["gamma=0.3"][ALIGN])[1]          # "mixed"
    says("explanation/paper1.md", "The memorizing side does not show: the large init memorizes *less* than the small one")
    assert v["gamma=0.3"]["acc(mem)"]["mean"] < v["gamma=0.8"]["acc(mem)"]["mean"]


def test_paper1_the_cpu_repeat_has_the_same_fractions_but_for_the_alignment():
    gpu, cpu = values("p1-seeds"), values("p1-seeds-cpu")
    says("explanation/paper1.md", "give the same means within each other's intervals and the same fractions of "
                                  "seeds, except for \\(W^V\\)'s alignment")
    for cell in ("gamma=0.3", "gamma=0.8"):
        for outcome in REASONING:
            assert gpu[cell][outcome]["shown"] == cpu[cell][outcome]["shown"], (cell, outcome)
        for metric, g in gpu[cell].items():
            if "mean" in g and metric in cpu[cell] and g["ci95"][0] is not None:
                c = cpu[cell][metric]
                assert c["ci95"][0] <= g["ci95"][1] and g["ci95"][0] <= c["ci95"][1], (cell, metric)
    assert any(gpu[c][ALIGN]["shown"] != cpu[c][ALIGN]["shown"] for c in ("gamma=0.3", "gamma=0.8"))


def test_paper1_emb_mlp_direction_in_every_seed():
    v = values("emb-mlp-seeds")
    says("explanation/paper1.md", "The paper's direction in every seed: γ 0.3 memorizes")
    for cell, outcome in (("gamma=0.3", "acc(mem)>acc(rsn_test)"), ("gamma=0.8", "acc(rsn_test)>0.5")):
        k, n = k_of(v[cell][outcome])
        assert k == n and cell_verdict(v[cell][outcome]) == "above", (cell, outcome)
    assert k_of(v["gamma=0.3"]["acc(rsn_test)>0.5"])[0] == 0


def test_paper1_seed_sweep_cpu_repeat_has_the_gpus_fractions_and_means():
    """seed-sweep.md: "The output of step 2 above is the same sweep on a 2-core CPU: the same fractions,
    means equal to two or three digits" — the CPU sweep's results file against the GPU's, and the
    output shown in step 2 against the CPU's file."""
    says("tutorials/seed-sweep.md", "the same fractions, means equal to two or three digits")
    gpu, cpu = values("emb-mlp-seeds"), values("emb-mlp-seeds-cpu")
    for cell, entries in gpu.items():
        for name, g in entries.items():
            if "shown" in g:
                assert cpu[cell][name]["shown"] == g["shown"], (cell, name)
            else:
                assert abs(cpu[cell][name]["mean"] - g["mean"]) < 0.01, (cell, name)
    text = (DOCS / "tutorials/seed-sweep.md").read_text().split("## 2.")[1].split("## 3.")[0]
    rows = re.findall(r"^ *gamma=(0\.[38]) +(\S+) +(\d+) +([\d.]+) +[\d.]+ +\[", text, re.M)
    fracs = re.findall(r"^ *gamma=(0\.[38]) +(\S+) +(\d+/\d+) ", text, re.M)
    assert len(rows) == 4 and len(fracs) == 4
    name = lambda m: m.replace("[", "(").replace("]", ")")   # noqa: E731 (the results files' spelling)
    for gamma, metric, _, mean in rows:
        assert float(mean) == round(cpu[f"gamma={gamma}"][name(metric)]["mean"], 4)
    for gamma, outcome, shown in fracs:
        assert cpu[f"gamma={gamma}"][name(outcome)]["shown"] == shown


def test_paper1_language_template_stories_reversed_from_step_200():
    v = values("language-corpora")["p1"]["synthetic"]
    says("explanation/paper1.md", "**On the template stories it is reversed** from step 200 on")
    for step, entry in v["by_step"].items():
        if int(step) >= 200:
            assert entry["diff"]["verdict"] == "reversed", step
    loss = v["loss"]
    says("explanation/paper1.md", "small init fits the templates so well that their loss ends *below* the logic loss")
    assert loss["g0.8"]["story"]["mean"] < loss["g0.8"]["logic"]["mean"]
    assert loss["g0.3"]["story"]["mean"] > loss["g0.3"]["logic"]["mean"]      # "far from fitting them"


def test_cka_every_small_init_pair_above_every_large_init_pair():
    v = json.loads((DOCS / "results/cka-seeds.json").read_text())["results"]["last (step 3000)"]["range"]
    says("explanation/paper1.md", "Small-init runs end up more alike: every γ 0.8 pair")
    assert v["0.8"][0] > v["0.3"][1]


# --- paper 2 -----------------------------------------------------------------------------------------

def test_paper2_cells_with_inferential_answers_in_more_than_one_seed():
    cells = {(setting, cell) for setting, by_cell in values("p2-map").items() if isinstance(by_cell, dict)
             for cell, entry in by_cell.items() if isinstance(entry, dict) and "inf>0.5" in entry
             and k_of(entry["inf>0.5"])[0] > 1}
    sentence = re.search(r"Inferential answers above 0\.5 in more than one seed come only with (.*?)either way\.",
                         page("explanation/paper2.md"))
    assert sentence, "paper2.md no longer lists the cells with inferential answers in more than one seed"
    named = set(re.findall(r"\[\[p2-map:(\w+)/(gamma=[\d.]+)/inf>0\.5\|frac\]\]", sentence.group(1)))
    assert named == cells
    assert {setting for setting, _ in cells} == {"wd"} and "weight decay 0.01" in sentence.group(1)
    assert all(cell_verdict(values("p2-map")[s][c]["inf>0.5"]) == "not shown" for s, c in cells)


def test_paper2_the_cpu_table_and_the_gpu_map_one_seed_apart_at_most():
    cpu, gpu = values("p2-seeds"), values("p2-map")["base"]
    says("explanation/paper2.md", "differs by at most one seed per cell")
    says("explanation/paper2.md", "of the GPU's: one seed apart at γ 0.8, the same at γ 0.3 and 0.5.")
    apart = {}
    for g in ("0.3", "0.5", "0.8"):
        a = k_of(cpu[f"layers=2,gamma={g}"]["acc(ood_inferential)>acc(ood_symmetric)"])
        b = k_of(gpu[f"gamma={g}"]["inf>sym"])
        assert a[1] == b[1]
        apart[g] = abs(a[0] - b[0])
    assert apart == {"0.3": 0, "0.5": 0, "0.8": 1}


def test_paper2_the_five_seed_table_reads_as_the_page_says():
    v = values("p2-seeds")
    out = "acc(ood_inferential)>acc(ood_symmetric)"
    says("explanation/paper2.md", "So at 2 layers both ends are symmetric in every seed")
    assert all(k_of(v[f"layers=2,gamma={g}"][out])[0] == 0 for g in ("0.3", "0.8"))
    says("explanation/paper2.md", "At 3 layers no cell clears 1/2 either way (γ 0.5 comes closest to inferential)")
    three = {g: v[f"layers=3,gamma={g}"][out] for g in ("0.3", "0.5", "0.8")}
    assert all(cell_verdict(e) == "not shown" for e in three.values())
    assert max(three, key=lambda g: three[g]["fraction"] if "fraction" in three[g] else k_of(three[g])[0]) == "0.5"
    says("explanation/paper2.md", "Every run fits `train`")
    assert all(c["acc(train)"]["mean"] > 0.995 for c in v.values())


# --- paper 4 -----------------------------------------------------------------------------------------

def test_paper4_eps_saturation_costs_only_at_large_gamma():
    c = values("p4-table")["cells"]
    says("explanation/paper4.md", "γ 0.5 and 0.75 the two ε end within 0.003 of each other in every loss of the table")
    for g in ("0.5", "0.75"):
        for loss in ("val", "logic", "story"):
            assert abs(c[f"g{g}-eps1e-05-plain"][loss]["mean"] - c[f"g{g}-eps1e-12-plain"][loss]["mean"]) < 0.003
    says("explanation/paper4.md", "ε-1e-5 runs end with a higher logic loss")
    for g in ("1", "1.25"):
        for loss in ("val", "logic"):
            assert c[f"g{g}-eps1e-05-plain"][loss]["mean"] > c[f"g{g}-eps1e-12-plain"][loss]["mean"] + 0.003


def test_paper4_condensation_shown_with_its_numbers_and_no_rebound_claimed():
    c = values("p4-table")["cells"]
    says("explanation/paper4.md", "**(b) Condense: shown, deeper the smaller the init; then expand: not measured here.**")
    assert all(max(cell["dip"]["values"]) < 1 for cell in c.values())          # "below its start in every cell"
    dips = [c[f"g{g}-eps1e-05-plain"]["dip"]["ci95"] for g in ("0.5", "0.75", "1", "1.25")]
    says("explanation/paper4.md", "each interval below the one before")
    assert all(later[1] < earlier[0] for earlier, later in zip(dips, dips[1:]))
    assert not any("rebound" in cell for cell in c.values())                   # "the table holds no rebound"


def test_paper4_critical_gamma_spikes_and_sinks():
    v = values("p4-table")
    c = v["cells"]
    val = {g: c[f"g{g}-eps1e-05-plain"]["val"]["mean"] for g in ("0.5", "0.75", "1", "1.25")}
    assert min(val, key=val.get) == str(v["critical"]["eps1e-05-plain"]["gamma"])
    says("explanation/paper4.md", "and the final losses rise again")
    assert val["0.75"] < val["1"] < val["1.25"]
    says("explanation/paper4.md", "No run had a loss spike")
    assert all(x == 0 for cell in c.values() for x in cell["spikes"]["values"])
    says("explanation/paper4.md", "below causal averaging's")
    assert all(cell["sink"]["mean"] < cell["uniform_mass"]["mean"] for cell in c.values())
    sinks = [cell["sink"]["mean"] for cell in c.values() if "gated" not in str(cell)]
    assert max(cell["sink_head_max"]["max"] for cell in c.values()) == c["g1-eps1e-12-plain"]["sink_head_max"]["max"] < 0.3
    assert min(sinks) >= c["g0.5-eps1e-05-plain"]["sink"]["mean"] - 1e-12
    says("explanation/paper4.md", "the quartile the context helps most gets slightly worse")
    assert v["pairs"]["g0.75-eps1e-12-plain"]["top_context_share"]["ci95"][1] < 0
    for bucket in ("frequency", "bigram", "entropy"):
        assert v["pairs"]["g0.75-eps1e-12-plain"]["hardest"][bucket]["ci95"][0] > 0.25, bucket


@pytest.mark.parametrize("corpus", ["kjv", "synthetic"])
def test_paper4_logic_over_story_reversed_on_both_corpora(corpus):
    v = values("language-corpora")["p4"][corpus]
    says("explanation/paper4.md", "**The gain lands on the stories, not on the logic, on both corpora**")
    assert v["gain"]["diff"]["verdict"] == "reversed"
    says("explanation/paper4.md", "**γ 0.75 is the critical γ on both corpora**")
    loss = {g: v["val_loss"][g]["mean"] for g in ("g0.5", "g0.75", "g1.0")}
    assert min(loss, key=loss.get) == "g0.75"


# --- words a reader can follow -------------------------------------------------------------------

def _pages() -> list[Path]:
    return [DOCS.parent / "README.md", DOCS.parent / "bench" / "RESULTS.md",
            *(p for p in DOCS.rglob("*.md") if "results" not in p.parts)]


def test_no_page_points_into_the_projects_issue_tracker():
    """"issue 38" means nothing to a reader of the site (bench/RESULTS.md: its goals go into a page)."""
    for p in _pages():
        text = p.read_text()
        if p.name == "RESULTS.md":
            text = text.split("[start:goals]")[1].split("[end:goals]")[0]
        assert not re.search(r"\bissues? \d+", text), f"{p}: {re.search(r'.{0,40}issues? [0-9]+', text).group()}"


def test_no_page_needs_an_emoji_font():
    """A glyph from the emoji and pictograph blocks draws as an empty box where no emoji font is installed
    (the clock once in front of every slow block's title)."""
    emoji = re.compile("[\u2300-\u23ff\u2600-\u27bf\U0001f000-\U0001ffff]")
    for p in _pages():
        found = emoji.search(p.read_text())
        assert not found, f"{p}: {found.group()!r}"


def test_paper_4_is_cited_with_its_authors():
    says("reference/papers.md", "Liangkai Hang, Junjie Yao, Zhiyu Li, Feiyu Xiong, Hongkang Yang, Zhi-Qin John Xu. "
                                "*Small Initialization Matters for Large Language Models.*")


# a term a tutorial uses in a sense of its own -> the glossary entry that defines it
TERMS = {"effective rank": "effective rank", "escape step": "escape step, plateau", "plateau": "escape step, plateau",
         "ln V": "escape step, plateau", "nats": "nats", "PrOntoQA": "PrOntoQA-style logic",
         "sink mass": "sink (attention sink), sink mass", "not shown": "not shown", "Wilson": "interval (95 %)",
         "ε share": "ε-saturation", "condensation": "condensation"}


def _paragraphs(path: Path) -> list[str]:
    """The page's prose, a paragraph each (fenced blocks left out: an output is not where a word is taught)."""
    prose = re.sub(r"^(`{3,}).*?^\1\s*$", "", path.read_text(), flags=re.S | re.M)
    return [re.sub(r"\s+", " ", p) for p in re.split(r"\n\s*\n", prose)]


@pytest.mark.parametrize("tutorial", sorted(p.name for p in (DOCS / "tutorials").glob("*.md")))
def test_a_tutorial_links_each_term_to_its_definition_where_it_first_uses_it(tutorial):
    glossary = page("reference/glossary.md")
    for term, entry in TERMS.items():
        assert f"**{entry}** —" in glossary, f"the glossary defines no {entry!r}"
        first = next((p for p in _paragraphs(DOCS / "tutorials" / tutorial) if re.search(rf"\b{term}\b", p)), None)
        assert first is None or "glossary.md" in first or "notation.md" in first, \
            f"{tutorial}: first use of {term!r} without a link to its definition: {first[:200]}"


def test_figures_cpu_repeat_of_the_language_figures_matches_the_gpus_to_three_digits():
    cpu, gpu = values("figures-language-cpu"), values("figures-language")["kjv"]
    says("figures.md", "gives the GPU's values for the same seeds to three significant digits, every value of every claim")
    for fig, claims in cpu.items():
        for i, claim in enumerate(claims):
            n = len(claim["values"])
            assert [f"{x:.3g}" for x in claim["values"]] == [f"{x:.3g}" for x in gpu[fig][i]["values"][:n]], (fig, i)
    says("figures.md", "shows every expected claim in every seed")
    for fig in ("p1-language", "p4-critical", "p4-tokens"):
        k, n = k_of(cpu[fig][1])
        assert k == n, fig


def test_no_docs_table_is_too_wide_to_read_whole():
    """A table of 13 columns was cut off at 1200 px (its scroll box hides the last columns); ten short
    columns fit a laptop's text column."""
    for p in _pages():
        for line in p.read_text().splitlines():
            if re.fullmatch(r"\|(-+\|)+", line.strip()):
                assert line.count("|") - 1 <= 10, f"{p}: a table of {line.count('|') - 1} columns"
