"""ast-grep on a large text in a worker process that is killed at the deadline.

Parsing is native code that holds the GIL: on a 10 MB file a structural search took 22 s on a
1 s timebox, and the event loop and every other layer stood still meanwhile. Texts of at least
:data:`PROCESS_BYTES` are therefore matched by ``python sgmatch.py`` in a child process (about
0.1 s to start, a small share of such a parse): the calling thread only waits on a pipe, and at
the deadline the child is killed and the call returns.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lar.core.errors import LarError

__all__ = ["PROCESS_BYTES", "DeadlineHit", "match_in_process"]

#: texts of at least this many bytes are parsed in a worker process (ast-grep parses roughly
#: 1 MB/s on a busy machine: smaller texts hold the GIL for under a quarter of a second)
PROCESS_BYTES = 256 * 1024

_WORKER = Path(__file__).with_name("sgmatch.py")


class DeadlineHit(Exception):
    """The worker did not finish before the deadline and was killed."""


def match_in_process(text: str, lang: str, pattern: Any, single: list[str], multi: list[str],
                     deadline: float, limit: int | None = None) -> list[dict[str, Any]]:
    """``raw_matches`` (``lar.layers.kits.code.sgmatch``) of ``text``, computed in a worker
    process that is killed at ``deadline`` (``time.monotonic()``): then ``DeadlineHit``. An
    error of ast-grep is a ``LarError`` with its message."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineHit()
    head = json.dumps({"lang": lang, "pattern": pattern, "single": single, "multi": multi,
                       "limit": limit}).encode() + b"\n"
    proc = subprocess.Popen([sys.executable, str(_WORKER)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(head + text.encode("utf-8"),
                                    timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise DeadlineHit() from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        reply = json.loads(out)
    except ValueError:
        raise LarError(f"the ast-grep worker failed (exit {proc.returncode}): "
                       f"{err.decode(errors='replace')[-300:]}") from None
    if "error" in reply:
        raise LarError(reply["error"])
    return reply["matches"]
