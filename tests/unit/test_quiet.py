"""Loading a model prints nothing unless asked (LAR_VERBOSE, `lar -v`)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sentence_transformers")

LOAD = ("from lar.encoders.encoder import SentenceTransformerEncoder\n"
        "SentenceTransformerEncoder(None)\nprint('loaded')\n")


def _load(verbose: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LAR_VERBOSE=verbose)
    env.pop("TRANSFORMERS_VERBOSITY", None)
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, env=env,
                          timeout=600)


def test_a_model_load_prints_no_load_report_or_progress_bar():
    quiet = _load("0")
    assert quiet.returncode == 0 and quiet.stdout == "loaded\n"
    assert "LOAD REPORT" not in quiet.stderr and "Loading weights" not in quiet.stderr
    # the same load, verbose: the library's own report is there (so the check above can fail)
    loud = _load("1")
    assert loud.returncode == 0 and "LOAD REPORT" in loud.stderr
