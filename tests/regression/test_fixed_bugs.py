"""Regression tests, each named after what broke."""
import lar
from lar.store import FileIndex
from lar.store.scanner import Scanner


def test_skip_record_survives_the_tombstone_it_writes(tmp_path):
    # record_skip used to tombstone after inserting, and the tombstone deleted the skip row
    idx = FileIndex(tmp_path)
    idx.upsert("a.bin", "aa" * 16, 10, 1)
    idx.record_skip("a.bin", "binary", 10, 1)
    assert idx.skipped() == [("a.bin", "binary", 10)]
    assert idx.get("a.bin").deleted


def test_fuzzy_sub_spans_are_byte_offsets_in_non_utf8_text(corpus, tmp_path):
    # decoding with errors="replace" turned one byte into three and shifted every offset
    with lar.open(corpus, state=tmp_path / "s") as eng:
        res = eng.search({"grep": "broken_utf8_marker", "fuzzy": "broken_utf8_marker"}, timebox=5)
        ev = res.hits[0].evidence["fuzzy"]
        (s, e), = ev.sub_spans
        assert eng.read_bytes(res.hits[0].hash, (s, e)) == b"broken_utf8_marker"


def test_names_does_not_return_a_file_deleted_since_the_last_scan(corpus, tmp_path):
    with lar.open(corpus, state=tmp_path / "s") as eng:
        (corpus / "docs" / "fusion.md").unlink()
        res = eng.search({"names": {"glob": "docs/*.md"}}, timebox=5)
        assert res.hits == ()


def test_binary_file_unchanged_is_not_reread_on_every_scan(corpus, tmp_path):
    idx = FileIndex(tmp_path)
    Scanner(corpus, idx).scan()
    rep = Scanner(corpus, idx).scan()
    assert rep.hashed_bytes == 0 and ("blob.bin", "binary (NUL byte in the first 8 KiB)") in rep.skipped


def test_fresh_index_creation_commits_its_schema(tmp_path):
    # executescript() inside our transaction used to fail with "no transaction is active"
    FileIndex(tmp_path).upsert("x", "ab" * 16, 1, 1)
    assert FileIndex(tmp_path).get("x").hash == "ab" * 16


def test_same_size_edit_with_restored_mtime_is_detected(corpus, tmp_path):
    # change detection compared size and mtime only: `cp -p`/`rsync -t` style edits were missed
    import os

    from lar.store import content_hash

    with lar.open(corpus, state=tmp_path / "s") as eng:
        path = corpus / "docs" / "fusion.md"
        st = os.stat(path)
        old = path.read_bytes()
        new = old.replace(b"Reciprocal", b"Reciprocol")  # same size
        path.write_bytes(new)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # restore the old mtime
        eng.index_now()
        assert eng.index.get("docs/fusion.md").hash == content_hash(new)
        hit = eng.search("Reciprocol", timebox=5, layers=["grep"]).hits[0]
        assert hit.hash == content_hash(new)


def test_cancelled_search_stops_its_layers(corpus, tmp_path):
    # cancelling asearch from outside used to leave layer tasks (and rg) running
    import asyncio

    from lar.core.layer import BaseLayer
    from lar.core.registry import register_layer, unregister_layer

    state = {"finished": False, "cancelled": False}

    class Sleepy(BaseLayer):
        name = "sleepy"

        async def search(self, query, scope, budget, candidates=None):
            try:
                await asyncio.sleep(1.0)
                state["finished"] = True
            except asyncio.CancelledError:
                state["cancelled"] = True
                raise
            return []

    register_layer(Sleepy)
    try:
        with lar.open(corpus, state=tmp_path / "s") as eng:
            async def go():
                try:
                    await asyncio.wait_for(eng.asearch("x", timebox=5, layers=["sleepy"]), 0.1)
                except asyncio.TimeoutError:
                    pass
                await asyncio.sleep(0.05)

            asyncio.run(go())
        assert state == {"finished": False, "cancelled": True}
    finally:
        unregister_layer("sleepy")


def test_latex_extraction_cache_notices_an_included_file_appearing(tmp_path):
    # the cache key ignored files read through \input, so an include stayed "unresolved"
    root = tmp_path / "c"
    root.mkdir()
    (root / "main.tex").write_text("\\begin{document}\n\\input{part}\n\\end{document}\n")
    with lar.open(root, state=tmp_path / "s") as eng:
        inc = [b for b in eng.document("main.tex").blocks if b.kind == "include"]
        assert [(b.label, b.level) for b in inc] == [("part.tex", 0)]
        (root / "part.tex").write_text("included text\n")
        eng.index_now()
        inc = [b for b in eng.document("main.tex").blocks if b.kind == "include"]
        assert [(b.label, b.level) for b in inc] == [("part.tex", 1)]


def test_chunking_many_atomic_blocks_splits_none():
    # inside_atomic() scanned every block before each newline (13.8 s for 40k inline formulas;
    # now bisection). Speed is tracked in benchmarks/; this checks the result stays right.
    from lar.layers.kits.chunking import chunk, split_atomic_count
    from lar.store.extract import Block, Document

    parts, blocks, pos = [], [], 0
    for i in range(40000):
        line = b"text $x_%d$ more\n" % i
        blocks.append(Block(pos + 5, pos + 5 + len(b"$x_%d$" % i), "formula", atomic=True))
        parts.append(line)
        pos += len(line)
    text = b"".join(parts)
    doc = Document("latex", text, blocks=tuple(blocks))
    chunks = chunk(doc)
    assert split_atomic_count(doc, chunks) == 0
    assert chunks[0][0] == 0 and chunks[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))  # contiguous


def test_index_from_an_older_schema_is_set_aside_and_rebuilt(tmp_path):
    # opening a state dir written by an older lar failed; it is derived data, so rebuild it
    import sqlite3

    db = tmp_path / "index.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema', '1'), ('seq', '7')")
    conn.commit()
    conn.close()
    idx = FileIndex(tmp_path)
    assert idx.migrated_from == "1" and idx.max_seq() == 0
    assert (tmp_path / "index.sqlite.schema-1.bak").exists()
    idx.upsert("a", "ab" * 16, 1, 1)
    assert FileIndex(tmp_path).get("a").hash == "ab" * 16
