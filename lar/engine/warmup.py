"""Loading a model layer's model within a build's timebox.

A model layer's first unit in a process loads its model first (import torch, read the weights:
tens of seconds on a busy machine), and nothing can interrupt that load: ``build --timebox 8s``
took 40 s. So before a model layer's first unit the builder starts the load (``layer.warm()``)
in a thread of its own and waits for it only until the deadline: at the deadline the build
returns and reports the layer as aborted while loading; the load goes on in its thread, and the
next build in this process (or the background builder) finds the model loaded. The CLI exits
without waiting for such a thread (``lar.apps.exit``).
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
import weakref
from typing import Any

__all__ = ["LOADING_REASON", "load_within"]

LOADING_REASON = ("loading its model did not finish within the timebox (it goes on in the "
                  "background of this process); a longer timebox builds it")

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="lar-warm")
_jobs: "weakref.WeakKeyDictionary[Any, concurrent.futures.Future]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def load_within(layer: Any, deadline: float) -> bool:
    """Whether ``layer``'s model is loaded by ``deadline`` (``time.monotonic()``); starts its
    ``warm()`` once per layer. A load that fails counts as done: the unit then fails with the
    reason, as it would have."""
    with _lock:
        job = _jobs.get(layer)
        if job is None:
            job = _jobs[layer] = _pool.submit(layer.warm)
    try:
        job.result(timeout=max(0.0, deadline - time.monotonic()))
    except concurrent.futures.TimeoutError:
        return False
    except Exception:  # the unit reports why the model is unusable
        pass
    return True
