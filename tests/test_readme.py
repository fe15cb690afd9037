from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    return [ln.strip() for ln in lines[:20] if ln.strip().startswith("python3 -m venv")]


def test_readme_starts_with_the_two_setup_commands_and_ci_runs_the_second():
    cmds = _readme_commands()
    assert len(cmds) == 2
    assert "examples/demo.py" in cmds[0]
    assert "pytest" in cmds[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert cmds[1] in [ln.strip() for ln in ci]
