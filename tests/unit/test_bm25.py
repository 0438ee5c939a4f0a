"""The bm25 layer: tokenizers, chunk spans, segments (deltas, tombstones, merges, corruption),
global-IDF weights, and the layer contract. Expected values are worked out by hand."""
import asyncio
import math
import shutil

import numpy as np
import pytest

import lar
from lar.core.errors import ConfigError, QueryError
from lar.core.layer import Budget
from lar.layers.bm25 import BM25Layer, parse_query
from lar.layers.kits.lexical.chunks import Highlighter, code_chunks
from lar.layers.kits.lexical.segments import SegmentParams, SegmentStore, global_weights
from lar.layers.kits.lexical.tokenize import Tokenizer, is_compound, split_identifier
from lar.core.registry import unregister_layer


# -- tokenizers -----------------------------------------------------------------------------
def test_code_tokenizer_splits_identifiers_and_keeps_the_whole():
    tok = Tokenizer("auto-v1", stem=False)
    assert tok.code("parseHTTPResponse2 snake_case_name") == [
        "parsehttpresponse2", "parse", "http", "response", "2",
        "snakecasename", "snake", "case", "name"]
    assert tok.code("utf8Decode") == ["utf8decode", "utf", "8", "decode"]
    assert tok.code("dry-run __init__ IOError") == [
        "dryrun", "dry", "run", "init", "ioerror", "io", "error"]
    assert tok.code("a + b; // -> ()") == []  # punctuation and single letters yield nothing
    # keywords are content in code: English stopwords are kept
    assert tok.code("if x is not None") == ["if", "is", "not", "none"]
    # a letter/digit mix is split in documents but stays one term in queries
    assert tok.code("int32") == ["int32", "int", "32"]
    assert tok.code("int32", query=True) == ["int32"]


def test_split_identifier_and_compounds():
    assert split_identifier("parseHTTPResponse2") == ["parse", "HTTP", "Response", "2"]
    assert split_identifier("ÄpfelBaum_größe") == ["Äpfel", "Baum", "größe"]
    assert [is_compound(w) for w in ("parseDuration", "snake_case", "utf8Decode", "p53",
                                      "H3K27me3", "Hello", "_private")] == [
        True, True, True, False, False, False, False]


def test_prose_tokenizer_unicode_stopwords_and_stemming():
    plain = Tokenizer("auto-v1", stem=False)
    assert plain.prose("The naïve café in Straße, 東京 and 1 of 2 snake_case") == [
        "naïve", "café", "straße", "東京", "snake", "case"]
    stem = Tokenizer("auto-v1", stem=True)
    assert stem.prose("Running tests quickly") == ["run", "test", "quick"]
    # a word whose stem is a stopword's stem is dropped too ("having" -> "have")
    assert stem.prose("having fun") == ["fun"]


def test_latex_macros_are_normalised():
    tok = Tokenizer("auto-v1", stem=False)
    assert tok.latex(r"\frac{a}{b} + \alpha_{ij} % a comment \beta") == ["frac", "alpha", "ij"]
    assert tok.latex(r"\section{Timebox analysis} \label{sec:tb}") == [
        "timebox", "analysis", "sec", "tb"]
    assert tok.latex(r"costs 50\% less: $\sum_{i} x_i \le T$") == [
        "costs", "50", "less", "sum", "le"]


def test_query_reads_prose_and_code():
    tok = Tokenizer("auto-v1", stem=True)
    q = tok.query("parseDuration")
    assert q == ["parsedur", "pars", "durat"]
    assert set(q) <= set(tok.code("def parse_duration(text):"))
    assert tok.query("check if a variable is iterable") == [
        "check", "variabl", "iter", "if", "is"]  # prose reading, then code's keywords
    assert Tokenizer("prose-v1", stem=False).query("parseDuration if") == ["parseduration"]


def test_settings_are_named_and_versioned(tmp_path):
    assert Tokenizer("auto-v1", stem=True).key == "auto-v1+stem"
    assert Tokenizer("plain-v1", stem=False).key == "plain-v1"
    with pytest.raises(ConfigError, match="unknown bm25 tokenizer setting"):
        Tokenizer("auto-v9")
    (tmp_path / "c").mkdir()
    a = BM25Layer(_ctx(tmp_path, {"bm25_tokenizer": "auto-v1"}))
    b = BM25Layer(_ctx(tmp_path, {"bm25_tokenizer": "prose-v1", "bm25_stem": False}))
    assert "+tauto-v1+stem" in a.build_version and "+tprose-v1+s" in b.build_version


def _ctx(tmp_path, config):
    eng = lar.open(tmp_path / "c", state=tmp_path / "s")
    eng.close()
    return lar.LayerContext(root=eng.root, state_dir=tmp_path / "s", index=eng.index,
                            reader=eng.reader, config=config)


@pytest.mark.parametrize("cfg, match", [({"bm25_method": "bm26"}, "bm25_method"),
                                        ({"bm25_k1": -1}, "bm25_k1"),
                                        ({"bm25_idf": "corpus"}, "bm25_idf"),
                                        ({"bm25_stem": "yes"}, "bm25_stem")])
def test_bad_config_is_a_config_error(tmp_path, cfg, match):
    (tmp_path / "c").mkdir()
    with pytest.raises(ConfigError, match=match):
        BM25Layer(_ctx(tmp_path, cfg))


def test_query_must_be_text():
    for bad in ("", "   ", None, {"text": "x"}, 3):
        with pytest.raises(QueryError):
            parse_query(bad)


# -- chunks and sub-spans -------------------------------------------------------------------
def test_code_chunks_cut_at_top_level_blank_lines():
    src = (b"import os\n\n\ndef parse_duration(text):\n    x = 1\n\n    return float(text)\n\n\n"
           b"class Formatter:\n    def size(self, n):\n        return n\n")
    # bytes 0-12 the import, 12-74 the function (its inner blank line is no cut), 74-131 the class
    assert code_chunks(src, 40, 8000) == [(0, 12), (12, 74), (74, 131)]
    assert code_chunks(src, 100, 8000) == [(0, 74), (74, 131)]


def test_highlighter_marks_words_parts_and_stems():
    tok = Tokenizer("auto-v1", stem=True)
    data = b"x = parse_duration(v)  # parseDuration handles durations"
    spans = Highlighter(*tok.surface("parseDuration")).find(data, 0, len(data))
    assert [data[s:e] for s, e in spans] == [b"parse", b"duration", b"parseDuration",
                                             b"durations"]
    uni = "Grüße aus Köln: Straße".encode()
    (s, e), = Highlighter(*tok.surface("straße")).find(uni, 0, len(uni))
    assert uni[s:e] == "Straße".encode()


# -- the layer in an engine -----------------------------------------------------------------
@pytest.fixture
def registered():
    before = set(lar.registered_layers())
    lar.register_layer(BM25Layer)
    yield
    if "bm25" not in before:
        unregister_layer("bm25")


PROSE = (b"Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda.\n\n"
         b"Zebras and quokkas live with wombats near the platypus river.\n\n"
         b"Final notes about nothing in particular here.\n")
CODE_A = "def parse_duration(text):\n    return float(text)\n"
CODE_B = "def format_size(n):\n    return str(n) + ' bytes'\n"
NOTES = "Wombats dig burrows. Quokkas smile.\n"
STILL = {"bm25_max_deltas": 1000, "bm25_delta_fraction": 1e9, "bm25_dead_fraction": 1e9}


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "folder"
    root.mkdir()
    (root / "animals.txt").write_bytes(PROSE)
    (root / "dur.py").write_text(CODE_A)
    (root / "size.py").write_text(CODE_B)
    (root / "notes.md").write_text(NOTES)
    return root


def _open(folder, tmp_path, **cfg):
    eng = lar.open(folder, state=tmp_path / "state", config={"bm25_chunk_bytes": 64, **cfg})
    eng.build(timebox=60, layers=["bm25"])
    return eng


def _bm25(eng, query, k=10):
    return eng.search(query, layers=["bm25"], k=k, timebox=10).hits


def test_top_hit_is_the_known_chunk_with_its_byte_span(registered, folder, tmp_path):
    with _open(folder, tmp_path) as eng:
        top = _bm25(eng, "platypus river")[0]
        # chunks of animals.txt at 64 bytes: [0, 65), [65, 129), [129, 175) (shared chunker)
        assert (top.path, top.span.start, top.span.end) == ("animals.txt", 65, 129)
        ev = top.evidence["bm25"]
        assert ev.score_kind == "bm25 (global idf over segments)" and ev.rank == 1
        assert [PROSE[s:e] for s, e in ev.sub_spans] == [b"platypus", b"river"]


def test_camel_case_query_finds_snake_case_code(registered, folder, tmp_path):
    with _open(folder, tmp_path) as eng:
        hits = _bm25(eng, "parseDuration")
        assert hits[0].path == "dur.py" and len(hits) == 1
        data = CODE_A.encode()
        assert [data[s:e] for s, e in hits[0].evidence["bm25"].sub_spans] == [b"parse", b"duration"]


def test_an_edit_reindexes_only_that_unit_into_a_delta(registered, folder, tmp_path):
    with _open(folder, tmp_path, **STILL) as eng:
        layer = eng.layers["bm25"]
        assert layer.index.layout.main and not layer.index.layout.deltas
        calls = []
        orig = layer.index_unit
        layer.index_unit = lambda unit, doc: calls.append(unit.path) or orig(unit, doc)
        old = eng.index.get_many(["size.py"])["size.py"].hash
        (folder / "size.py").write_text(CODE_B.replace("format_size", "human_readable_size"))
        hits = _bm25(eng, "humanReadableSize")
        assert calls == ["size.py"]
        assert hits and hits[0].path == "size.py" and hits[0].hash != old
        assert len(layer.index.layout.deltas) == 1
        assert layer.built()[old] == "ok"  # the old unit is still built: filtered, not re-indexed
        assert all(h.hash != old for h in _bm25(eng, "format_size"))


def test_a_deleted_file_never_appears_even_before_a_merge(registered, folder, tmp_path):
    with _open(folder, tmp_path, **STILL) as eng:
        layer = eng.layers["bm25"]
        main_before = layer.index.layout.main
        assert {h.path for h in _bm25(eng, "wombats quokkas")} == {"animals.txt", "notes.md"}
        (folder / "notes.md").unlink()
        assert {h.path for h in _bm25(eng, "wombats quokkas")} == {"animals.txt"}
        eng.build(timebox=60, layers=["bm25"])  # garbage-collects the unit's artefacts
        assert layer.index.layout.main == main_before  # no merge: the doc is a tombstone
        assert {h.path for h in _bm25(eng, "wombats quokkas")} == {"animals.txt"}


def test_a_merge_leaves_results_the_same(registered, folder, tmp_path):
    with _open(folder, tmp_path, **STILL) as eng:
        layer = eng.layers["bm25"]
        (folder / "extra.py").write_text("def wombat_counter(burrows):\n    return burrows\n")
        (folder / "notes.md").write_text(NOTES + "Platypus too.\n")
        before = {q: [(h.path, h.span.start, h.span.end) for h in _bm25(eng, q)]
                  for q in ("wombat burrows", "platypus", "parse duration")}
        assert len(layer.index.layout.deltas) == 1
        layer.merge()
        assert not layer.index.layout.deltas
        after = {q: [(h.path, h.span.start, h.span.end) for h in _bm25(eng, q)] for q in before}
        # the same chunks are found; their order may change, since before the merge the delta's
        # docs were scored with the delta's own IDF (see the global-IDF test below)
        assert {q: sorted(v) for q, v in after.items()} == {q: sorted(v) for q, v in before.items()}
        assert after["parse duration"] == before["parse duration"] == [("dur.py", 0, 49)]


def test_with_global_idf_a_merge_leaves_the_order_the_same(registered, folder, tmp_path):
    with _open(folder, tmp_path, bm25_idf="global", **STILL) as eng:
        layer = eng.layers["bm25"]
        (folder / "extra.py").write_text("def wombat_counter(burrows):\n    return burrows\n")
        (folder / "notes.md").write_text(NOTES + "Platypus too.\n")
        queries = ("wombat burrows", "platypus", "parse duration")
        before = {q: [(h.path, h.span.start, h.span.end) for h in _bm25(eng, q)] for q in queries}
        assert len(layer.index.layout.deltas) == 1
        layer.merge()
        after = {q: [(h.path, h.span.start, h.span.end) for h in _bm25(eng, q)] for q in queries}
        assert after == before


def test_deltas_are_compacted_and_merged_by_policy(registered, folder, tmp_path):
    with _open(folder, tmp_path, bm25_max_deltas=1, bm25_delta_fraction=1e9,
               bm25_dead_fraction=1e9) as eng:
        layer = eng.layers["bm25"]
        for i in range(3):
            (folder / f"new{i}.txt").write_text(f"marker{i} words here\n")
            assert _bm25(eng, f"marker{i}")[0].path == f"new{i}.txt"
            layer.index.wait(10)
        assert len(layer.index.layout.deltas) <= 2
        assert all(_bm25(eng, f"marker{i}")[0].path == f"new{i}.txt" for i in range(3))


def test_a_corrupt_segment_is_detected_and_rebuilt(registered, folder, tmp_path):
    with _open(folder, tmp_path) as eng:
        seg_dir = eng.layers["bm25"].index.store.seg_dir / eng.layers["bm25"].index.layout.main
    data = seg_dir / "data.csc.index.npy"
    data.write_bytes(b"\x00garbage" + data.read_bytes()[8:])
    with lar.open(folder, state=tmp_path / "state", config={"bm25_chunk_bytes": 64}) as eng:
        hits = _bm25(eng, "parseDuration")
        assert hits and hits[0].path == "dur.py"
        layer = eng.layers["bm25"]
        assert not seg_dir.exists() and layer.index.layout.main != seg_dir.name
        assert any("failed its checks" in n for n in layer.index.notes)
        shutil.rmtree(layer.index.store.seg_dir / layer.index.layout.main)  # a vanished folder
    with lar.open(folder, state=tmp_path / "state", config={"bm25_chunk_bytes": 64}) as eng:
        assert _bm25(eng, "platypus")[0].path == "animals.txt"


def test_lost_unit_artefacts_are_rebuilt(registered, folder, tmp_path):
    with _open(folder, tmp_path) as eng:
        layer = eng.layers["bm25"]
        h = eng.index.get_many(["dur.py"])["dur.py"].hash
        layer.units.drop([h])
        layer.merge()  # the merge finds no terms for dur.py: it is pending again
        assert h not in layer.built()
        eng.build(timebox=60, layers=["bm25"])
        assert _bm25(eng, "parse_duration")[0].path == "dur.py"


def test_many_new_units_are_indexed_in_the_background(registered, folder, tmp_path):
    with lar.open(folder, state=tmp_path / "state", config={"bm25_sync_units": 1}) as eng:
        layer = eng.layers["bm25"]
        for u in eng.scope_view().units():
            layer.build_one(u)  # built per unit (as the background builder does): no segment yet
        budget = Budget.seconds(10, pool=10)
        first = asyncio.run(layer.search("platypus", eng.scope_view(), budget))
        assert budget.coverage < 1.0 and any("being added to a segment" in n for n in budget.report().notes)
        layer.index.wait(30)
        budget = Budget.seconds(10, pool=10)
        hits = asyncio.run(layer.search("platypus", eng.scope_view(), budget))
        animals = eng.index.get_many(["animals.txt"])["animals.txt"].hash
        assert budget.coverage == 1.0 and hits[0].hash == animals
        assert first == [] or first[0].hash == animals


def test_a_new_tokenizer_setting_rebuilds_lazily(registered, folder, tmp_path):
    with _open(folder, tmp_path) as eng:
        old_main = eng.layers["bm25"].index.layout.main
    cfg = {"bm25_chunk_bytes": 64, "bm25_tokenizer": "prose-v1"}
    with lar.open(folder, state=tmp_path / "state", config=cfg) as eng:
        layer = eng.layers["bm25"]
        assert layer.status(eng.scope_view()).coverage == 0.0
        assert layer.index.layout.main is None  # the old layout belongs to another setting
        eng.build(timebox=60, layers=["bm25"])
        assert layer.index.layout.main not in (None, old_main)
        assert not (layer.index.store.seg_dir / old_main).exists()
        assert _bm25(eng, "parse_duration")[0].path == "dur.py"


def test_a_missing_package_skips_units_and_fails_searches_with_the_install_hint(
        registered, folder, tmp_path, monkeypatch):
    import lar.layers.bm25 as mod

    monkeypatch.setattr(mod, "missing_dependency", lambda stem: "bm25s")
    with lar.open(folder, state=tmp_path / "state") as eng:  # opening never fails
        layer = eng.layers["bm25"]
        eng.build(timebox=60, layers=["bm25"])
        assert set(layer.built().values()) == {"skipped"}
        assert "lar[lexical]" in layer.status(eng.scope_view()).notes
        res = eng.search("platypus", layers=["bm25"], timebox=5)
        run, = [r for r in res.runs if r.name == "bm25"]
        assert run.state.value == "failed" and "lar[lexical]" in run.reason
        old_version = layer.build_version
    monkeypatch.undo()
    with lar.open(folder, state=tmp_path / "state") as eng:  # installed now: rebuilt lazily
        layer = eng.layers["bm25"]
        assert layer.build_version != old_version
        assert layer.status(eng.scope_view()).coverage == 0.0


def test_units_without_terms_are_skipped(registered, folder, tmp_path):
    (folder / "ops.txt").write_text("+ - * / = ; a b c\n")
    with _open(folder, tmp_path) as eng:
        h = eng.index.get_many(["ops.txt"])["ops.txt"].hash
        assert eng.layers["bm25"].built()[h] == "skipped"


def test_global_idf_weights_by_hand(tmp_path):
    store = SegmentStore(tmp_path, SegmentParams("k"))
    big = store.build([("a" * 32, [(0, 1), (1, 2), (2, 3)], [["x", "y"], ["y"], ["y", "z"]])])
    small = store.build([("b" * 32, [(0, 1)], [["x"]])])
    w_big, w_small = global_weights([big, small], ["x", "y"], "lucene")
    # over 4 docs: x in 2 -> ln(1 + 2.5/2.5) = ln 2; y in 3 -> ln(1 + 1.5/3.5)
    # big alone (3 docs): x in 1 -> ln(1 + 2.5/1.5); y in 3 -> ln(1 + 0.5/3.5); small: x in 1 of 1
    assert w_big["x"] == pytest.approx(math.log(2) / math.log(1 + 2.5 / 1.5))
    assert w_big["y"] == pytest.approx(math.log(1 + 1.5 / 3.5) / math.log(1 + 0.5 / 3.5))
    assert w_small == {"x": pytest.approx(math.log(2) / math.log(1 + 0.5 / 1.5))}


def test_global_idf_ranks_a_fresh_delta_like_one_segment(registered, folder, tmp_path):
    with _open(folder, tmp_path, bm25_idf="global", **STILL) as eng:
        (folder / "fresh.txt").write_text("platypus platypus river delta\n")
        hits = _bm25(eng, "platypus")
        assert hits[0].path == "fresh.txt"
        assert hits[0].evidence["bm25"].score_kind == "bm25 (global idf over segments)"


def test_stale_temp_folders_are_removed(tmp_path):
    (tmp_path / "segments" / ".tmp-123").mkdir(parents=True)
    SegmentStore(tmp_path, SegmentParams("k"))
    assert not (tmp_path / "segments" / ".tmp-123").exists()


def test_search_reports_coverage_and_honours_an_expired_budget(registered, folder, tmp_path):
    with _open(folder, tmp_path) as eng:
        layer = eng.layers["bm25"]
        budget = Budget.seconds(0.0, pool=10)
        hits = asyncio.run(layer.search("wombats", eng.scope_view(), budget))
        assert hits == [] and budget.coverage == 1.0 and budget.report().partial

# The layer is registered through pyproject's entry points, so tests/contract runs the
# contract suite against it with every other registered layer.


def test_segment_moments_cover_every_allowed_doc_zeros_included(tmp_path):
    from lar.core.background import ScoreMoments

    store = SegmentStore(tmp_path, SegmentParams("k"))
    seg = store.build([("a" * 32, [(0, 1), (1, 2), (2, 3)], [["x", "y"], ["y"], ["z"]]),
                       ("b" * 32, [(0, 1)], [["x", "x"]])])
    full = np.asarray(seg.model.get_scores(["x", "y"]), dtype=np.float64)  # bm25s's own scores
    m = ScoreMoments()
    top = seg.search(["x", "y"], 2, {"a" * 32, "b" * 32}, moments=m)
    plain = seg.search(["x", "y"], 2, {"a" * 32, "b" * 32})  # bm25s retrieve: the same top
    assert [i for _, i in top] == [i for _, i in plain] and len(top) == 2
    assert [s for s, _ in top] == pytest.approx([s for s, _ in plain])
    bg = m.result()
    assert bg.n == 4 and bg.mean == pytest.approx(full.mean(), rel=1e-5)
    assert bg.std == pytest.approx(full.std(), rel=1e-5)
    m = ScoreMoments()  # only the allowed unit's docs
    seg.search(["x", "y"], 2, {"a" * 32}, moments=m)
    assert m.n == 3 and m.s1 == pytest.approx(full[:3].sum(), rel=1e-5)


def test_the_layer_reports_its_background_on_the_run_probe(registered, folder, tmp_path):
    with _open(folder, tmp_path) as eng:
        res = eng.search("wombats quokkas", layers=["bm25"], k=5, timebox=10)
        bg = res.run("bm25").probe["background"]
        n_chunks = sum(s.n_docs for s in eng.layers["bm25"].index.segments())
        assert bg["n"] == n_chunks and bg["std"] > 0 and bg["mean"] > 0
