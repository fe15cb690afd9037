"""Hostile text: what a run file, a checkpoint folder or a file name says is shown, never obeyed.

Part 1, the run report: a run whose config keys and values, task fields, group names, split names,
token texts (``run/vocab/strings``) and file name hold ``<script>``, ``</script>``, quotes, ``&``,
``<!--``, U+2028/U+2029 and an ``onerror=`` attribute, a Trainer checkpoint series whose
``config.json`` and ``trainer_state.json`` hold them, a hub revision (offline cache) named with
them, and a missing run named with one. Each
(section, payload) case asserts that the payload reads back as the same text in its section of the
parsed page (so it was escaped, not dropped), and that no input changed; the page as a whole has no
element or attribute the report did not write, its SVG charts are well-formed XML, and Chromium
runs no script of theirs.

Part 2, names that are not UTF-8 (``run-\\xff.h5``, made from bytes) under four locales, through real
processes: every command prints them as ``\\xff`` (tables, CSV, JSON that strict parsers take, error
and warning lines, plot file names, batch tables and the report page), exits as it should, writes
output valid in the locale's encoding, and changes no input.
"""
from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import h5py
import numpy as np
import pytest

from conftest import run_cli

# --- part 1: hostile strings in the run report -------------------------------------------------------

PAYLOADS = {
    "script": "<script>window.pwned='script'</script>",
    "close": "</script><script>window.pwned='close'</script>",
    "quotes": "'\"><img src=x onerror=window.pwned='quotes'>",
    "amp": "&amp; &lt;b&gt; &#60;i&#62; & AT&T",
    "comment": "<!-- <script>window.pwned='comment'</script> -->",
    "u2028": "line\u2028sep\u2029para",
    "onerror": "<img src=x onerror=\"document.title='pwned'\">",
}
NO_SLASH = [k for k, v in PAYLOADS.items() if "/" not in v]   # what an HDF5 or file name can hold
MISSING = "missing " + PAYLOADS["close"] + ".h5"                # a run that does not exist
REVISION = PAYLOADS["onerror"] + PAYLOADS["quotes"]              # a hub revision (a file name in the cache)
TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "p", "span", "b", "nav", "a", "section",
        "h2", "div", "h3", "button", "table", "thead", "tbody", "tr", "th", "td", "figure", "img", "figcaption",
        "label", "input", "output", "script", "details", "summary",
        "svg", "g", "text", "rect", "line", "polyline", "circle", "image"}   # the charts: inline SVG
ATTRS = {"lang", "charset", "name", "content", "class", "title", "id", "href", "style", "data-name", "data-step",
         "alt", "src", "download", "type", "min", "max", "value", "data-i",
         "xmlns", "width", "height", "viewbox", "font-family", "font-size", "font-weight", "text-anchor", "x", "y",
         "x1", "x2", "y1", "y2", "cx", "cy", "r", "fill", "fill-opacity", "stroke", "stroke-width",
         "stroke-dasharray", "points", "transform", "preserveaspectratio"}


def _digest(folder) -> dict:
    out = {}
    for root, dirs, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = hashlib.sha256(fh.read()).hexdigest()
        out.update({os.path.relpath(os.path.join(root, d), folder) + "/": "dir" for d in dirs})
    return out


def _hostile_run(src, out) -> None:
    """``src`` copied to ``out`` with every payload in its config (keys, values, ``steps``), task
    fields, group names, a split (with metrics) and token texts."""
    shutil.copy(src, out)
    with h5py.File(out, "a") as f:
        cfg = json.loads(f.attrs["config"])
        cfg.update({v: v for v in PAYLOADS.values()})
        cfg["steps"] = PAYLOADS["script"]               # the value the report once wrote unescaped
        f.attrs["config"] = json.dumps(cfg)
        task = json.loads(f.attrs["task"])
        task.update({f"note {v}": v for v in PAYLOADS.values()})
        for k in NO_SLASH:   # with a checksum, as the trainer writes every dataset (schema 1.4)
            f["run/token_groups"].create_dataset(PAYLOADS[k], data=np.arange(1, 11), fletcher32=True)
        task["token_groups"] = list(task["token_groups"]) + [PAYLOADS[k] for k in NO_SLASH]
        split = PAYLOADS["quotes"]
        for metric, ds in f["snapshots/metrics/mem"].items():
            f.copy(ds, f"snapshots/metrics/{split}/{metric}")
        task["splits"] = list(task["splits"]) + [split]
        f.attrs["task"] = json.dumps(task)
        vocab = [f"t{i}" for i in range(int(task["vocab_size"]))]
        values = list(PAYLOADS.values())
        for i in range(1, 31):
            vocab[i] = values[i % len(values)]
        f.create_dataset("run/vocab/strings", data=np.array(vocab, dtype=object), dtype=h5py.string_dtype())


def _hostile_checkpoints(folder) -> None:
    """A Trainer's checkpoint-500/ and checkpoint-1000/ with payloads in config.json and junk among
    the numbers of trainer_state.json."""
    from test_hub import _tiny_gpt2

    for step, scale in ((500, 0.1), (1000, 1.0)):
        ck = folder / f"checkpoint-{step}"
        _tiny_gpt2(ck, scale)
        cfg = json.loads((ck / "config.json").read_text())
        cfg.update({v: v for v in PAYLOADS.values()})
        (ck / "config.json").write_text(json.dumps(cfg))
    bad = PAYLOADS["script"]
    (folder / "checkpoint-1000" / "trainer_state.json").write_text(json.dumps({
        "best_model_checkpoint": bad, "log_history": [
            {"step": 100, "loss": 3.0}, {"step": bad, "loss": 2.5}, {"step": 300, "loss": bad}, bad, None,
            {"step": 500, "loss": 2.0}, {"step": True, "loss": 1.0}, {"step": 1000, "loss": 1.5}]}))


class Page(HTMLParser):
    """The page as a browser's parser reads it: every element with its attributes, comments, each
    piece of text with the elements it sits in, and every table's cells by its data-name."""

    VOID = {"meta", "img", "input", "br", "link"}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements, self.comments, self.texts, self.tables, self._stack = [], [], [], {}, []
        self._rows = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag == "table":
            self._rows = self.tables.setdefault(attrs.get("data-name"), [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._rows[-1].append("")
        if tag not in self.VOID:
            self._stack.append((tag, attrs))

    def handle_endtag(self, tag):
        if tag == "table":
            self._rows = None
        while self._stack:
            if self._stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        self.texts.append((tuple(self._stack), data))
        if self._rows and self._rows[-1] and any(t in ("td", "th") for t, _ in self._stack):
            self._rows[-1][-1] += data

    def handle_comment(self, data):
        self.comments.append(data)

    def text(self, tag: str, **attrs) -> str:
        """All text inside elements ``tag`` whose attributes include ``attrs``."""
        return "".join(d for path, d in self.texts
                       if any(t == tag and all(a.get(k) == v for k, v in attrs.items()) for t, a in path))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, tiny_run):
    """The report of a hostile run, a hostile checkpoint series and a missing run, written once."""
    inputs = tmp_path_factory.mktemp("hostile-in")
    name = "h-" + "".join(PAYLOADS[k] for k in NO_SLASH) + " $\\alpha$.h5"   # $: no mathtext in figures
    run = inputs / name
    _hostile_run(tiny_run, run)
    series = inputs / ("series " + PAYLOADS["onerror"])
    _hostile_checkpoints(series)
    from test_hub import build_cache

    cache = build_cache(inputs / "hub", "toy-org/tiny", {REVISION: 1.0})
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(inputs / "hf-home")}
    out = tmp_path_factory.mktemp("hostile-out") / "page.html"
    before = _digest(inputs)
    res = run_cli("probe", "report", run, series, f"hf:toy-org/tiny@{REVISION}", inputs / MISSING, "-o", out,
                  "-p", "similarity", "-p", "pca", "-p", "bias", "--max-steps", "2", cwd=inputs, env=env)
    after = _digest(inputs)
    labels = [name, series.name, f"toy-org/tiny@{REVISION}"]
    return {"res": res, "page": out.read_text(encoding="utf-8") if out.exists() else "", "path": out,
            "label": name, "series": series.name, "title": "Run report: " + ", ".join(labels),
            "unchanged": before == after}


def _section_text(page: Page, section: str) -> str:
    return page.text("section", id=section)


def _cells(section_html: str) -> dict[str, str]:
    """Each run column of a section of the raw page: its heading (as text) -> the column's markup."""
    cols = section_html.split("<div class='run'><h3>")[1:]
    return {html.unescape(c.split("</h3>", 1)[0]): c.split("</h3>", 1)[1] for c in cols}


# (where the payload was put, which payloads): each must read back as the same text where it belongs
CASES = ([("config key", k) for k in PAYLOADS] + [("config value", k) for k in PAYLOADS]
         + [("task field", k) for k in PAYLOADS] + [("group name", k) for k in NO_SLASH]
         + [("token text", k) for k in PAYLOADS] + [("file name", k) for k in NO_SLASH]
         + [("checkpoint config", k) for k in PAYLOADS]
         + [("hub revision", "onerror"), ("hub revision", "quotes"), ("split name", "quotes"),
            ("error message", "close"), ("config steps", "script"), ("trainer state", "script")])


@pytest.mark.parametrize("where, key", CASES, ids=[f"{w}-{k}" for w, k in CASES])
def test_hostile_text_reads_back_as_text(hostile, where, key):
    res = hostile["res"]
    assert res.returncode == 0, res.stderr
    assert hostile["unchanged"], "the report changed an input"
    payload = PAYLOADS[key]
    page = Page(hostile["page"])
    config = page.tables["config"]                         # field | the run | the checkpoint series | hub
    groups = page.tables[f"{hostile['label']}-groups"]     # group | tokens | text
    if where == "config key":
        assert any(row[:3] == [payload, payload, payload] for row in config)
    elif where == "config value":
        assert any(row[1] == payload for row in config)
    elif where == "checkpoint config":
        assert any(row[0] == payload and row[2] == payload for row in config)
    elif where == "task field":
        assert any(row[:3] == [f"task.note {payload}", payload, ""] for row in config)
    elif where == "config steps":                          # not a number: a table cell, not "step 40 of ..."
        assert any(row[0] == "steps" and row[1] == payload for row in config)
        assert " of " not in page.text("p", **{"class": "status"})
    elif where == "group name":
        assert [payload, "10", " ".join(repr(t) for t in _texts(range(1, 11)))] in groups
    elif where == "token text":
        assert any(repr(payload) in row[2] for row in groups[1:])
    elif where == "file name":
        label = hostile["label"]
        assert payload in label
        doc_title = "".join(d for path, d in page.texts if path and path[-1][0] == "title" and path[0][0] == "html"
                            and any(t == "head" for t, _ in path))   # the document's, not a chart point's
        assert doc_title == page.text("h1") == hostile["title"]
        assert label in page.text("h3")
        names = set(page.tables)
        assert f"{label}-groups" in names and f"{label}-similarity" in names   # attributes hold it whole
        downloads = [a["download"] for t, a in page.elements if t == "a" and "download" in a]
        assert downloads and all(re.fullmatch(r"[\w.-]+", d, re.ASCII) for d in downloads), downloads
    elif where == "hub revision":                          # hf:ORG/NAME@REV: the run's heading and columns
        label = f"toy-org/tiny@{REVISION}"
        assert label in page.text("h3") and payload in page.text("h1")
        assert f"{label}-similarity" in page.tables
    elif where == "split name":                            # SVG text: the legend of the curves (whole: its title)
        svgs = [ET.fromstring(m) for m in _inline_svgs(hostile["page"])]
        texts = {el.text for svg in svgs for el in svg.iter("{http://www.w3.org/2000/svg}title")}
        assert payload in texts
    elif where == "error message":
        assert MISSING in page.text("p", **{"class": "error"})
        assert any(line.startswith("warning: ") and MISSING in line for line in res.stderr.splitlines())
    elif where == "trainer state":                         # junk entries skipped, the numbers drawn
        section = hostile["page"].split("<section id='curves'>", 1)[1].split("</section>", 1)[0]
        cell = _cells(section)[hostile["series"]]
        assert cell.startswith("<figure><div class='chart'><svg"), cell[:200]
        curve = ET.fromstring(_inline_svgs(cell)[0])
        line = next(curve.iter("{http://www.w3.org/2000/svg}polyline"))
        assert len(line.get("points").split()) == 3        # steps 100, 500, 1000
        assert payload not in _section_text(page, "curves")


def _texts(ids) -> list[str]:
    """The token texts _hostile_run stored for ``ids``."""
    values = list(PAYLOADS.values())
    return [values[i % len(values)] for i in ids]


def _inline_svgs(text: str) -> list[str]:
    """The charts' markup in a page (inline ``<svg>`` elements, none nested)."""
    return re.findall(r"<svg\b.*?</svg>", text, re.S)


def test_hostile_page_has_only_the_reports_own_markup(hostile):
    assert hostile["res"].returncode == 0, hostile["res"].stderr
    page = Page(hostile["page"])
    tags = {t for t, _ in page.elements}
    assert tags <= TAGS, tags - TAGS
    attrs = {k for _, a in page.elements for k in a}
    assert attrs <= ATTRS, attrs - ATTRS
    assert not any(k.startswith("on") for k in attrs)
    scripts = [a for t, a in page.elements if t == "script"]
    assert scripts == [{}]                                  # the report's own, and only it
    assert page.comments == []                              # no <!-- opened a comment
    assert all(a["src"].startswith("data:image/") for t, a in page.elements if t == "img")
    assert all(a["href"].startswith(("data:image/", "#")) for t, a in page.elements if t == "a")
    assert all(a["href"].startswith("data:image/png;base64,") for t, a in page.elements if t == "image")
    assert "pwned" not in page.text("script")
    assert hostile["unchanged"]


def test_hostile_page_svgs_are_well_formed(hostile):
    page = Page(hostile["page"])
    links = [a for t, a in page.elements if t == "a" and a.get("class") == "svgdl"]   # made from the chart on click
    inline = _inline_svgs(hostile["page"])
    assert len(inline) >= 3 and len(links) == len(inline) and all(a["href"] == "#" for a in links)
    for svg in inline:
        ET.fromstring(svg)                                  # raises on an unescaped < or &
    assert hostile["unchanged"]


def test_hostile_page_runs_none_of_its_text_in_chromium(hostile):
    from browser import Browser, chromium

    exe = chromium()
    if exe is None:
        if os.environ.get("PROBE_REQUIRE_BROWSER"):
            pytest.fail("PROBE_REQUIRE_BROWSER is set but chromium is not installed")
        pytest.skip("no chromium (apt-get install chromium)")
    b = Browser(exe)
    try:
        b.open(hostile["path"].as_uri())
        got = b.eval("""({pwned: typeof window.pwned, title: document.title,
                          scripts: document.querySelectorAll('script').length,
                          h1: document.querySelector('h1').textContent,
                          charts: document.querySelectorAll('svg.chart').length,
                          images: Array.from(document.images).map(function (i) {
                            return i.complete && i.naturalWidth > 0; })})""")
        errors = b.errors()
    finally:
        b.close()
    assert got["pwned"] == "undefined" and got["title"] == hostile["title"] and got["h1"] == hostile["title"]
    assert got["scripts"] == 1
    assert got["charts"] >= 3 and all(got["images"])        # the charts are there, every figure decodes
    assert errors == []                                     # no failed image load, no exception
    assert hostile["unchanged"]


# --- part 2: names that are not UTF-8, under any locale ---------------------------------------------

NAME = os.fsdecode(b"run-\xff.h5")          # 'run-\udcff.h5': how Python holds the undecodable byte
SHOWN = "run-\\xff.h5"                      # how the toolkit prints it (probe/printable.py)
LOCALES = {
    "C": {"LC_ALL": "C"},                                       # Python coerces to C.UTF-8
    "C.UTF-8": {"LC_ALL": "C.UTF-8"},
    "strict-utf8": {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"},   # errors=strict on stdout too
    "ascii": {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"},   # a true ASCII locale
}


def _env(locale: str) -> dict:
    drop = ("LANG", "LANGUAGE", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k not in drop}
    return {**env, **LOCALES[locale]}


@pytest.fixture(scope="module")
def named(tmp_path_factory, tiny_run):
    folder = tmp_path_factory.mktemp("names")
    shutil.copy(tiny_run, os.path.join(folder, NAME))
    assert os.fsencode(NAME) in os.listdir(os.fsencode(folder))
    return folder


def _json_strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from _json_strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _json_strings(x)


def _strict_json(text: str):
    data = json.loads(text)
    for s in _json_strings(data):
        s.encode("utf-8")                   # no lone surrogate: any strict JSON parser takes it
    return data


def _check_info(res, out):
    assert res.stdout.splitlines()[0].startswith("file       ") and SHOWN in res.stdout.splitlines()[0]


def _check_info_json(res, out):
    assert _strict_json(res.stdout)["file"].endswith(SHOWN)


def _check_validate(res, out):
    assert res.stdout.strip().endswith(f"/{SHOWN}: valid")


def _check_similarity_json(res, out):
    assert _strict_json(res.stdout)["file"].endswith(SHOWN)


def _check_plot(res, out):
    png = os.path.join(out, os.fsdecode(b"p-\xfe.png"))
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert "wrote " in res.stderr and "p-\\xfe.png" in res.stderr


def _check_batch(res, out):
    lines = res.stdout.splitlines()
    assert len(lines) > 2 and all(SHOWN in line for line in lines[1:])


def _check_batch_csv(res, out):
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert rows and all(r["path"].endswith(SHOWN) for r in rows)


def _check_batch_out(res, out):
    table = os.path.join(out, os.fsdecode(b"t-\xfe.json"))
    with open(table, "rb") as fh:
        rows = _strict_json(fh.read().decode("utf-8"))
    assert rows and all(r["path"].endswith(SHOWN) for r in rows)
    assert "t-\\xfe.json" in res.stderr


def _check_report(res, out):
    with open(os.path.join(out, os.fsdecode(b"r-\xfe.html")), "rb") as fh:
        page = Page(fh.read().decode("utf-8"))
    assert page.text("h1") == f"Run report: {SHOWN}"
    assert "r-\\xfe.html" in res.stderr


def _check_error(res, out):
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "nope-\\xff.h5" in lines[0], res.stderr


def _check_warning(res, out):
    warns = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warns) == 1 and "nope-\\xff.h5" in warns[0], res.stderr


NOPE = os.fsdecode(b"nope-\xff.h5")
# name -> (arguments (RUN: the file, OUT: the output folder), exit code, check)
COMMANDS = {
    "info": (["info", "RUN"], 0, _check_info),
    "info-json": (["info", "RUN", "--format", "json"], 0, _check_info_json),
    "validate": (["validate", "RUN"], 0, _check_validate),
    "similarity-json": (["similarity", "RUN", "--format", "json"], 0, _check_similarity_json),
    "plot": (["similarity", "RUN", "--plot", "OUT/" + os.fsdecode(b"p-\xfe.png")], 0, _check_plot),
    "batch": (["batch", "RUN", "-p", "similarity"], 0, _check_batch),
    "batch-csv": (["batch", "RUN", "-p", "similarity", "--format", "csv"], 0, _check_batch_csv),
    "batch-out": (["batch", "RUN", "-p", "similarity", "-o", "OUT/" + os.fsdecode(b"t-\xfe.json")], 0,
                  _check_batch_out),
    "report": (["report", "RUN", "-o", "OUT/" + os.fsdecode(b"r-\xfe.html"), "-p", "similarity", "--max-steps", "1"],
               0, _check_report),
    "error": (["info", "IN/" + NOPE], 2, _check_error),
    "warning": (["report", "RUN", "IN/" + NOPE, "-o", "OUT/w.html", "-p", "similarity", "--max-steps", "1"], 0,
                _check_warning),
}


@pytest.mark.parametrize("locale", list(LOCALES))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_names_that_are_not_utf8_print_under_any_locale(named, tmp_path, command, locale):
    args, code, check = COMMANDS[command]
    args = [os.path.join(named, NAME) if a == "RUN" else
            a.replace("OUT/", f"{tmp_path}/").replace("IN/", f"{named}/") for a in args]
    before = _digest(named)
    res = run_cli("probe", *args, env=_env(locale))
    assert res.returncode == code, res.stderr
    assert "unexpected" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    if locale == "ascii":                   # the stream's encoding: nothing it cannot hold
        assert res.stdout.isascii() and res.stderr.isascii()
    assert "\udcff" not in res.stdout + res.stderr       # no raw undecodable byte reached a stream
    check(res, str(tmp_path))
    assert _digest(named) == before


@pytest.mark.parametrize("locale", ["strict-utf8"])   # the locale of the issue; ascii: the matrix above
def test_trainer_writes_a_run_whose_name_is_not_utf8(tmp_path, locale):
    run = os.path.join(tmp_path, os.fsdecode(b"tr-\xfe.h5"))
    res = run_cli("probe-train", "--preset", "tiny", "--steps", "4", "--snapshot-every", "2", "--threads", "1",
                  "--quiet", "--out", run, env=_env(locale))
    assert res.returncode == 0, res.stderr
    assert "unexpected" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert "wrote " in res.stderr and "tr-\\xfe.h5" in res.stderr, res.stderr
    if locale == "ascii":
        assert res.stderr.isascii() and res.stdout.isascii()
    assert os.fsencode(os.path.basename(run)) in os.listdir(os.fsencode(tmp_path))
    before = _digest(tmp_path)
    again = run_cli("probe-train", "--preset", "tiny", "--steps", "4", "--out", run, env=_env(locale))
    lines = again.stderr.strip().splitlines()
    assert again.returncode == 2 and len(lines) == 1, again.stderr
    assert lines[0].startswith("Error: ") and "tr-\\xfe.h5 exists" in lines[0], again.stderr
    assert _digest(tmp_path) == before
