"""Long operations show progress bars on stderr when asked, never in stdout's JSON."""
import json

from lar.apps.cli import main
from lar.apps.progress import BuildProgress, wanted


def test_build_shows_one_bar_per_layer_on_stderr_and_json_on_stdout(corpus, tmp_path, capsys):
    code = main(["build", "--root", str(corpus), "--state", str(tmp_path / "s"), "--timebox", "60s",
                 "--layers", "trigram,bm25", "--progress"])
    out, err = capsys.readouterr()
    assert code == 0
    report = json.loads(out)  # stdout is the report alone
    assert report["layers"]["trigram"]["ok"] == 5
    assert "build trigram" in err and "build bm25" in err and "5/5" in err and "unit/s" in err


def test_no_bars_when_not_asked_or_not_a_terminal(corpus, tmp_path, capsys):
    code = main(["build", "--root", str(corpus), "--state", str(tmp_path / "s"), "--timebox", "60s",
                 "--layers", "trigram", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0 and "build trigram" not in err and json.loads(out)["layers"]
    assert wanted(True) and not wanted(False)
    assert wanted(None) is False  # pytest's stderr is not a terminal


def test_the_callback_counts_units():
    import io

    buf = io.StringIO()
    with BuildProgress(stream=buf) as bars:
        bars("bm25", 0, 3)
        bars("bm25", 2, 3)
        bars("bm25", 3, 3)
        bars("dense", 0, 1)
    text = buf.getvalue()
    assert "build bm25" in text and "3/3" in text and "build dense" in text
