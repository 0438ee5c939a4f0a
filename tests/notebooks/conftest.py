"""Fixtures of the notebook tests: an IPython shell with ``%load_ext lar``, a kernelspec for the
project's own Python (nbclient runs the notebooks in it) and the environment of that kernel."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
KERNEL_NAME = "lar-test"


@pytest.fixture
def shell():
    """The IPython shell with lar's extension loaded; the notebook session is reset after."""
    from IPython.core.interactiveshell import InteractiveShell

    import lar_magics

    ip = InteractiveShell.instance()
    if "lar" not in ip.extension_manager.loaded:
        ip.run_line_magic("load_ext", "lar")
    lar_magics.SESSION.close()
    lar_magics.SESSION.defaults = []
    yield ip
    lar_magics.SESSION.close()
    lar_magics.SESSION.defaults = []
    for name in [n for n in ip.user_ns if n.startswith("_lar") or n in ("eng", "res", "several")]:
        ip.user_ns.pop(name, None)


@pytest.fixture(scope="session")
def kernel(tmp_path_factory):
    """Environment for notebook kernels: a kernelspec for this interpreter (``lar-test``) in a
    temporary JUPYTER_PATH, temporary Jupyter/IPython dirs, and the small-notebook switches."""
    base = tmp_path_factory.mktemp("jupyter")
    spec = base / "data" / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lar test kernel", "language": "python"}))
    env = {
        "JUPYTER_PATH": str(base / "data"), "JUPYTER_DATA_DIR": str(base / "data"),
        "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "IPYTHONDIR": str(base / "ipython"), "LAR_NOTEBOOK_SMALL": "1",
        "LAR_NOTEBOOK_WORKDIR": str(base / "work"), "NUMBA_DISABLE_JIT": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    (base / "work").mkdir()
    return KERNEL_NAME, env
