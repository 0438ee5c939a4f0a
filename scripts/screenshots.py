"""Render lar's notebook widgets in a real JupyterLab (headless Debian chromium) and save PNGs.

    .venv/bin/python scripts/screenshots.py [--out docs/img] [--only explain,replay]

Each widget (results, status, anytime, explain, replay) gets a small notebook on a copy of the
demo corpus's prose notes; JupyterLab runs it ("Run All") and the widget's element is captured.
The same machinery (``LabServer``, ``run_all``) drives ``tests/notebooks/test_browser.py``.
JupyterLab runs with temporary JUPYTER_*/IPYTHONDIR folders: no user configuration is read or
written. The browser is Debian's ``chromium`` (``apt-get install chromium``); Playwright's own
browser download is never used.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INSTALL_HINT = ("Debian's chromium is not installed: run `apt-get install chromium` (as root; "
                "`make test` does it), Playwright's own browser download does not work here")


class BrowserMissingError(RuntimeError):
    """No ``chromium`` on PATH."""


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        raise BrowserMissingError(INSTALL_HINT)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """``jupyter lab`` on a free port with a token, rooted at ``root``, isolated config dirs."""

    def __init__(self, root: Path, *, python: str = sys.executable, timeout: float = 90.0,
                 env: dict[str, str] | None = None):
        self.root, self.python, self.timeout = Path(root), python, timeout
        self.extra_env = dict(env or {})
        self.port = free_port()
        self.token = os.urandom(16).hex()
        self.home = Path(tempfile.mkdtemp(prefix="lar-lab-home-"))
        self.proc: subprocess.Popen | None = None
        self.log = self.home / "lab.log"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                    "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR", "IPYTHONDIR"):
            env[var] = str(self.home / var.lower())
            Path(env[var]).mkdir(parents=True, exist_ok=True)
        # no news or update toasts over the page (they would cover the screenshots)
        note = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "apputils-extension"
        note.mkdir(parents=True, exist_ok=True)
        (note / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        nb = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "notebook-extension"
        nb.mkdir(parents=True, exist_ok=True)  # start the notebook's kernel without a dialog
        (nb / "tracker.jupyterlab-settings").write_text(json.dumps({"autoStartDefaultKernel": True, "windowingMode": "none"}))
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "magics"),
                                             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.update(self.extra_env)  # the kernels inherit the server's environment
        return env

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{path}?token={self.token}&reset"

    def __enter__(self) -> "LabServer":
        cmd = [self.python, "-m", "jupyter", "lab", "--no-browser", f"--port={self.port}",
               "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
               "--LabApp.expose_app_in_browser=True"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # containers and CI run as root
        self._logfh = open(self.log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, env=self.env(), stdout=self._logfh,
                                     stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + self.timeout
        status = f"http://127.0.0.1:{self.port}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}):\n{self.logs()}")
            try:
                with urllib.request.urlopen(status, timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"jupyter lab did not answer within {self.timeout:.0f} s:\n{self.logs()}")

    def logs(self) -> str:
        try:
            return self.log.read_text()[-4000:]
        except OSError:
            return ""

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # the server shuts its kernels down on SIGTERM
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "_logfh", None):
            self._logfh.close()
        shutil.rmtree(self.home, ignore_errors=True)


def launch(playwright):
    """Headless Debian chromium through Playwright."""
    return playwright.chromium.launch(executable_path=chromium_path(), headless=True,
                                      args=["--no-sandbox", "--disable-gpu"])


KERNEL_READY = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && k.connectionStatus === 'connected'
    && window.jupyterapp.commands.isEnabled('notebook:run-all-cells');
}"""


ALL_RAN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const prompts = panel ? [...panel.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')] : [];
  return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""


def notebook_text(page) -> str:
    try:
        return page.inner_text(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=5000)
    except Exception:  # noqa: BLE001 - diagnostics only
        return "(the notebook's text could not be read)"


def run_all(page, lab: LabServer, notebook: str, selector: str, *, timeout_ms: int = 90_000,
            wait_all: bool = True):
    """Open ``notebook`` in Lab, wait for its kernel, run all cells (Lab's
    ``notebook:run-all-cells`` command) and return the first element matching ``selector`` once
    it is visible (and, with ``wait_all``, once every code cell has run). On a timeout the error
    carries the notebook's visible text (tracebacks) and the server log."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(lab.url(notebook), wait_until="domcontentloaded")
    try:
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_ms)
        page.wait_for_function(KERNEL_READY, timeout=timeout_ms)
        # not awaited: the command's promise settles only when every cell has run
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        el = page.wait_for_selector(selector, state="visible", timeout=timeout_ms)
        if wait_all:
            page.wait_for_function(ALL_RAN, timeout=timeout_ms)
    except PlaywrightTimeout as exc:
        raise RuntimeError(f"{notebook}: {selector} did not appear or the cells did not all run "
                           f"({exc.message.splitlines()[0]}); the notebook shows:\n"
                           f"{notebook_text(page)[-4000:]}\n--- lab log ---\n"
                           f"{lab.logs()[-2000:]}") from None
    el.scroll_into_view_if_needed()
    return el


def notebook_json(cells: list[tuple[str, str]]) -> dict:
    """A minimal nbformat-4 notebook from (kind, source) pairs, python3 kernel."""
    out = []
    for i, (kind, src) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": src}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        out.append(cell)
    return {"cells": out, "metadata": {"kernelspec": {"display_name": "Python 3", "language":
            "python", "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


SETUP = """import os, shutil, tempfile
from pathlib import Path
import lar
from lar.apps.demo import data_dir
work = Path(tempfile.mkdtemp(prefix="lar-shot-"))
shutil.copytree(data_dir() / "prose", work / "corpus")
eng = lar.open(work / "corpus", state=work / "state")
QUERY = "where should researchers keep the original measurements untouched"
"""

# widget -> (the cells that display it, the CSS class of its element)
WIDGETS: dict[str, tuple[list[str], str]] = {
    "results": (["from lar_magics import search\nfrom lar_magics.results_view import results_view\n"
                 "results_view(search(eng, 'route-unique allocation', timebox=2.0, k=6))"],
                ".lar-results"),
    "status": (["from lar_magics.status_view import status_view\n"
                "eng.build(timebox=60, layers=['bm25', 'trigram'])\nstatus_view(eng)"],
               ".lar-status"),
    "anytime": (["from lar_magics.anytime_view import anytime_view\n"
                 "anytime_view(eng, 'route-unique allocation', timebox=1.0)"], ".lar-anytime"),
    "explain": (["eng.build(timebox=300, layers=['late'])\n"
                 "res = eng.search({'late': QUERY}, layers=['late'], timebox=10, k=5)\n"
                 "from lar_magics.explain_view import explain_view\n"
                 "view = explain_view(eng, res, res.hits[0].id)\n"
                 "view.set_weights({'the': 0.0, 'original': 2.0})\nview"], ".lar-explain"),
    "replay": (["eng.build(timebox=60, layers=['bm25'])\n"
                "trace = work / 'agent.jsonl'\neng.record_trace(trace)\n"
                "r = eng.search('reciprocal rank fusion', layers=['bm25', 'grep'], timebox=2.0, k=6)\n"
                "eng.fetch(r.hits[0].id)\neng.search({'grep': 'timebox'}, timebox=2.0)\n"
                "eng.stop_trace()\n"
                "from lar_magics.replay_view import replay_view\n"
                "view = replay_view(eng, trace)\nview.rerun(layers=['bm25'], timebox='500ms')\nview"],
               ".lar-replay"),
}


def shoot(names: list[str], out: Path, *, timeout_ms: int = 240_000) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="lar-shots-"))
    saved = []
    try:
        for name in names:
            cells, _ = WIDGETS[name]
            nb = notebook_json([("code", SETUP)] + [("code", c) for c in cells])
            (root / f"{name}.ipynb").write_text(json.dumps(nb, indent=1))
        with LabServer(root) as lab, sync_playwright() as p:
            browser = launch(p)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 2600})
                for name in names:
                    el = run_all(page, lab, f"{name}.ipynb", WIDGETS[name][1],
                                 timeout_ms=timeout_ms)
                    page.wait_for_timeout(1500)  # let late updates (charts, tables) settle
                    path = out / f"widget-{name}.png"
                    el.screenshot(path=str(path))
                    saved.append(path)
                    print(f"saved {path}")
                    page.evaluate("() => window.jupyterapp.commands.execute("
                                  "'kernelmenu:shutdown', {activate: false})")
            finally:
                browser.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img"))
    ap.add_argument("--only", default=",".join(WIDGETS), help="comma-separated widget names")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in WIDGETS]
    if unknown:
        ap.error(f"unknown widgets {unknown}; choose from {', '.join(WIDGETS)}")
    try:
        shoot(names, Path(args.out))
    except BrowserMissingError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
