"""Writing the harness's JSON files (NaN and infinities as null)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def sanitise(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): sanitise(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitise(v) for v in obj]
    return obj


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON (NaN and infinities as null); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sanitise(obj), indent=2, ensure_ascii=False, default=str) + "\n",
                    encoding="utf-8")
    return path


__all__ = ["sanitise", "write_json"]
