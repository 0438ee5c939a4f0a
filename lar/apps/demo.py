"""``lar demo``: a scripted tour of the layers on the embedded corpus (``datasets/demo``).

The corpus (three CC-BY papers, a few prose notes) and lar's own top-level ``.py`` modules (as
``lar-src/``) are copied into ``<workdir>/.lar-demo/corpus``; a file is rewritten only when its
bytes changed, so a second run reuses the state in ``<workdir>/.lar-demo/state``. ``workdir`` is
the repository when it is writable, else the current folder. The dataset's README.md and this
module are left out of the corpus: both quote the demo's queries and would find themselves.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import lar

from lar.core.errors import ConfigError

# (title, query, extra search arguments); the first query's top hit is fetched at the end.
QUERIES: list[tuple[str, Any, dict[str, Any]]] = [
    ("free text: a phrase from a paper", "save the raw data", {}),
    ("an identifier from lar's own source", "parse_duration", {}),
    ("a typo'd phrase: fuzzy refines grep's candidates",
     {"grep": "hexameter", "fuzzy": "dactylic hexamter"}, {}),
    ("a ripgrep regex: section headings about data",
     {"grep": {"regex": r"\\(sub)*section\*?\{[^}]*[Dd]ata"}}, {}),
    ("a names glob: every LaTeX file", {"names": {"glob": "**/*.tex"}}, {}),
    ("free text scoped to papers/**", "neural networks", {"scope": "papers/**"}),
    ("BM25 alone over chunks (code-aware tokens: camelCase finds snake_case)",
     {"bm25": "parseDuration timebox seconds"}, {}),
    ("a symbol: where is Engine.search defined", {"symbols": "Engine.search"}, {}),
    ("who calls parse_duration", {"symbols": {"callers": "parse_duration"}}, {}),
    ("a formula: renamed variables still find the RRF formula",
     {"formula": "\\frac{1}{k + \\mathrm{rank}_s(x)}"}, {}),
    ("an ast-grep pattern: every call of open() with arguments",
     {"structural": "open($$$ARGS)"}, {}),
    ("meaning, not words: exact late interaction (MaxSim), explained token by token",
     {"late": "where should researchers keep the original measurements untouched"},
     {"timebox": 5.0}),
    ("the same question through dense and static vectors, fused",
     {"dense": "where should researchers keep the original measurements untouched",
      "static": "where should researchers keep the original measurements untouched"}, {}),
]
K = 10
FETCH_CONTEXT = 2
#: seconds the default layer variants get to build in one demo run (there are none since
#: dense-e5 became opt-in on 2026-12-02; a variant a layer declares by default gets this slice)
VARIANT_BUILD_S = 30.0
#: the subpackages of lar whose modules the demo corpus holds (as lar-src/<module>.py)
DEMO_SOURCE_PACKAGES = ("core", "engine", "fusion", "record")


def data_dir() -> Path:
    """The shipped demo corpus: ``datasets/demo`` beside the ``lar`` package."""
    return Path(lar.__file__).resolve().parent.parent / "datasets" / "demo"


def default_workdir() -> Path:
    repo = Path(lar.__file__).resolve().parent.parent
    if data_dir().is_dir() and os.access(repo, os.W_OK):
        return repo
    return Path.cwd()


def _sources() -> dict[str, Path]:
    """Relative corpus path -> source file, for the shipped data and lar's own sources."""
    data, pkg = data_dir(), Path(lar.__file__).resolve().parent
    if not data.is_dir():
        raise ConfigError(f"the demo corpus is missing: {data} (run lar demo from a source checkout)")
    files = {p.relative_to(data).as_posix(): p for p in sorted(data.rglob("*"))
             if p.is_file() and p.relative_to(data).as_posix() != "README.md"}
    # lar's contracts, engine, fusion and recording modules only (what were its top-level
    # modules before the layout by concern): the demo stays the same size as the package grows,
    # and every base layer (MiniLM included) builds it in a minute or two (dense-e5 gets its own
    # short slice, see run_demo)
    for sub in DEMO_SOURCE_PACKAGES:
        for p in sorted((pkg / sub).glob("*.py")):
            if p.name != "__init__.py":
                name = "lar-src/" + p.name
                if name in files:
                    raise ConfigError(f"demo sources: two modules named {p.name}")
                files[name] = p
    return files


def assemble(corpus: Path) -> dict[str, int]:
    """Bring ``corpus`` in line with the sources; only changed files are written."""
    files = _sources()
    report = {"files": len(files), "written": 0, "removed": 0}
    for rel, src in files.items():
        dest = corpus / rel
        data = src.read_bytes()
        if dest.is_file() and dest.read_bytes() == data:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        report["written"] += 1
    for p in sorted(corpus.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        rel = p.relative_to(corpus).as_posix()
        if p.is_file() and rel not in files:
            p.unlink()
            report["removed"] += 1
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    return report


def _build(eng, build_timebox: float, variant_timebox: float, progress=None) -> dict[str, Any]:
    """Lazy layers catch up: the base layers first, then the default variants in their own
    (shorter) slice. One report in the shape of ``Engine.build``'s."""
    from lar.engine.variants import default_variants

    defaults = default_variants()
    variants = [n for n in eng.layers if n in defaults]
    base = [n for n in eng.layers if n not in defaults]
    built = eng.build(timebox=build_timebox, layers=base, progress=progress)
    if not variants:
        return built
    # a zero slice (not now) goes to the scheduler itself (Engine.build takes positive
    # durations only): it builds nothing and reports where each variant stands
    more = (eng.build(timebox=variant_timebox, layers=variants, progress=progress)
            if variant_timebox > 0
            else eng.builder.run(0.0, layers=variants))
    return {"timebox": built["timebox"] + more["timebox"],
            "layers": {**built["layers"], **more["layers"]},
            "elapsed": built["elapsed"] + more["elapsed"]}


def _q(query: Any) -> str:
    return query if isinstance(query, str) else json.dumps(query, ensure_ascii=False)


def _print_result(n: int, title: str, query: Any, extra: dict[str, Any], res) -> None:
    scope = f"  scope={extra['scope']!r}" if "scope" in extra else ""
    print(f"\n[{n}] {title}\n    query: {_q(query)}{scope}")
    print(f"    {len(res.hits)} hits in {res.elapsed * 1000:.0f} ms "
          f"(timebox {res.timebox * 1000:.0f} ms, fusion {res.fusion})")
    for i, h in enumerate(res.hits, 1):
        lines = f"{h.lines[0]}-{h.lines[1]}" if h.lines else "?"
        excerpt = h.excerpt if len(h.excerpt) <= 90 else h.excerpt[:89] + "…"
        score = "" if h.score is None else f"{h.score:.3g}  "
        print(f"    {h.rank or i:>2}. {score}{h.path}:{lines}  [{', '.join(h.signals)}]  {excerpt}")
        late = [ev for name, ev in h.evidence.items() if "tokens" in ev.details]
        if late and i <= 3:  # a late-interaction hit: which query tokens matched what
            toks = sorted(late[0].details["tokens"], key=lambda t: -t["contrib"])[:5]
            print("        " + ", ".join(f"{t['q']}->{t['match']!r} {t['contrib']:.2f}" for t in toks))
    print("    layers:")  # the layers the query named or that ran (not every skipped one)
    for r in res.shown_runs():
        cov = "-" if r.coverage is None else f"{r.coverage:.0%}"
        why = f"  ({r.reason})" if r.reason else ""
        print(f"      {r.name:<8} {r.state.value:<8} {r.role:<8} hits {r.contributions:>3}  "
              f"{r.elapsed * 1000:7.1f} ms  coverage {cov}{why}")


def run_demo(timebox: float = 0.5, as_json: bool = False, workdir: str | os.PathLike | None = None,
             build_timebox: float = 300.0, variant_timebox: float = VARIANT_BUILD_S,
             progress: bool | None = None) -> int:
    """Assemble the corpus, search it with the scripted queries, fetch one hit. Returns 0 on success.

    The layers build within ``build_timebox``; the default layer variants then get
    ``variant_timebox`` and carry on where they stopped on the next run or ``lar build`` (a
    slow variant is shown partly built rather than keeping the first run waiting; ``dense-e5``,
    the one there was, is opt-in since 2026-12-02). A slice ends after the unit in progress;
    ``variant_timebox=0`` builds none of them now."""
    if isinstance(variant_timebox, bool) or not isinstance(variant_timebox, (int, float)) \
            or not 0 <= variant_timebox < float("inf"):
        raise ConfigError(f"variant_timebox must be a number of seconds >= 0, got {variant_timebox!r}")
    base = Path(workdir) if workdir is not None else default_workdir()
    cache = base / ".lar-demo"
    corpus = cache / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    synced = assemble(corpus)
    out: dict[str, Any] = {"schema": 1, "corpus": str(corpus), "synced": synced, "timebox": timebox}
    with lar.open(corpus, state=cache / "state") as eng:
        from lar.apps.progress import BuildProgress, wanted

        with BuildProgress(wanted(progress)) as bars:  # a no-op once everything is built
            built = _build(eng, build_timebox, variant_timebox, bars)
        out["build"] = built
        out["warm"] = eng.warm()  # model layers load their models before the timed queries
        status = eng.status()
        out["status"] = status.to_dict()
        if not as_json:
            print(f"lar demo: corpus {corpus} ({synced['files']} files, {synced['written']} "
                  f"written, {synced['removed']} removed)")
            layers = ", ".join(f"{n} {v.get('ok', 0)} units"
                               + (f" ({v['pending']} still to build)" if v.get("pending") else "")
                               for n, v in built["layers"].items())
            print(f"built in {built['elapsed']:.1f} s: {layers}\n")
            if any(v.get("pending") for v in built["layers"].values()):
                print("layers still building answer from what they have (their coverage below); "
                      "the next run, or `lar build`, goes on where they stopped\n")
            print(status)
        results = []
        for n, (title, query, extra) in enumerate(QUERIES, 1):
            res = eng.search(query, k=K, **{"timebox": timebox, **extra})
            results.append(res)
            out.setdefault("queries", []).append(
                {"title": title, "scope": extra.get("scope"), "result": res.to_dict(full=True)})
            if not as_json:
                _print_result(n, title, query, extra, res)
        first = results[0]
        if not first.hits:
            out["fetch"] = None
            msg = f"the first query {QUERIES[0][1]!r} found nothing, so there is no hit to fetch"
            if as_json:
                out["error"] = msg
                print(json.dumps(out, ensure_ascii=False, indent=2, default=str))
            else:
                print(f"\nlar demo: {msg}")
            return 1
        fetched = eng.fetch(first.hits[0].id, context=FETCH_CONTEXT)
        out["fetch"] = fetched.to_dict()
    if as_json:
        print(json.dumps(out, ensure_ascii=False, indent=2, default=str))
    else:
        print(f"\nfetch {first.hits[0].id} (top hit of [1]) with {FETCH_CONTEXT} lines of context:")
        print(fetched)
    return 0
