"""Settings an engine reads from its environment, and where its state lives by default."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV_SPARE_BUILD = "LAR_SPARE_BUILD"  # "0" turns spare-time building off by default
# "0" keeps the interactive entry points (the MCP server, %lar open PATH) from building in the
# background by default
ENV_BACKGROUND_BUILD = "LAR_BACKGROUND_BUILD"
# "0" leaves Python's garbage collector alone (lar.engine.collector: collect and freeze at open,
# after a build and when the background builder is done, so no full collection lands in a search)
ENV_GC_FREEZE = "LAR_GC_FREEZE"
OFF_WORDS = frozenset({"0", "false", "no", "off"})


def env_flag(name: str, default: bool = True) -> bool:
    """An on/off setting from the environment (``0``, ``false``, ``no``, ``off`` mean off)."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() not in OFF_WORDS


def interactive_background() -> bool:
    """Whether an interactive process (the MCP server, a notebook's ``%lar open PATH``) builds in
    the background by default: yes, unless ``LAR_BACKGROUND_BUILD=0``."""
    return env_flag(ENV_BACKGROUND_BUILD)


def default_state_dir(root: Path) -> Path:
    """``<root>/.lar`` when the root is writable, else a per-user cache dir keyed by the root."""
    if os.access(root, os.W_OK):
        return root / ".lar"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lar"
    return base / hashlib.blake2b(str(root).encode(), digest_size=8).hexdigest()
