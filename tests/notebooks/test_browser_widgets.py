"""Issue 20 item 7 in a real browser: JupyterLab in headless Debian chromium runs one notebook
with the results view (its table tab: sorted by a header click, filtered by the search box), the
status view with a long note on one layer (every bar keeps its width), the fusion chart over two
files of the same name (rows told apart by their path suffix) and the anytime view (its chart
against time). One screenshot per view goes under the test's temporary folder (and to docs/img/
with ``LAR_SCREENSHOTS=1``). Without ``chromium`` on PATH this test FAILS (never skips)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def machinery():
    """scripts/screenshots.py: LabServer, run_all, notebook_json (shared with test_browser)."""
    spec = importlib.util.spec_from_file_location("lar_screenshots", REPO / "scripts" / "screenshots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

SETUP = """import dataclasses, shutil, tempfile
from pathlib import Path
import lar
from lar.apps.demo import data_dir
work = Path(tempfile.mkdtemp(prefix="lar-widgets-"))
shutil.copytree(data_dir() / "prose", work / "corpus")
for team in ("alpha", "beta"):  # two files of one name: the fusion chart must tell them apart
    (work / "corpus" / "teams" / team / "notes").mkdir(parents=True)
    (work / "corpus" / "teams" / team / "notes" / "index.md").write_text(
        f"# {team}\\n\\nRaw data of team {team}: keep the raw data read-only.\\n")
eng = lar.open(work / "corpus", state=work / "state")
eng.build(timebox=60, layers=["bm25", "trigram"])
CHEAP = ["names", "grep", "bm25", "trigram"]
"""

CELLS = [
    # results: the table tab selected
    "from lar_magics import search\nfrom lar_magics.results_view import results_view\n"
    "rv = results_view(search(eng, 'raw data', layers=CHEAP, timebox=5.0, k=8))\n"
    "rv.tabs.selected_index = 1\nrv",
    # status: one layer with a very long note
    "from lar_magics.status_view import StatusView\nsv = StatusView(eng)\nst = eng.status()\n"
    "sv._refresh(dataclasses.replace(st, layers=tuple(dataclasses.replace(l, notes=("
    "'a very long note that would squeeze the bar ' * 12) if l.name == 'bm25' else l.notes)"
    " for l in st.layers)))\nsv",
    # fusion chart, as SVG so its labels can be read
    "from IPython.display import HTML\nfrom lar_magics.charts import compare_fusion, fusion_chart\n"
    "from lar_magics.explain_render import chart_svg\n"
    "frame = compare_fusion(eng, 'raw data team', layers=CHEAP, k=6, timebox=5.0)\n"
    "HTML(\"<div class='lar-fusion-svg'>\" + chart_svg(fusion_chart(frame)) + '</div>')",
    # anytime view with its chart
    "from lar_magics.anytime_view import anytime_view\n"
    "anytime_view(eng, 'raw data', timebox=1.0, layers=CHEAP, k=6)",
]


def visible_rows(el) -> list[str]:
    """The grid's rows as shown (DataTables keeps detached and sizing rows in the DOM too)."""
    body = el.query_selector(".lar-grid .dt-scroll-body tbody") or el.query_selector(".lar-grid tbody")
    return [line for line in body.inner_text().splitlines() if line.strip()]


def notebook(shots) -> dict:
    return shots.notebook_json([("code", SETUP)] + [("code", c) for c in CELLS])


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_widgets_render_sort_filter_and_keep_their_shape(tmp_path):
    shots = machinery()
    if shutil.which("chromium") is None:
        pytest.fail(shots.INSTALL_HINT)
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    (root / "widgets.ipynb").write_text(json.dumps(notebook(shots), indent=1))
    saved = {}
    with shots.LabServer(root, env={"NUMBA_DISABLE_JIT": "1"}) as lab, sync_playwright() as p:
        browser = shots.launch(p)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 2400})
            shots.run_all(page, lab, "widgets.ipynb", ".lar-anytime-chart svg", timeout_ms=240_000)
            text = shots.notebook_text(page)
            assert "Traceback" not in text, text[-3000:]

            # -- results: the table tab is a DataTables grid with one row per hit ---------------
            grid = page.wait_for_selector(".lar-results .lar-grid table.dataTable tbody tr",
                                          state="visible", timeout=60_000)
            assert grid is not None
            results = page.query_selector(".lar-results")
            (tmp_path / "grid.html").write_text(results.query_selector(".lar-grid").inner_html())
            heads = [t for t in (h.inner_text().strip() for h in
                                 results.query_selector_all(".lar-grid thead th")) if t]
            assert heads[:3] == ["rank", "score", "hit"] and "grep rank" in heads, heads
            assert "bm25 score" in heads, heads
            rows = visible_rows(results)
            n = len(rows)
            ranks = [int(r.split("\t")[0]) for r in rows]
            assert ranks == list(range(1, n + 1)) and n >= 3
            page.wait_for_timeout(300)
            results.screenshot(path=str(tmp_path / "widget-results-table.png"))
            saved["results-table"] = tmp_path / "widget-results-table.png"
            # sort: the rank header's sort button, clicked twice, orders it descending
            rank_th = next(h for h in results.query_selector_all(".lar-grid thead th")
                           if h.inner_text().strip() == "rank")
            rank_th.query_selector(".dt-column-order").click()
            page.wait_for_timeout(500)
            rank_th.query_selector(".dt-column-order").click()
            page.wait_for_timeout(800)
            ranks = [int(r.split("\t")[0]) for r in visible_rows(results)]
            assert ranks == list(range(n, 0, -1)), ranks
            # filter: the search box keeps the rows that mention 'glossary'
            box = results.query_selector(".lar-grid .dt-search input")
            box.fill("glossary")
            page.wait_for_timeout(1500)
            kept = visible_rows(results)
            info = results.query_selector(".dt-info").inner_text()
            results.screenshot(path=str(tmp_path / "widget-results-filtered.png"))
            assert kept and all("glossary" in t for t in kept) and len(kept) < n, (kept, info)
            assert info.startswith(f"Showing 1 to {len(kept)} of {len(kept)} entr"), info
            box.fill("")
            # a column's own filter box (under the 'hit' column) keeps the rows of beta's file
            page.wait_for_timeout(1000)
            foot = results.query_selector(".lar-grid .dt-scroll-foot") or results
            filters = foot.query_selector_all("tfoot input")
            assert [f.get_attribute("placeholder") for f in filters][:3] == ["rank", "score", "hit"]
            filters[2].click()
            filters[2].type("beta")  # typed key by key: the column filters listen to key presses
            page.wait_for_timeout(1500)
            kept = visible_rows(results)
            info = results.query_selector(".dt-info").inner_text()
            results.screenshot(path=str(tmp_path / "widget-results-column-filter.png"))
            assert info.startswith("Showing 1 to 1 of 1 entry"), (info, kept)
            assert len(kept) == 1 and "beta/notes/index.md" in kept[0], kept

            # -- status: every bar has the same width, the long note wraps beside it ---------
            status = page.query_selector(".lar-status")
            widths = page.evaluate("""(el) => [...el.querySelectorAll('.lar-status-row')].map(r =>
                [r.firstElementChild.textContent.trim(),
                 r.firstElementChild.getBoundingClientRect().width])""", status)
            by_name = dict(widths)
            assert "bm25" in by_name and "grep" in by_name, widths
            assert max(by_name.values()) - min(by_name.values()) < 1.0, widths
            assert abs(by_name["bm25"] - 360) < 1.0, widths
            status.screenshot(path=str(tmp_path / "widget-status.png"))
            saved["status"] = tmp_path / "widget-status.png"

            # -- fusion chart: rows labelled by the path suffix that tells them apart --------
            fusion = page.query_selector(".lar-fusion-svg")
            labels = [t.text_content() for t in fusion.query_selector_all("svg text")]
            # teams/alpha/notes/index.md and teams/beta/notes/index.md: cut to what tells them apart
            assert "…/alpha/notes/index.md:3-3" in labels, labels
            assert "…/beta/notes/index.md:3-3" in labels, labels
            assert "glossary.md:8-8" in labels, labels  # a path with nothing to cut stays whole
            fusion.screenshot(path=str(tmp_path / "widget-fusion.png"))
            saved["fusion"] = tmp_path / "widget-fusion.png"

            # -- anytime: the chart plots against time -----------------------------------------
            anytime = page.query_selector(".lar-anytime")
            chart_text = " ".join(t.text_content() for t in
                                  anytime.query_selector_all(".lar-anytime-chart svg text"))
            assert "time the search took (ms)" in chart_text and "rank" in chart_text, chart_text
            anytime.screenshot(path=str(tmp_path / "widget-anytime.png"))
            saved["anytime"] = tmp_path / "widget-anytime.png"
        finally:
            browser.close()
    for name, path in saved.items():
        assert path.stat().st_size > 3_000, name
        print(f"screenshot: {path}")
    if os.environ.get("LAR_SCREENSHOTS") == "1":
        dest = REPO / "docs" / "img"
        dest.mkdir(parents=True, exist_ok=True)
        for path in saved.values():
            shutil.copy(path, dest / path.name)
