"""No dead code in the product: vulture (run over probe/, train/ and what uses them: examples/, bench/,
docs/generate.py) finds no unused function, class, variable or attribute in probe/ or train/ beyond
the short whitelist of names reached by protocol (tests/vulture_whitelist.py, each with its reason)."""
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

VULTURE = Path(sys.executable).parent / "vulture"


@pytest.mark.skipif(not VULTURE.exists(), reason="vulture is not installed (pip install -e '.[dev]')")
def test_no_unused_code_in_the_product():
    res = subprocess.run([str(VULTURE), "probe", "train", "examples", "bench", "docs/generate.py",
                          "tests/vulture_whitelist.py", "--min-confidence", "60"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    found = [line for line in res.stdout.splitlines() if line.startswith(("probe/", "train/"))]
    assert found == [], "\n".join(found)
