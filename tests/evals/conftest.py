"""A tiny BEIR folder and one shared evaluation run over it (cheap routes, small timebox)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROUTES = ["grep", "bm25", "names", "trigram"]

DOCS = [
    ("d1", "Volcanoes", "Basaltic lava flows from shield volcanoes on Hawaii."),
    ("d2", "Quokka", "The quokka is a small marsupial living on Rottnest Island."),
    ("d3", "Ice", "The glacier melts quickly during warm summers."),
    ("d4", "Chess", "The Sicilian defence is a popular chess opening."),
    ("d5", "Bread", "Sourdough bread uses a fermented starter of flour and water."),
    ("d6", "Blob", "telescope mirror \u0000\u0001\u0002 raw bytes \u0000 dump"),
    ("d7", "Astronomy", "Amateur astronomers grind a telescope mirror by hand."),
    ("d8", "Bees", "Honey bees build wax combs in the hive."),
    ("d9", "Tides", "The moon pulls the oceans and causes tides twice a day."),
    ("d10", "Origami", "Folding paper cranes is a classic origami exercise."),
    ("d11", "Cricket", "A cricket over consists of six balls bowled by one bowler."),
    ("d12", "Jazz", "Jazz harmony uses extended chords and tritone substitution."),
    ("d13", "Hiking", "Hikers carry water and maps on long mountain trails."),
    ("d14", "Rivers", "Rivers carry sediment from mountains down to the sea."),
]
QUERIES = [
    {"_id": "q1", "text": "quokka marsupial Rottnest", "metadata": {}, "type": "rare-term"},
    {"_id": "q2", "text": "glaciers melting", "metadata": {"type": "paraphrase", "answer": [4, 11]}},
    {"_id": "q3", "text": "telescope mirror grinding", "metadata": {}},
    {"_id": "q4", "text": "ceramic kiln temperature", "metadata": {}},
    {"_id": "q5", "text": "sicilian chess defence", "metadata": {}, "type": "rare-term"},
    {"_id": "q6", "text": "a query nobody judged", "metadata": {}},
]
QRELS = [("q1", "d2", 1), ("q2", "d3", 1), ("q3", "d6", 1), ("q3", "d7", 1), ("q4", "d8", 1),
         ("q5", "d4", 2), ("q5", "d404", 1), ("q99", "d1", 1)]


def write_beir(folder: Path, docs=DOCS, queries=QUERIES, qrels=QRELS, split="test",
               header: bool = True) -> Path:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for did, title, text in docs:
            fh.write(json.dumps({"_id": did, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps(q) + "\n")
    lines = (["query-id\tcorpus-id\tscore"] if header else []) + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def beir_dir(tmp_path_factory) -> Path:
    return write_beir(tmp_path_factory.mktemp("beir") / "tiny")


@pytest.fixture(scope="session")
def evaluation(beir_dir, tmp_path_factory):
    """One evaluation over the tiny folder, shared by the tests that only read its results."""
    from lar_evals import evaluate_beir, load_beir

    out = tmp_path_factory.mktemp("evalout")
    data = load_beir(beir_dir, "test")
    ev = evaluate_beir(data, routes=ROUTES, timebox=2.0, build_timebox=60.0, k=20,
                       cache_root=out / "cache", out_dir=out / "result", anytime=[0.05, 1.0])
    return data, ev, out


@pytest.fixture
def make_beir():
    """``make_beir(folder, docs=..., queries=..., qrels=..., split=..., header=...)``."""
    return write_beir
