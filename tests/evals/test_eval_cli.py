"""``python -m lar_evals`` and ``lar eval``: the beir subcommand end to end, one-line errors, and
subcommands whose module is missing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lar_evals import cli

REPO = Path(__file__).resolve().parents[2]


def test_python_m_lar_evals_beir_writes_the_json(beir_dir, tmp_path):
    out = tmp_path / "summary.json"
    env = {**os.environ, "LAR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-m", "lar_evals", "beir", str(beir_dir), "--split", "test", "--routes",
         "grep,names", "--fusion", "rrf,route-unique", "--timebox", "1s", "--k", "20",
         "--metrics", "ndcg@10,recall@20", "--out", str(out), "--quiet"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    assert summary["schema"] == 2 and summary["n_queries"] == 5
    assert set(summary["routes"]) == {"grep", "names"} and set(summary["fusion"]) == {"rrf", "route-unique"}
    assert set(summary["default"]) == {"ndcg@10", "recall@20"}
    assert (tmp_path / "summary-runs" / "default.trec").is_file()
    assert "route grep" in proc.stdout and "missed at k=10" in proc.stdout


def test_errors_are_one_line_and_exit_2(beir_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LAR_CACHE_DIR", str(tmp_path / "cache"))
    rc = cli.main(["beir", str(beir_dir), "--split", "test", "--routes", "grep,nope", "--quiet",
                   "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert err.startswith("evals: error: unknown layer 'nope'; known layers:") and "bm25" in err
    rc = cli.main(["beir", str(beir_dir), "--split", "test", "--metrics", "ndcg@10,foo"])
    assert rc == 2 and "unknown metric 'foo'" in capsys.readouterr().err


def test_lar_eval_forwards(beir_dir, capsys):
    from lar.apps.cli import main as lar_main

    rc = lar_main(["eval", "beir", str(beir_dir), "--split", "validation"])
    assert rc == 2
    assert "no qrels for split 'validation'; available splits: test" in capsys.readouterr().err


def test_missing_plugged_subcommand_is_reported(capsys, monkeypatch):
    monkeypatch.setitem(cli.PLUGGED, "generate", ("evals.no_such_module_xyz", "generate sets"))
    assert cli.main(["generate", "--anything"]) == 2
    assert "generate is not available" in capsys.readouterr().err
    parser = cli.build_parser()  # listing the subcommands imports none of them
    assert "generate" in parser.format_help() and "report" in parser.format_help()


def test_plugged_subcommand_runs(tmp_path, capsys, monkeypatch):
    mod = tmp_path / "evals_fake_plugin.py"
    mod.write_text("def add_arguments(p):\n    p.add_argument('--n', type=int)\n"
                   "def run(args):\n    print('ran', args.n)\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.PLUGGED, "report", ("evals_fake_plugin", "fake"))
    assert cli.main(["report", "--n", "3"]) == 0
    assert capsys.readouterr().out.strip() == "ran 3"
