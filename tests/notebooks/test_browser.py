"""A real browser check: JupyterLab runs the tour notebook (notebooks/01_tour.ipynb) in headless
Debian chromium, and the results widget renders with its hit cards.

The machinery (``LabServer``, ``run_all``) is shared with ``scripts/screenshots.py``. JupyterLab
gets temporary JUPYTER_*/IPYTHONDIR folders, a free port and a token; the kernel runs on small
data (``LAR_NOTEBOOK_SMALL=1``) in a temporary work folder. The screenshot is saved under the
test's temporary folder, and copied to docs/img/ when ``LAR_SCREENSHOTS=1``.
Without ``chromium`` on PATH this test FAILS (never skips): ``apt-get install chromium``.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def machinery():
    spec = importlib.util.spec_from_file_location("lar_screenshots", REPO / "scripts" / "screenshots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_tour_results_widget_renders_in_jupyterlab(tmp_path):
    shots = machinery()
    if shutil.which("chromium") is None:
        pytest.fail(shots.INSTALL_HINT)
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / "01_tour.ipynb", root / "01_tour.ipynb")
    (tmp_path / "work").mkdir()
    env = {"LAR_NOTEBOOK_SMALL": "1", "LAR_NOTEBOOK_WORKDIR": str(tmp_path / "work"),
           "NUMBA_DISABLE_JIT": "1"}
    shot = tmp_path / "tour-results.png"
    with shots.LabServer(root, env=env) as lab, sync_playwright() as p:
        browser = shots.launch(p)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 2000})
            el = shots.run_all(page, lab, "01_tour.ipynb", ".lar-results", timeout_ms=240_000)
            text = shots.notebook_text(page)
            assert "Traceback" not in text, text[-3000:]
            cards = el.query_selector_all(".lar-hitcard")
            assert len(cards) >= 1, el.inner_html()[:2000]
            body = el.inner_text()  # the first results widget: %lar search "save the raw data"
            assert "save the raw data" in body and "good-enough-practices" in body
            assert "grep" in body  # a signal chip: which layer found the hit
            views = page.query_selector_all(".lar-results")
            assert any("scratch-note.md" in v.inner_text() for v in views)  # the live view
            page.wait_for_timeout(500)
            el.screenshot(path=str(shot))
            page.screenshot(path=str(tmp_path / "tour-page.png"), full_page=True)
        finally:
            browser.close()
    assert shot.stat().st_size > 5_000
    print(f"screenshot: {shot}")
    if os.environ.get("LAR_SCREENSHOTS") == "1":
        dest = REPO / "docs" / "img"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "tour-results.png")
