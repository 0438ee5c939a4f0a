"""Writing a benchmark's results: ``OUT.json`` (the figures) and ``OUT.md`` (the table), and
printing the table."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence


def write_results(out: str | Path, data: Any, lines: Sequence[str]) -> None:
    out = Path(out)
    out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
