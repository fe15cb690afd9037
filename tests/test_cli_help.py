"""What a new user reads first: every ``probe`` command's ``--help`` (its options about that command,
its examples), ``probe --version``, and status on stderr while a long command works.

The commands are enumerated from the app, so a new command is checked without a change here."""
import re
import shlex
import subprocess
import sys
from importlib.metadata import version

import pytest
from conftest import cli_commands, run_cli
from probe import registry

CMDS = cli_commands()
COMMANDS = list(CMDS)
# the commands that run probes, so that their options rightly say which probe takes what
RUNS_PROBES = {"batch": set(registry.names("batch")), "report": set(registry.names("report")),
               "sweep-summary": set(registry.names("sweeps"))}


def examples(text: str) -> list[str]:
    """The lines of the help's Examples block (up to the next blank line), as a terminal shows them."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "Examples:")
    out = []
    for ln in lines[start + 1:]:
        if not ln.strip():
            break
        out.append(ln.strip())
    return out


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """Every command's --help as the installed script prints it."""
    out = {}
    for name in COMMANDS:
        res = run_cli("probe", name, "--help")
        assert res.returncode == 0 and res.stderr == "", (name, res.stderr)
        out[name] = res.stdout
    return out


def test_the_overview_lists_the_commands_and_examples():
    text = run_cli("probe", "--help").stdout
    assert re.findall(r"^  (\S+) ", text.split("Commands:")[1], re.M) == COMMANDS
    for line in examples(text):   # the overview's examples: commands there are
        argv = shlex.split(line)
        assert argv[0] == "probe" and argv[1] in COMMANDS, line
        CMDS[argv[1]].make_context(argv[1], argv[2:])


@pytest.mark.parametrize("name", COMMANDS)
def test_every_help_ends_with_examples_of_that_command(helps, name):
    text = helps[name]
    shown = examples(text)
    assert 2 <= len(shown) <= 4, (name, shown)
    assert text.index("Examples:") > text.index("Usage:") and text.index("Examples:") < text.index("Options:")
    for line in shown:   # each whole on its line (no rewrap), and a command line of this command
        argv = shlex.split(line)
        assert argv[:2] == ["probe", name], line
        # and one the command accepts: every option known, every value of its type, nothing missing
        CMDS[name].make_context(name, argv[2:])
    if name in registry.names() or name == "rank":   # the probes: the registry's examples, in its order
        assert shown == list(registry.examples(name))


def _help_texts(name: str) -> list[tuple[str, str]]:
    """(parameter, help) of every option and argument of ``probe NAME``."""
    return [(p.name, getattr(p, "help", None) or "") for p in CMDS[name].params if p.name != "help"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_is_about_its_own_command(name):
    """No help of command X speaks of another command Y as its subject: no "Y: ..." or "Y, Z: ..." label
    and no default that names Y (the shared texts did: "[default: similarity, theory: reasoning; pca:
    ...]" in every command with --tokens). The commands that run probes may name the probes they run.
    Nor does it label itself ("ood: every sequence" in ood's own help is a shared text too)."""
    others = [c for c in COMMANDS if c != name and c not in RUNS_PROBES.get(name, ())]
    words = r"(?<![\w-])({})(?![\w-])"
    label = re.compile(words.format("|".join(map(re.escape, others))) + r"(?:, [\w-]+)*: ")
    for param, text in _help_texts(name):
        assert not label.search(text), f"probe {name} {param}: {text}"
        for default in re.findall(r"\[default: ([^\]]*)\]", text):
            assert not re.search(words.format("|".join(map(re.escape, others))), default), \
                f"probe {name} {param}: {text}"
        assert not text.startswith(f"{name}: "), f"probe {name} {param}: {text}"


@pytest.mark.parametrize("name", [n for n in COMMANDS if n in registry.names() and
                                  any(p.name == "tokens" for p in CMDS[n].params)])
def test_tokens_names_the_default_of_its_command(name):
    text = dict(_help_texts(name))["tokens"]
    assert re.findall(r"\[default: ([^\]]*)\]", text) == [registry.get(name).tokens], text


def test_the_options_of_several_probes_say_what_each_does_in_batch():
    texts = dict(_help_texts("batch"))
    assert texts["top_k"].startswith("align: ") and texts["threads"].startswith("spectrum: ")
    assert "similarity, theory: reasoning" in texts["tokens"]


# --- --version -----------------------------------------------------------------------------------

def test_version_is_the_installed_distribution_and_imports_nothing_heavy(tmp_path):
    res = run_cli("probe", "--version", real=True)
    assert res.returncode == 0 and res.stdout == f"probe {version('gamma-probe')}\n" and res.stderr == ""
    # the console script's entry point in a fresh interpreter: none of the heavy modules is imported
    code = ("import sys\nsys.argv = ['probe', '--version']\nfrom probe.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "print(sorted(m for m in ('numpy', 'h5py', 'torch', 'matplotlib') if m in sys.modules), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0 and res.stderr.strip() == "[]", res.stderr
    assert res.stdout == f"probe {version('gamma-probe')}\n"
    assert "--version" in run_cli("probe", "--help").stdout


# --- status on stderr ----------------------------------------------------------------------------

def test_report_says_what_it_is_doing_on_stderr_and_its_page_is_the_same(tiny_run, tmp_path):
    """Off a terminal (here: a pipe) the report names each section as it starts; stdout stays empty
    and the page is the page made without anyone listening (the library call, no progress)."""
    from probe import report

    res = run_cli("probe", "report", tiny_run, "-p", "similarity", "-p", "bias", "-o", tmp_path / "cli.html")
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    status = [ln for ln in res.stderr.splitlines() if ln.startswith("report: ")]
    assert status == [f"report: {tiny_run.name}: similarity (1/2)", f"report: {tiny_run.name}: bias (2/2)"], \
        res.stderr
    assert res.stderr.splitlines()[-1] == f"wrote {tmp_path / 'cli.html'}: 1 run(s), 2 probes"
    report.report([str(tiny_run)], str(tmp_path / "api.html"), probes=["similarity", "bias"])

    def page(name):   # the time it was written aside
        return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "T", (tmp_path / name).read_text())
    assert page("cli.html") == page("api.html")


def test_report_watch_says_what_its_first_page_is_doing(tiny_run, tmp_path):
    """--watch on a finished run: the first (here the last) page's sections as they start, then its line."""
    res = run_cli("probe", "report", tiny_run, "--watch", "-p", "bias", "-o", tmp_path / "w.html")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == f"report: {tiny_run.name}: bias (1/1)" and lines[-1].startswith(f"wrote {tmp_path / 'w.html'} ")
    assert res.stdout == ""
