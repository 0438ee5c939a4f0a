"""The layout by concern is a contract: import-linter checks the directions pyproject.toml
declares (``[tool.importlinter]``) on every run of the suite."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.is_file(), "import-linter is a dev dependency: make test installs it (pip install -e '.[dev]')"
    out = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout
