from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text[text.index("```bash") + 7:text.index("```", text.index("```bash") + 7)]
    return [ln.strip() for ln in block.splitlines() if ln.strip()]


def test_readme_starts_with_the_two_setup_commands_and_ci_runs_the_second():
    cmds = _readme_commands()
    assert len(cmds) == 2
    assert "examples/demo.py" in cmds[0]
    assert "pytest" in cmds[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert cmds[1] in [ln.strip() for ln in ci]


def test_the_numbers_it_quotes_are_those_of_their_results_file():
    """The README is not built by the docs' hook, so its measured numbers are checked against the file
    the docs insert them from (docs/hooks.py's formats): the README and the docs cannot disagree."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = " ".join((ROOT / "README.md").read_text().split())
    quoted = [("gamma=0.8/similarity:distance_corr", "ci.2f"), ("gamma=0.8/acc(rsn_test)", "ci.2f"),
              ("gamma=0.3/similarity:distance_corr", "ci.2f"), ("gamma=0.3/acc(rsn_test)", "ci.2f")]
    for key, fmt in quoted:
        assert hooks.number("p1-seeds", key, fmt) in text, key
    shown = hooks.number("p1-seeds", "gamma=0.8/acc(rsn_test)>0.5", "frac").split()[0]
    assert f"above 0.5 in {shown} seeds" in text
    machine = hooks.number("p1-seeds", "meta/machine", None)     # where the runs trained: said with the numbers
    assert machine.startswith("NVIDIA H100") and "trained on the GPU" in machine
    assert "five seeds on a GPU (an NVIDIA H100;" in text
