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
