"""lar_evals.generate: rare-term and paraphrase test sets in BEIR layout, with verification.

A small mixed corpus (two Python modules with docstrings, a Markdown file with sections, a
LaTeX paper with a theorem, a non-UTF-8 note, a binary file, a hidden folder) is generated from
once per module. Word-swap runs on a Model2Vec model made in the test; only the check of the
default model's neighbours needs that model (distilled on first use) and is marked slow."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from lar_evals.generate import GenerateError, generate, load_generator, read_corpus
from lar_evals.generators.common import Doc, sentence_bounds
from lar_evals.generators.pairs import PAIR_KINDS
from lar_evals.generators.paraphrase import spell_latex
from lar_evals.generators.verify import CorpusStats, distribution, overlap, terms
from lar.core.errors import LarError

SCHEDULER = '''"""Cooperative scheduling of retrieval layers."""

import heapq

WATERMARK_LIMIT = 64


def drain_pending(queue, budget):
    """Remove finished jobs from the waiting list until the time allowance runs out.

    The oldest entries are looked at first.
    """
    done = []
    while queue and budget > 0:
        done.append(heapq.heappop(queue))
        budget -= 1
    return done


class ThrottleGate:
    """Admit callers while the gate has spare capacity."""

    def admit(self, caller):
        # Decide whether another request may enter, counting the ones already inside.
        return caller is not None


def frobnicate_weights(values):
    """Scale every weight so that the largest one becomes exactly one."""
    top = max(values)
    return [v / top for v in values]
'''

CACHE = '''"""A tiny least-recently-used cache."""

from collections import OrderedDict


class LruCache:
    """Keep the most recently touched items and forget the stale ones."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.items = OrderedDict()

    def lookup(self, key):
        """Fetch a stored value and mark it as freshly used, or give nothing back."""
        if key not in self.items:
            return None
        self.items.move_to_end(key)
        return self.items[key]


def checksum_blocks(chunks):
    """Add up the byte values of every chunk and fold the total into sixteen bits."""
    total = 0
    for piece in chunks:
        total += sum(piece)
    return total & 0xFFFF
'''

NOTES = """# Reciprocal rank fusion

Reciprocal rank fusion adds one over the constant plus the rank for each list in which a
candidate appears. Candidates that several retrievers agree on rise to the top of the merged
list, while scores of different retrievers never need a common scale.

## Route-unique allocation

A fused core comes first, then the best candidate that only one route found is admitted, so a
document seen by a single retriever still reaches the shortlist when the budget allows it.
"""

PAPER = r"""\documentclass{article}
\newcommand{\anytimebound}{\mathcal{B}}
\begin{document}
\section{Anytime retrieval}
\label{sec:anytime}
We call a search procedure \emph{interruptible} when it can return its current answer at any
moment, and we study how the quality of that answer grows with the time it is given.
\begin{theorem}\label{thm:monotone}
For every deadline $t \le T$ the recall of the interruptible search at time $t$ is at most its
recall at time $T$, and the sum of the route costs stays below the budget.
\end{theorem}
\end{document}
"""

UNICODE = """# Grüße aus Köln

Die Straßenbahn fährt über die Brücke, und das Café am Domplatz öffnet früh für Pendler
aus Düsseldorf, Bonn und Leverkusen; nachmittags gibt es Käsekuchen mit Sahne.
"""

TEXT_IDS = {"src/scheduler.py", "src/cache.py", "docs/notes.md", "docs/paper.tex",
            "docs/latin1.txt", "docs/köln.md"}
FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "report.json")


def make_gen_corpus(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / ".hidden").mkdir()
    (root / "src" / "scheduler.py").write_text(SCHEDULER, encoding="utf-8")
    (root / "src" / "cache.py").write_text(CACHE, encoding="utf-8")
    (root / "docs" / "notes.md").write_text(NOTES, encoding="utf-8")
    (root / "docs" / "paper.tex").write_text(PAPER, encoding="utf-8")
    (root / "docs" / "köln.md").write_text(UNICODE, encoding="utf-8")
    (root / "docs" / "latin1.txt").write_bytes(b"caf\xe9 au lait with a marmalade sandwich\n")
    (root / "blob.bin").write_bytes(b"\x00\x01binary\x00" * 20)
    (root / ".hidden" / "secret.md").write_text("# hidden heading\n", encoding="utf-8")
    return root


def read_set(out: Path) -> tuple[dict, list[dict], list[tuple[str, str, int]], dict]:
    corpus = {}
    for line in (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        assert set(row) == {"_id", "title", "text"} and row["title"] == ""
        corpus[row["_id"]] = row["text"]
    queries = [json.loads(line) for line in
               (out / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = (out / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore"
    qrels = [(q, d, int(s)) for q, d, s in (ln.split("\t") for ln in lines[1:])]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return corpus, queries, qrels, report


def span_text(corpus: dict, answer: dict) -> str:
    data = corpus[answer["doc"]].encode("utf-8")
    assert 0 <= answer["start"] < answer["end"] <= len(data)
    return data[answer["start"]:answer["end"]].decode("utf-8")


@pytest.fixture(scope="module")
def gen_corpus(tmp_path_factory) -> Path:
    return make_gen_corpus(tmp_path_factory.mktemp("gen") / "corpus")


@pytest.fixture(scope="module")
def rare_runs(gen_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("rare")
    reports = {name: generate(gen_corpus, "rare-term", 12, seed, out / name)
               for name, seed in (("a", 0), ("b", 0), ("c", 1))}
    return out, reports


# -- corpus and layout --------------------------------------------------------------------
def test_corpus_is_one_document_per_text_file(rare_runs):
    out, reports = rare_runs
    corpus, _, _, report = read_set(out / "a")
    assert set(corpus) == TEXT_IDS  # binary, hidden folder skipped
    assert "\ufffd" in corpus["docs/latin1.txt"]  # undecodable byte replaced
    assert report["corpus_files"] == 6 and report["skipped_files"] == {"binary": 1}
    assert report == reports["a"]


def test_rare_term_set_is_valid_beir(rare_runs):
    out, _ = rare_runs
    corpus, queries, qrels, report = read_set(out / "a")
    assert report["n_written"] == len(queries) == 12 and report["n_requested"] == 12
    qids = {q["_id"] for q in queries}
    assert len(qids) == len(queries)
    assert {q for q, _, _ in qrels} == qids
    assert all(d in corpus for _, d, _ in qrels)
    for q in queries:
        meta = q["metadata"]
        assert meta["type"] == "rare-term" and isinstance(meta["overlap"], float)
        term = meta["term"]
        assert term.lower() in q["text"].lower()
        assert term.lower() in span_text(corpus, meta["answer"]).lower()
        rel = {d: s for qq, d, s in qrels if qq == q["_id"]}
        assert rel[meta["answer"]["doc"]] == 2 and len(rel) <= 2
        assert meta["source"]["kind"]


def test_rare_terms_come_from_definition_sites(rare_runs):
    _, reports = rare_runs
    kinds = set(reports["a"]["sources"])
    assert {"python-function", "heading"} <= kinds | {"python-class"}
    assert any(k.startswith("latex-") for k in kinds)


def test_same_seed_is_byte_identical_and_another_seed_differs(rare_runs):
    out, _ = rare_runs
    for name in FILES:
        assert (out / "a" / name).read_bytes() == (out / "b" / name).read_bytes(), name
    assert (out / "a" / "queries.jsonl").read_bytes() != (out / "c" / "queries.jsonl").read_bytes()
    assert (out / "a" / "corpus.jsonl").read_bytes() == (out / "c" / "corpus.jsonl").read_bytes()


def test_report_has_quantiles_and_histogram(rare_runs):
    _, reports = rare_runs
    rep = reports["a"]
    for measure in ("jaccard", "rare_leak"):
        dist = rep["overlap"][measure]
        assert dist["min"] <= dist["p25"] <= dist["median"] <= dist["p75"] <= dist["max"] <= 1
        assert len(dist["histogram"]["counts"]) == 10 and len(dist["histogram"]["edges"]) == 11
        assert sum(dist["histogram"]["counts"]) == rep["n_written"]
    assert rep["overlap"]["rare_leak"]["min"] > 0  # a rare-term query holds its rare term
    assert rep["seed"] == 0 and rep["rejected"] == {} and rep["generator"] == "built-in"


def test_generated_set_loads_with_the_harness(rare_runs):
    from lar_evals.data import load_beir

    out, _ = rare_runs
    data = load_beir(out / "a", "test")
    assert len(data.scored_queries()) == 12
    assert all(data.query_type(q) == "rare-term" for q in data.scored_queries())


def test_max_files_and_exclude(gen_corpus, tmp_path):
    docs, skipped = read_corpus(gen_corpus, max_files=2)
    assert len(docs) == 2 and skipped["max-files"] == 4
    docs, skipped = read_corpus(gen_corpus, exclude=["docs/"])
    assert {d.id for d in docs} == {"src/cache.py", "src/scheduler.py"}
    assert skipped["excluded"] == 1
    rep = generate(gen_corpus, "rare-term", 3, 0, tmp_path / "o", exclude=["*.tex", "*.md"])
    assert rep["corpus_files"] == 3 and rep["exclude"] == ["*.tex", "*.md"]


# -- custom generators and verification ---------------------------------------------------
def test_custom_generator_is_used_and_leaks_are_rejected(gen_corpus, tmp_path):
    calls = []

    def gen(target_text: str, kind: str, rng: random.Random):
        calls.append(kind)
        assert isinstance(rng, random.Random) and target_text
        if len(calls) % 2:  # leaks every word of the target
            return target_text
        return f"plain question number {len(calls)} about something"

    rep = generate(gen_corpus, "word-swap", 3, 0, tmp_path / "p", generator=gen)
    corpus, queries, qrels, _ = read_set(tmp_path / "p")
    assert calls and set(calls) == {"word-swap"}
    assert rep["n_written"] == len(queries) == 3
    assert rep["rejected"]["rare-token-leak"] == 3 and rep["tried"] == 6
    assert rep["generator"].endswith("gen")
    assert all(q["text"].startswith("plain question number") for q in queries)
    assert all(q["metadata"]["leak"] == 0 for q in queries)
    assert all(d in corpus for _, d, _ in qrels)
    assert rep["overlap_generated"]["rare_leak"]["max"] > 0 == rep["overlap"]["rare_leak"]["max"]


def test_rare_term_generator_must_keep_the_term(gen_corpus, tmp_path):
    rep = generate(gen_corpus, "rare-term", 4, 0, tmp_path / "r",
                   generator=lambda text, kind, rng: "where is this defined")
    assert rep["n_written"] == 0 and rep["rejected"] == {"missing-term": rep["tried"]}
    rep = generate(gen_corpus, "rare-term", 4, 0, tmp_path / "s",
                   generator=lambda text, kind, rng: None)
    assert rep["n_written"] == 0 and rep["rejected"]["no-query"] == rep["tried"]


def test_bad_arguments_raise_typed_errors(gen_corpus, tmp_path):
    with pytest.raises(GenerateError, match="unknown test-set kind"):
        generate(gen_corpus, "trivia", 3, 0, tmp_path / "x")
    with pytest.raises(GenerateError, match="positive integer"):
        generate(gen_corpus, "rare-term", 0, 0, tmp_path / "x")
    with pytest.raises(LarError, match="does not exist"):
        generate(tmp_path / "missing", "rare-term", 3, 0, tmp_path / "x")
    with pytest.raises(GenerateError, match="must return a string"):
        generate(gen_corpus, "rare-term", 3, 0, tmp_path / "x", generator=lambda t, k, r: 42)
    with pytest.raises(GenerateError, match="module:function"):
        load_generator("no_colon")
    with pytest.raises(GenerateError, match="cannot import"):
        load_generator("lar_evals.generate:does_not_exist")


def test_verification_measures_by_hand():
    dist = distribution([0.0, 0.5, 1.0])
    assert (dist["min"], dist["p25"], dist["median"], dist["p75"], dist["max"]) == \
        (0.0, 0.25, 0.5, 0.75, 1.0)
    assert dist["histogram"]["counts"] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert distribution([])["median"] is None
    docs = [Doc("a", "zebra giraffe common"), Doc("b", "common words"), Doc("c", "common")]
    stats = CorpusStats(docs)
    ov = overlap("giraffe common", "zebra giraffe common", stats)
    assert ov["jaccard"] == pytest.approx(2 / 3)
    assert ov["rare_leak"] == pytest.approx(1 / 2)  # zebra, giraffe rare; common in 3 docs
    assert terms("parseDuration") == terms("parse_duration") >= {"pars", "durat"}


def test_offsets_of_non_ascii_text():
    text = "aé東\U0001F600x\nStraße"
    doc = Doc("u", text)
    for i in range(len(text) + 1):
        assert doc.byte_offset(i) == len(text[:i].encode("utf-8"))
        assert doc.char_offset(doc.byte_offset(i)) == i
    assert doc.char_offset(2) == 1  # inside "é": rounds down


def test_spans_and_latex_spelling():
    text = "\\section{A}\n\\label{x}\nWe call it \\emph{lazy} here. Next one."
    start, end = sentence_bounds(text, text.index("lazy"))
    assert text[start:end] == "We call it \\emph{lazy} here."
    words = spell_latex(r"For every $t \le T$ we have $\sum_i x_i \in \mathbb{R}$.")
    assert "at most" in words and "sum" in words and "real numbers" in words


# -- command line -------------------------------------------------------------------------
def test_cli_standalone(gen_corpus, tmp_path, capsys, monkeypatch):
    from lar_evals.generate_cli import main

    assert main([str(gen_corpus), "--kind", "rare-term", "--n", "3", "--seed", "0",
                 "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert "rare-term: wrote 3/3" in out and "report.json" in out
    assert all((tmp_path / "cli" / f).is_file() for f in FILES)

    (tmp_path / "fake_llm_gen.py").write_text(
        "def ask(text, kind, rng):\n    return f'plain question {rng.randrange(10**6)}'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main([str(gen_corpus), "--kind", "paraphrase", "--n", "2", "--out",
                 str(tmp_path / "g"), "--generator", "fake_llm_gen:ask"])
    assert code == 0 and "generator fake_llm_gen" in capsys.readouterr().out
    assert main([str(tmp_path / "missing"), "--kind", "rare-term", "--out", str(tmp_path)]) == 2
    assert "error:" in capsys.readouterr().err


def test_several_kinds_in_one_set(gen_corpus, tmp_path, capsys):
    from lar_evals.data import load_beir
    from lar_evals.generate_cli import main
    from lar_evals.generate_many import merge_sets

    out = tmp_path / "mix"
    assert main([str(gen_corpus), "--kind", "rare-term,paraphrase", "--n", "2", "--seed", "0",
                 "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("rare-term: wrote 2/2") and lines[1].startswith("paraphrase: wrote")
    report = json.loads((out / "report.json").read_text())
    parts = report["parts"]
    assert report["kind"] == "rare-term+paraphrase"
    assert report["n_written"] == parts["rare-term"]["n_written"] + parts["paraphrase"]["n_written"]
    # each part equals a set generated alone with the same options
    alone = generate(gen_corpus, "rare-term", 2, 0, tmp_path / "alone")
    assert alone["n_written"] == parts["rare-term"]["n_written"]
    assert (tmp_path / "alone" / "queries.jsonl").read_text() in (out / "queries.jsonl").read_text()
    data = load_beir(out, "test")
    types = {data.query_type(q) for q in data.scored_queries()}
    # paraphrase queries are typed by their pair kind
    assert "rare-term" in types and types - {"rare-term"} and types - {"rare-term"} <= set(PAIR_KINDS)
    assert len(data.scored_queries()) == report["n_written"]
    # parts with another corpus cannot be merged; an id in two parts neither
    other = tmp_path / "other"
    generate(gen_corpus, "rare-term", 2, 0, other, max_files=2)
    with pytest.raises(GenerateError, match="another corpus"):
        merge_sets([out / "parts" / "rare-term", other], tmp_path / "bad")
    with pytest.raises(GenerateError, match="in both"):
        merge_sets([out / "parts" / "rare-term", tmp_path / "alone"], tmp_path / "bad2")
    with pytest.raises(SystemExit) as exc:  # argparse: usage and the list of kinds
        main([str(gen_corpus), "--kind", "rare-term,para", "--out", str(tmp_path / "x")])
    assert exc.value.code == 2 and "unknown kind 'para'" in capsys.readouterr().err


# -- word-swap paraphrases (Model2Vec neighbours) -----------------------------------------
# A Model2Vec model made here (word-level vocabulary of the corpus's words, vectors chosen so
# each word's nearest neighbour is known), loaded through lar's StaticEncoder like the default
# model: no distillation of the default model (about 100 s on a loaded machine) in the fixture.
SYNONYMS = ("remove", "removal", "removing", "delete", "erase")  # forms, then two neighbours


def _tiny_model(path: Path, words: list[str]) -> Path:
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    rng = np.random.default_rng(21)
    vocab = ["[UNK]", "[PAD]", *words]
    vecs = rng.standard_normal((len(vocab), 32)).astype(np.float32)
    for i in range(2, len(vocab) - 1, 2):  # consecutive words pair up: cosine ~0.98
        vecs[i + 1] = vecs[i] + 0.2 * rng.standard_normal(32).astype(np.float32)
    base = rng.standard_normal(32).astype(np.float32)
    for j, w in enumerate(SYNONYMS):  # forms of "remove" nearest, then delete, then erase
        vecs[vocab.index(w)] = base + (0.05 * (j + 1)) * rng.standard_normal(32).astype(np.float32)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    StaticModel(vectors=vecs, tokenizer=tok, normalize=True).save_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "model_type": "model2vec"}))
    return path


@pytest.fixture(scope="module")
def tiny_neighbours(gen_corpus, tmp_path_factory):
    import re

    from lar.encoders.static import StaticEncoder
    from lar_evals.generators.neighbours import Neighbours

    words = set()
    for f in sorted(gen_corpus.rglob("*")):
        if f.is_file() and f.suffix in (".py", ".md", ".tex"):
            words |= {w.lower() for w in re.findall(r"[A-Za-z]{3,}", f.read_text(encoding="utf-8"))}
    words = sorted(words - set(SYNONYMS)) + list(SYNONYMS)
    return Neighbours(StaticEncoder(_tiny_model(tmp_path_factory.mktemp("m2v") / "m", words)))


@pytest.fixture(scope="module")
def para_runs(gen_corpus, tiny_neighbours, tmp_path_factory):
    out = tmp_path_factory.mktemp("para")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("lar_evals.generate._neighbours", lambda: tiny_neighbours)
        reports = {name: generate(gen_corpus, "word-swap", 8, seed, out / name)
                   for name, seed in (("a", 0), ("b", 0), ("c", 1))}
    return out, reports


def test_paraphrases_share_no_rare_tokens_with_their_targets(para_runs):
    out, reports = para_runs
    corpus, queries, qrels, report = read_set(out / "a")
    assert report["n_written"] == len(queries) >= 6
    assert {"docstring", "section", "theorem"} <= set(report["sources"])
    stats = CorpusStats([Doc(i, t) for i, t in sorted(corpus.items())])
    for q in queries:
        target = span_text(corpus, q["metadata"]["answer"])
        rare = stats.rare_terms(terms(target))
        assert not (terms(q["text"]) & rare), (q["text"], target)
        assert q["metadata"]["leak"] == 0 and q["metadata"]["overlap"] <= 0.5
        assert q["_id"] in {qq for qq, _, _ in qrels}
    assert all(d in corpus for _, d, _ in qrels)
    assert report["overlap"]["rare_leak"]["max"] == 0


def test_paraphrase_sets_are_deterministic(para_runs):
    out, _ = para_runs
    for name in FILES:
        assert (out / "a" / name).read_bytes() == (out / "b" / name).read_bytes(), name
    assert (out / "a" / "queries.jsonl").read_bytes() != (out / "c" / "queries.jsonl").read_bytes()


def test_neighbours_skip_forms_of_the_same_word(tiny_neighbours):
    # removal / removing are nearest but forms of "remove": skipped, in order after them
    assert tiny_neighbours.near("remove", 2) == ["delete", "erase"]
    assert tiny_neighbours.near("unknownword") == []


@pytest.mark.slow
def test_default_model_neighbours_skip_forms_of_the_same_word():
    from lar_evals.generate import _neighbours

    near = _neighbours().near("remove", 5)
    assert near and not any(w.startswith("remov") for w in near)
