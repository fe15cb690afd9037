"""The documentation runs as written: every bash and python block of the README and of every page of the
site, in the order of mkdocs.yml's nav, each page in a scratch folder of its own (tests/docpages.py says
what a page can state and how it is checked). The suite runs each page up to its first block titled "Takes ..."
(minutes) or GPU; the slow set runs the whole page: ``pytest -m slow tests/test_docs.py``."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from mkdocs.exceptions import PluginError

import docpages
from docpages import ROOT, blocks, check_output, commands, gpu_blocks, is_slow, kjv_blocks, kjv_here, nav_pages, run_page

PAGES = nav_pages()


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch build with CUDA: no GPU
        return False


def _id(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_page_runs_as_written(page: Path, tmp_path):
    """Each page up to its first block that takes minutes or a GPU."""
    failures = run_page(page, tmp_path)
    assert not failures, failures[0]
    if kjv_blocks(page) and not kjv_here():
        pytest.skip(f"ran all but the King James blocks ({', '.join(b.where for b in kjv_blocks(page))}): "
                    "apt-get install bible-kjv-text bible-kjv")


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if is_slow(p)], ids=_id)
def test_whole_page_runs_as_written(page: Path, tmp_path):
    """Each page with blocks that take minutes, whole; GPU blocks where CUDA is present."""
    gpu = _cuda()
    failures = run_page(page, tmp_path, whole=True, gpu=gpu)
    assert not failures, failures[0]
    if gpu_blocks(page) and not gpu:
        pytest.skip(f"ran all but the GPU blocks ({', '.join(b.where for b in gpu_blocks(page))}): no CUDA here")


def _not_run():
    for p in PAGES:
        for b in blocks(p):
            if b.lang in ("bash", "python") and not b.runs:
                yield pytest.param(b, id=b.where)


@pytest.mark.parametrize("block", list(_not_run()))
def test_blocks_shown_but_not_run_say_why(block):
    """Nothing is left out silently: each block not run is listed here, as a skip with its reason, and
    the reason is on the page (a title or a not-run comment)."""
    why = block.not_run or block.title
    assert why.strip(), f"{block.where}: a block that is not run must say why"
    pytest.skip(f"shown, not run: {why}")


def test_every_output_block_follows_the_block_that_prints_it():
    # a text block not right after a command block is shown to the reader but checked against nothing
    # (a files comment goes after the output, not between)
    loose = [b.where for p in PAGES if p.name != "cli.md" for b in blocks(p) if b.lang == "text"]
    assert not loose, f"text blocks that are no block's output: {loose}"


def test_every_page_that_cites_a_paper_links_it():
    # the papers are cited by number ("paper 1"); a reader needs the title, the authors and the arXiv
    # link one click away (docs/reference/papers.md)
    unlinked = []
    for p in PAGES:
        text = p.read_text()
        prose = re.sub(r"`[^`]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
        if re.search(r"\b[Pp]aper [124]\b|arXiv", prose) and not re.search(r"papers\.md|arxiv\.org/abs/", text):
            unlinked.append(str(p.relative_to(ROOT)))
    assert not unlinked, f"pages that cite a paper without linking it: {unlinked}"


def test_every_page_is_in_the_nav_and_every_nav_page_exists():
    listed = {p.resolve() for p in PAGES[1:]}
    for p in listed:
        assert p.exists(), f"mkdocs.yml lists {p.relative_to(ROOT)}, which does not exist"
    on_disk = {p.resolve() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk <= listed, f"pages not in mkdocs.yml's nav: {sorted(str(p) for p in on_disk - listed)}"


def test_readme_is_short():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= 150, f"README.md has {n} lines; the details belong in docs/"


def test_generated_reference_pages_are_current():
    p = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr + "\n(regenerate: python docs/generate.py)"


def test_site_builds_strictly(tmp_path):
    # not --quiet: it drops the warnings before --strict counts them (a broken link would pass)
    mkdocs = Path(sys.executable).parent / "mkdocs"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    p = subprocess.run([str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    assert "WARNING" not in p.stderr, p.stderr[-5000:]
    assert (tmp_path / "site" / "index.html").exists()
    # Formulas are MathML from the build (docs/hooks.py), not TeX for a script from a CDN: offline, a
    # page would show raw LaTeX.
    pages = {q: q.read_text() for q in (tmp_path / "site").rglob("*.html")}
    assert "<math" in pages[tmp_path / "site" / "how-to" / "probes" / "index.html"]
    for q, text in pages.items():
        assert not re.search(r'class="arithmatex">\\[(\[]', text), f"raw TeX left in {q}"
        assert not re.search(r'<script[^>]+src="https?://', text), f"{q} loads a script from the network"


def test_a_strict_build_stops_at_a_broken_link(tmp_path):
    """What makes test_site_builds_strictly able to fail: a page with a broken link stops the build."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "docs" / "index.md").write_text((copy / "docs" / "index.md").read_text() + "\nsee [this](nowhere.md)\n")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    p = subprocess.run([str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")], cwd=copy,
                       capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert p.returncode != 0 and "nowhere.md" in p.stderr


def test_no_measured_seed_count_or_interval_is_typed_into_a_page():
    """A page's prose quotes seed counts ("3/5 seeds") and intervals ("[0.31, 0.54]") through the hook
    ([[file:key]], from a results file), never typed; a typed interval may only be a Wilson interval of
    some k/n (arithmetic, not a measurement: "5/5 is [0.57, 1.00]"). The README, which no hook builds,
    has its own check (tests/test_readme.py)."""
    from probe.analyses.uncertainty import wilson

    facts = {f"[{lo:.{d}f}, {hi:.{d}f}]" for n in range(1, 11) for k in range(n + 1) for d in (2, 3)
             for lo, hi in [wilson(k, n)]}
    typed = []
    for page in PAGES:
        if page.name == "README.md":
            continue
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)             # commands and outputs
        text = re.sub(r"\[\[[^\]]*\]\]|<!--.*?-->|`[^`\n]*`", "", text, flags=re.S)   # inserted, comments, code
        typed += [f"{_id(page)}: {m}" for m in re.findall(r"\b\d+/\d+ seeds?\b", text)]
        typed += [f"{_id(page)}: {m}" for m in re.findall(r"\[[−-]?\d+\.\d+, [−-]?\d+\.\d+\]", text)
                  if m.replace("−", "-") not in facts]
    assert not typed, f"typed into a page instead of inserted from a results file: {typed}"


def test_a_quoted_number_comes_from_its_result_file_or_stops_the_build():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = types.SimpleNamespace(file=types.SimpleNamespace(src_path="page.md"))
    demo = json.loads((ROOT / "docs" / "results" / "demo.json").read_text())
    text = hooks.on_page_markdown("acc [[demo:g0.8/acc/rsn_test|.3f]], [[demo:@meta]].", page=page)
    assert text.startswith(f"acc {demo['values']['g0.8']['acc']['rsn_test']:.3f}, one seed (seed 0), measured ")
    assert demo["meta"]["commit"] in text and demo["meta"]["machine"] in text and "vary from machine" in text
    # the provenance links the results file itself (the site copies docs/results/), relative to the page
    assert "[the command and every value](results/demo.json)" in text
    deeper = types.SimpleNamespace(file=types.SimpleNamespace(src_path="tutorials/page.md"))
    assert "](../results/demo.json)" in hooks.on_page_markdown("[[demo:@meta]]", page=deeper)
    cka = json.loads((ROOT / "docs" / "results" / "cka-seeds.json").read_text())["results"]["last (step 3000)"]
    lo, hi = cka["diff_small_minus_large"]["ci95"]
    text = hooks.on_page_markdown("[[cka-seeds:results/last (step 3000)/diff_small_minus_large|ci+.2f]]", page=page)
    assert text == f"{cka['diff_small_minus_large']['mean']:+.2f} [{lo:+.2f}, {hi:+.2f}]".replace("-", "\u2212")
    seeds = json.loads((ROOT / "docs" / "results" / "p1-seeds.json").read_text())["values"]["gamma=0.8"]
    shown = seeds["acc(rsn_test)>0.5"]
    text = hooks.on_page_markdown("[[p1-seeds:gamma=0.8/acc(rsn_test)>0.5|frac]]", page=page)
    assert text == f"{shown['shown']} [{shown['ci95'][0]:.2f}, {shown['ci95'][1]:.2f}]"
    claims = json.loads((ROOT / "docs" / "results" / "figures-quick.json").read_text())["values"]["p1-cosine"][0]
    text = hooks.on_page_markdown("[[figures-quick:p1-cosine/0/values|each.3g]]", page=page)
    assert text == ", ".join(f"{v:.3g}" for v in claims["values"]).replace("-", "\u2212")
    text = hooks.on_page_markdown("| [[figures-quick:p1-cosine/0/claim|cell]] |", page=page)
    assert "|" in claims["claim"] and text == f"| {claims['claim'].replace('|', chr(92) + '|')} |"
    for missing in ("[[demo:g0.8/acc/nothing]]", "[[demo:g0.8/acc]]", "[[no-such-file:x]]"):
        with pytest.raises(PluginError, match=r"page\.md: .* has no source"):
            hooks.on_page_markdown(f"a {missing} b", page=page)


# --- the runner itself can fail ------------------------------------------------------------------

@pytest.fixture
def scratch_page(tmp_path):
    made = iter(range(100))

    def make(text):
        page = tmp_path / f"page{next(made)}.md"
        page.write_text(text)
        return page

    return make


def test_runner_reports_a_failing_command(scratch_page, tmp_path):
    page = scratch_page("```bash\necho one\nfalse\necho never\n```\n")
    (tmp_path / "w").mkdir()
    failures = run_page(page, tmp_path / "w")
    assert failures and "`false` exited 1" in failures[0]


def test_runner_checks_output_names_and_lets_numbers_vary(scratch_page, tmp_path):
    ok = scratch_page("```bash\nprintf 'step  rho\\n1000  -0.93\\n'\n```\n\n```text\nstep  rho\n1000  -0.89\n```\n")
    (tmp_path / "a").mkdir()
    assert run_page(ok, tmp_path / "a") == []
    bad = scratch_page("```bash\nprintf 'step  tau\\n1000  -0.93\\n'\n```\n\n```text\nstep  rho\n1000  -0.89\n```\n")
    (tmp_path / "b").mkdir()
    assert "output differs" in run_page(bad, tmp_path / "b")[0]


def test_runner_holds_an_exact_output_to_its_numbers(scratch_page, tmp_path):
    shown = "```bash\nprintf 'rho -0.93\\n'\n```\n\n```text\nrho {}\n```\n<!-- exact -->\n"
    (tmp_path / "a").mkdir()
    assert run_page(scratch_page(shown.format("-0.93")), tmp_path / "a") == []
    (tmp_path / "b").mkdir()
    assert "output differs" in run_page(scratch_page(shown.format("-0.89")), tmp_path / "b")[0]


def test_runner_refuses_an_example_that_overwrites_an_earlier_output(scratch_page, tmp_path):
    page = scratch_page("```bash\necho a > out.txt\n```\n\n```bash\necho b > out.txt\n```\n")
    (tmp_path / "w").mkdir()
    assert "rewrote ['out.txt']" in run_page(page, tmp_path / "w")[0]


def test_regenerate_writes_what_python_blocks_print_and_leaves_bash_outputs(scratch_page, tmp_path):
    """A Python output on a page is regenerated (``python tests/docpages.py PAGE``), never typed: after
    a change of a repr, the page shows what the code prints now."""
    page = scratch_page("```bash\necho 'a 1'\necho 'b 2'\n```\n\n```text\na 1\n...\n```\n\n"
                        "```python\nprint('CellSummary(x: 5 runs)')\nprint(6 * 7)\n```\n\n```text\nCell(x)\n41\n```\n\ntext\n")
    (tmp_path / "w").mkdir()
    assert docpages.regenerate(page, tmp_path / "w") == [11]   # the python block's first line
    assert page.read_text() == ("```bash\necho 'a 1'\necho 'b 2'\n```\n\n```text\na 1\n...\n```\n\n"
                                "```python\nprint('CellSummary(x: 5 runs)')\nprint(6 * 7)\n```\n\n"
                                "```text\nCellSummary(x: 5 runs)\n42\n```\n\ntext\n")
    (tmp_path / "v").mkdir()
    assert run_page(page, tmp_path / "v") == []


def test_runner_keeps_python_state_across_blocks_and_checks_files(scratch_page, tmp_path):
    page = scratch_page("```python\nx = 41\n```\n\n```python\nprint(x + 1)\nopen('made.txt', 'w').write('x')\n```\n"
                        "\n```text\n42\n```\n<!-- files: made.txt missing.txt -->\n")
    (tmp_path / "w").mkdir()
    assert "['missing.txt']" in run_page(page, tmp_path / "w")[0]


def test_output_pattern_and_commands():
    assert check_output("a 1\n...\nz 2\n", "head\na 5\nb\nc\nz 7.5e-3\n")
    assert not check_output("a 1\nz 2\n", "a 1\nb\nz 2\n")
    assert commands("# c\nprobe a \\\n  --b 1\n\nprobe c\n") == ["probe a \\\n  --b 1", "probe c"]
    assert docpages.is_slow(ROOT / "docs" / "tutorials" / "paper1.md")


@pytest.mark.slow
def test_readme_first_command_in_a_clean_clone(tmp_path):
    """The README's first set-up command, as written, in a clean clone of HEAD: install, then the demo
    (CI runs the second). Needs the package registry; minutes."""
    first = (ROOT / "README.md").read_text().split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()[0]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    p = subprocess.run(["bash", "-c", "set -eo pipefail\n" + first], cwd=clone, capture_output=True, text=True,
                       timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "[ok] rsn_test accuracy" in p.stdout and (clone / "demo-out" / "report.html").exists()
    assert check_output("file       ...\nformat     safetensors, step -\n", "file       /a/b/model\nformat     safetensors, step -\n")
    assert not check_output("file       ...\nformat     pt\n", "file       /a\nformat     safetensors\n")


def test_the_api_page_documents_every_probe_and_its_result():
    import re

    from probe import registry

    page = (ROOT / "docs" / "reference" / "api.md").read_text()
    shown = set(re.findall(r"^::: ([\w.]+)$", page, re.M))
    for spec in registry.probes():
        assert any(s.endswith(f".{spec.name}") and s.startswith("probe.probes.") for s in shown), \
            f"docs/reference/api.md has no ::: probe.probes.*.{spec.name}"
        assert f"probe.analyses.{spec.result}" in shown, f"docs/reference/api.md has no ::: probe.analyses.{spec.result}"


def test_the_environment_page_lists_every_variable_the_toolkit_reads():
    """probe/environment.py reads every PROBE_* variable (no other module names one), and
    docs/reference/environment.md's first table lists exactly those."""
    import ast
    import re

    from probe import environment

    declared = {v for k, v in vars(environment).items() if k.isupper() and isinstance(v, str)}
    page = (ROOT / "docs" / "reference" / "environment.md").read_text()
    first_table = page.split("\n\n")[2]
    assert set(re.findall(r"^\| `(PROBE_\w+)` \|", first_table, re.M)) == declared
    elsewhere = []
    for folder in ("probe", "train"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            if p.name == "environment.py" and p.parent.name == "probe":
                continue
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        re.fullmatch(r"PROBE_[A-Z_]+", node.value):
                    elsewhere.append(f"{p.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert elsewhere == []


def test_the_dask_example_runs_as_a_script(tiny_run, tmp_path):
    """The batch page's LocalCluster example, saved as a file and run with ``python``, as a reader would:
    its worker processes import the script again (without the ``__main__`` guard: 'Nanny failed to
    start'). The page's runner executes blocks in one process, where that cannot show."""
    import shutil

    block = next(b for b in blocks(ROOT / "docs/how-to/batch.md") if b.lang == "python" and "LocalCluster" in b.body)
    (tmp_path / "runs").mkdir()
    shutil.copy(tiny_run, tmp_path / "runs" / "tiny.h5")
    (tmp_path / "cluster_example.py").write_text(block.body)
    env = {**os.environ, "PATH": f"{docpages.BIN}{os.pathsep}{os.environ['PATH']}"}
    res = subprocess.run([sys.executable, "cluster_example.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert check_output(block.output, res.stdout), res.stdout
