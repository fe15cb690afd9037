"""MkDocs hooks: measured numbers inserted from their result files, and formulas as MathML.

Numbers. A number the docs quote from a measurement is never typed into a page: the page names it,
``[[demo:g0.8/acc/rsn_test|.2f]]``, and the build inserts the value at that key of
``docs/results/demo.json`` (formatted with ``.2f``), a file the measuring command wrote (``"values"``)
with what it was measured on (``"meta"``: command, date, machine, commit, seeds). ``[[demo:@meta]]``
inserts that provenance as a sentence. Two pages quoting one measurement can then never disagree, and a
name with no value in its file stops the build (tests/test_docs.py).

Formulas. Every formula becomes MathML when the site is built, so the pages show it without network (a
math library from a CDN would leave raw LaTeX offline) and without JavaScript; browsers draw MathML
themselves (Chromium since 109, Firefox, Safari).
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

RESULTS = Path(__file__).resolve().parent / "results"
_NUMBER = re.compile(r"\[\[([\w-]+):([^\]|]+)(?:\|([^\]]*))?\]\]")

# pymdownx.arithmatex (generic mode) wraps inline math as <span class="arithmatex">\(..\)</span> and
# display math as <div class="arithmatex">\[..\]</div>, the TeX HTML-escaped.
# The wrapper stays: docs/stylesheets/extra.css lets a wide display formula scroll inside it.
_MATH = re.compile(r'(<(span|div) class="arithmatex">)\\[(\[](.*?)\\[)\]](</\2>)', re.S)


def provenance(meta: dict, link: str) -> str:
    """Who, when, where and which commit, in one clause; ``link`` is the results file itself (on the site:
    the measuring command and every value), so a page need not spell out a long command."""
    seeds, machine = meta["seeds"], meta["machine"]
    if isinstance(machine, dict):
        machine = f"{machine['cores']} cores ({machine['cpu']})"
    who = f"one seed (seed {seeds[0]})" if len(seeds) == 1 else f"{len(seeds)} seeds ({', '.join(map(str, seeds))})"
    text = f"{who}, measured {meta['date'][:10]} on {machine}, {code(meta)} ([the command and every value]({link}))"
    if len(seeds) == 1:
        text += "; one seed's numbers vary from machine to machine"
    return text


def code(meta: dict) -> str:
    """Which code made the numbers: the commit(s) and device(s) the run files recorded, and the commit
    that wrote the table where it differs; in files from before runs recorded them, the commit given to
    the script as the runs' (``--commit``) or else the one that wrote the table, said as such."""
    table = meta["commit"][:7]
    ran = meta.get("trained") or {}
    if isinstance(ran, int):   # a measuring command that trained its runs itself (bench/cka_seeds.py)
        return f"runs trained and measured by the command at commit {table}"
    if ran.get("commits"):
        commits = ", ".join(c[:7] + ("-dirty" if c.endswith("-dirty") else "") for c in ran["commits"])
        text = f"runs trained at commit {commits}" + (f" on {', '.join(ran['devices'])}" if ran.get("devices") else "")
        return text + ("" if all(c.startswith(table) for c in ran["commits"]) else f", table written at commit {table}")
    if "--commit" in meta.get("command", ""):
        return f"runs trained at commit {table}"
    return f"table written at commit {table} (its runs' commit not recorded)"


def minus(text: str) -> str:
    return text.replace("-", "\u2212")   # the pages' minus sign, not a hyphen


def number(name: str, key: str, fmt: str | None, root: str = "") -> str:
    """The value at ``key`` (``a/b/c``; a list index is a number) of ``docs/results/NAME.json``, formatted:
    under the file's ``values`` if it has them (its ``meta`` as ``meta/...``), else from its top. Format
    ``ci`` (``ci.3f``) writes a ``{"mean", "ci95"}`` entry as ``mean [low, high]``; ``frac`` a
    ``{"shown", "ci95"}`` entry (seeds with an outcome) as ``k/n [low, high]``; ``each`` (``each.3g``) a list of
    numbers, comma-separated; ``cell`` a text for a table cell (pipes escaped)."""
    data = json.loads((RESULTS / f"{name}.json").read_text())
    meta = data.get("meta", data)
    if key == "@meta":   # root: the way from the page to the site's top, where results/ is copied
        return provenance(meta, f"{root}results/{name}.json")
    node = meta if key.startswith("meta/") else data.get("values", data)
    for part in key.removeprefix("meta/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    if fmt == "frac":   # an outcome of examples/seed_table.py: k/n of the seeds with its Wilson interval
        lo, hi = node["ci95"]
        return f"{node['shown']} [{lo:.2f}, {hi:.2f}]"
    if fmt == "cell":   # text for a Markdown table cell: its pipes escaped
        return str(node).replace("|", "\\|")
    if fmt and fmt.startswith("each"):   # a list of numbers, e.g. one per seed: "0.625, 0.66, 0.641"
        return minus(", ".join("-" if v is None else format(v, fmt[4:]) for v in node))
    if fmt and fmt.startswith("ci"):
        f = fmt[2:] or ".3f"
        lo, hi = node["ci95"]
        return minus(f"{format(node['mean'], f)} [{format(lo, f)}, {format(hi, f)}]")
    if isinstance(node, (dict, list)):
        raise KeyError(f"{key} is not one number")
    text = format(node, fmt or "")
    return minus(text) if isinstance(node, (int, float)) else text


def on_page_markdown(markdown: str, page, **_) -> str:
    def insert(match: re.Match) -> str:
        try:
            return number(*match.groups(), root="../" * page.file.src_path.replace("\\", "/").count("/"))
        except (OSError, KeyError, TypeError, ValueError) as e:
            raise PluginError(f"{page.file.src_path}: {match.group(0)} has no source ({type(e).__name__}: {e})")

    return _NUMBER.sub(insert, markdown)


def mathml(match: re.Match) -> str:
    tex = html.unescape(match.group(3))
    display = "block" if match.group(2) == "div" else "inline"
    return match.group(1) + convert(tex, display=display) + match.group(4)


def on_page_content(content: str, **_) -> str:
    return _MATH.sub(mathml, content)
