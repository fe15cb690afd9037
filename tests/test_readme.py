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


def test_layout_block_names_every_module_of_the_tree():
    text = (ROOT / "docs" / "explanation" / "architecture.md").read_text()
    block = text
    block = block[block.index("```"):block.index("```", block.index("```") + 3)]
    for pkg in ("probe", "train"):
        for p in sorted((ROOT / pkg).iterdir()):
            if p.name.startswith("_") or p.name == "__pycache__":
                continue
            name = p.name + "/" if p.is_dir() else p.name
            assert name in block, f"{pkg}/{name} missing from the layout block of docs/explanation/architecture.md"
