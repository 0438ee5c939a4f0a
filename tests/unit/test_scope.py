import os

import pytest

from lar.core.errors import ScopeError
from lar.core.scope import Scope, normalize_relpath
from lar.core.timebox import parse_duration
from lar.core.errors import ConfigError


def test_scope_globs():
    s = Scope(include=("src/**", "*.md"), exclude=("src/vendor/**",))
    assert s.matches("src/a.py")
    assert s.matches("docs/x.md")
    assert not s.matches("src/vendor/x.py")
    assert not s.matches("lib/a.py")
    assert Scope.parse(None).is_everything
    assert Scope.parse("src/**").include == ("src/**",)
    with pytest.raises(ScopeError):
        Scope.parse({"includes": ["x"]})
    with pytest.raises(ScopeError):
        Scope(include=("../etc/**",))


def test_paths_are_confined_to_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("x")
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    os.symlink(outside, root / "link.txt")
    assert normalize_relpath(root, "a/f.txt") == "a/f.txt"
    assert normalize_relpath(root, str(root / "a" / "f.txt")) == "a/f.txt"
    assert normalize_relpath(root, "./a//f.txt") == "a/f.txt"
    with pytest.raises(ScopeError, match=r"'\.\.'"):
        normalize_relpath(root, "a/../../secret.txt")
    with pytest.raises(ScopeError, match="outside"):
        normalize_relpath(root, str(outside))
    with pytest.raises(ScopeError, match="symlink"):
        normalize_relpath(root, "link.txt")


@pytest.mark.parametrize("text,secs", [("200ms", 0.2), ("1.5s", 1.5), ("2m", 120.0), (0.25, 0.25), ("3", 3.0)])
def test_parse_duration(text, secs):
    assert parse_duration(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["", "fast", "-1s", 0, -2, "1h", True])
def test_parse_duration_rejects(bad):
    with pytest.raises(ConfigError):
        parse_duration(bad)
