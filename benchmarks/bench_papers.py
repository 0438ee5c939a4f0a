#!/usr/bin/env python
"""Papers benchmark: LaTeX structure and chunking, PDF extraction and PDF text coverage.

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_papers.py [--corpus /work/shared/corpora/papers]
        [--out benchmarks/results/DATE-papers]

Every sub-folder of the corpus is one paper; its files are read at run time (nothing copied).

1. every ``.tex`` file: ``lar.store.extract.extract`` (with a resolver reading the paper's folder),
   ``lar.layers.kits.chunking.chunk`` with the default target, and the atomic blocks by category (inline
   and display formulas, math environments, theorem-like environments, proofs, algorithms,
   code/verbatim) with how many of them a chunk splits (goal: 0); also environments declared
   theorem-like in another file of the paper but not recognised in the file that uses them,
   includes (resolved or not) and notes;
2. every PDF: pages, pages with text, extracted characters, extraction time;
3. coverage: the fraction of the distinct alphabetic words (length >= 5, lower case) of the
   LaTeX source behind the PDF (the main file whose stem matches the PDF, else every main
   file, plus the files it includes) that occur in the PDF text; raw, and after NFKC and
   joining words hyphenated at line ends.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import re
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

from lar.layers.kits.chunking import chunk, split_atomic_count
from lar.store.extract import Document, extract
from lar.store.extract.latex import mask, theorem_names

MATH_ENVS = {"equation", "align", "alignat", "flalign", "gather", "multline", "eqnarray",
             "displaymath", "math", "dmath"}
PROOF_ENVS = {"proof"}
ALGO_ENVS = {"algorithm", "algorithmic", "algorithm2e"}
CODE_ENVS = {"verbatim", "Verbatim", "BVerbatim", "LVerbatim", "lstlisting", "minted"}
CATEGORIES = ("inline", "display", "math env", "theorem-like", "proof", "algorithm", "code")
_WORD = re.compile(r"[^\W\d_]{5,}")
_CS = re.compile(r"\\[A-Za-z@]+\*?")
# acronym definitions: their long forms reach the PDF only when the acronym is used
_ACRO_DEF = re.compile(r"\\(?:acrodef|acro|newacronym|DeclareAcronym)(?![A-Za-z@])[^\n]*")
_KEY_ARGS = re.compile(r"\\(?:label|ref|eqref|autoref|cref|Cref|pageref|cite[a-zA-Z]*|input|include|"
                       r"includegraphics|usepackage|documentclass|bibliography|bibliographystyle|"
                       r"url|href|begin|end|newcommand|renewcommand|def|hypersetup|"
                       r"graphicspath|addbibresource|acrshort|acrlong|acrfull|ac|gls)\*?"
                       r"(?:\s*\[[^\]]*\])*\s*\{[^{}]*\}")


def category(doc_label: str, kind: str) -> str:
    """Benchmark category of an atomic block."""
    if kind == "formula":
        return "inline" if doc_label == "inline" else "display"
    name = doc_label.rstrip("*")
    if name in MATH_ENVS:
        return "math env"
    if name in PROOF_ENVS:
        return "proof"
    if name in ALGO_ENVS:
        return "algorithm"
    if name in CODE_ENVS:
        return "code"
    return "theorem-like"


def folder_resolver(base: Path):
    """``resolve(relpath)`` over one paper folder (nothing outside it is read)."""
    def resolve(rel: str) -> bytes | None:
        p = (base / rel).resolve()
        if base.resolve() not in p.parents or not p.is_file():
            return None
        return p.read_bytes()
    return resolve


def bench_tex(paper: Path) -> dict:
    """Section 1 for one paper: extract and chunk every .tex file, count atomic blocks."""
    files = sorted(p for p in paper.rglob("*.tex") if p.is_file())
    resolve = folder_resolver(paper)
    declared: set[str] = set()
    for f in files:
        declared |= theorem_names(mask(f.read_bytes(), []))
    out = {"files": len(files), "bytes": 0, "atomic": 0, "split": 0, "chunks": 0,
           "by_category": Counter(), "split_by_category": Counter(), "unrecognised": Counter(),
           "includes": 0, "includes_resolved": 0, "unresolved": [], "notes": [],
           "extract_s": 0.0, "chunk_s": 0.0, "max_chunk": 0, "split_blocks": [], "docs": {}}
    for f in files:
        rel = f.relative_to(paper).as_posix()
        data = f.read_bytes()
        t0 = time.perf_counter()
        doc = extract(rel, data, resolve)
        t1 = time.perf_counter()
        chunks = chunk(doc)
        t2 = time.perf_counter()
        out["docs"][rel] = doc
        out["bytes"] += len(data)
        out["extract_s"] += t1 - t0
        out["chunk_s"] += t2 - t1
        out["chunks"] += len(chunks)
        out["max_chunk"] = max([out["max_chunk"]] + [e - s for s, e in chunks])
        out["split"] += split_atomic_count(doc, chunks)
        for b in doc.blocks:
            if b.atomic:
                cat = category(b.label, b.kind)
                out["atomic"] += 1
                out["by_category"][cat] += 1
                if not any(s <= b.start and b.end <= e for s, e in chunks):
                    out["split_by_category"][cat] += 1
                    out["split_blocks"].append(f"{rel}:{b.start}-{b.end} {b.label}")
            elif b.kind == "environment" and b.label.rstrip("*") in declared:
                out["unrecognised"][b.label] += 1
            if b.kind == "include":
                out["includes"] += 1
                out["includes_resolved"] += b.level
                if not b.level:
                    out["unresolved"].append(f"{rel} -> {b.label}")
        out["notes"] += [f"{rel}: {n}" for n in doc.notes]
    return out


def tex_vocabulary(text: bytes) -> set[str]:
    """Distinct lower-case words (>= 5 letters) of a LaTeX body: comments, the preamble, control
    sequences, acronym definitions and key-like arguments (labels, refs, citations, file names)
    left out."""
    buf = bytes(mask(text, []))
    begin = re.search(rb"\\begin\s*\{document\}", buf)
    if begin is not None:
        buf = buf[begin.end():]
    s = buf.decode("utf-8", errors="replace")
    s = _CS.sub(" ", _KEY_ARGS.sub(" ", _ACRO_DEF.sub(" ", s)))
    return {w.lower() for w in _WORD.findall(s)}


def closure(paper: Path, main: str, docs: dict[str, Document]) -> list[str]:
    """``main`` and every file it includes, transitively (as resolved by the extractor)."""
    seen, todo = [], [main]
    while todo:
        rel = todo.pop()
        if rel in seen or rel not in docs:
            continue
        seen.append(rel)
        todo += [b.label for b in docs[rel].blocks if b.kind == "include" and b.level]
    return seen


def bench_pdf(paper: Path, pdf: Path, docs: dict[str, Document]) -> dict:
    """Sections 2-3 for one PDF: pages, characters and coverage of its LaTeX vocabulary."""
    data = pdf.read_bytes()
    t0 = time.perf_counter()
    doc = extract(pdf.name, data)
    secs = time.perf_counter() - t0
    pages = [b for b in doc.blocks if b.kind == "page"]
    mains = [r for r, d in docs.items() if re.search(rb"\\begin\s*\{document\}", bytes(mask(d.text, [])))]
    stem_mains = [r for r in mains if Path(r).stem == pdf.stem]
    sources: list[str] = []
    for m in stem_mains or mains:
        sources += [r for r in closure(paper, m, docs) if r not in sources]
    vocab: set[str] = set()
    for r in sources:
        vocab |= tex_vocabulary(docs[r].text)
    ptext = doc.text.decode("utf-8", errors="replace")
    raw_words = {w.lower() for w in _WORD.findall(ptext)}
    norm = unicodedata.normalize("NFKC", ptext)
    norm = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", norm)
    norm_words = {w.lower() for w in _WORD.findall(norm)}
    found_raw = len(vocab & raw_words)
    found_norm = len(vocab & norm_words)
    return {"pdf": pdf.relative_to(paper).as_posix(), "bytes": len(data),
            "pages": len(pages), "pages_with_text": sum(1 for b in pages if doc.text[b.start:b.end].strip()),
            "chars": len(ptext), "skipped": doc.skipped, "notes": list(doc.notes),
            "extract_s": round(secs, 3), "sources": sources, "tex_words": len(vocab),
            "found_raw": found_raw, "found_norm": found_norm,
            "coverage_raw": round(found_raw / len(vocab), 4) if vocab else None,
            "coverage": round(found_norm / len(vocab), 4) if vocab else None}


def fmt_md(R: dict) -> str:
    """The Markdown report: one table per measure."""
    L = [f"# lar papers benchmark — {R['date'][:10]}", "",
         f"Corpus: `{R['corpus']}` ({len(R['papers'])} papers, {R['tex_files']} .tex files, "
         f"{R['pdf_files']} PDFs), read in place. Python {R['python']}, pypdf {R['pypdf']}, "
         f"chunker `lar.layers.kits.chunking.chunk` default target. Total run {R['total_s']} s.", "",
         "## 1. LaTeX atomic blocks and chunking (goal: 0 split)", "",
         "| paper | .tex | KB | atomic | split | " + " | ".join(CATEGORIES)
         + " | chunks | max chunk B | extract ms | chunk ms |",
         "|---|" + "---|" * (8 + len(CATEGORIES))]
    tot = Counter()
    for name, P in R["papers"].items():
        T = P["tex"]
        cats = " | ".join(str(T["by_category"].get(c, 0)) for c in CATEGORIES)
        L.append(f"| {name} | {T['files']} | {T['bytes'] / 1024:.0f} | {T['atomic']} | {T['split']} "
                 f"| {cats} | {T['chunks']} | {T['max_chunk']} | {T['extract_s'] * 1000:.0f} "
                 f"| {T['chunk_s'] * 1000:.0f} |")
        tot.update({"files": T["files"], "atomic": T["atomic"], "split": T["split"],
                    "chunks": T["chunks"]})
        tot.update({c: T["by_category"].get(c, 0) for c in CATEGORIES})
    L.append(f"| **all** | {tot['files']} | | {tot['atomic']} | {tot['split']} | "
             + " | ".join(str(tot[c]) for c in CATEGORIES) + f" | {tot['chunks']} | | | |")
    L += ["", "## 2. Theorem-like environments not recognised in the file that uses them", "",
          "Declared (\\newtheorem, \\declaretheorem, ...) in another file of the paper, used in a "
          "file that neither declares nor includes the declaration: not atomic there.", "",
          "| paper | environment: uses |", "|---|---|"]
    any_u = False
    for name, P in R["papers"].items():
        if P["tex"]["unrecognised"]:
            any_u = True
            L.append(f"| {name} | {', '.join(f'{k}: {v}' for k, v in sorted(P['tex']['unrecognised'].items()))} |")
    if not any_u:
        L.append("| (none) | |")
    L += ["", "## 3. Includes and notes", "", "| paper | includes | resolved | unresolved | notes |",
          "|---|---|---|---|---|"]
    for name, P in R["papers"].items():
        T = P["tex"]
        L.append(f"| {name} | {T['includes']} | {T['includes_resolved']} | "
                 f"{'; '.join(T['unresolved']) or '-'} | {len(T['notes'])} |")
    L += ["", "## 4. PDF extraction", "",
          "| paper | pdf | KB | pages | pages with text | chars | skipped | extract ms |",
          "|---|---|---|---|---|---|---|---|"]
    pdfs = [(n, d) for n, P in R["papers"].items() for d in P["pdfs"]]
    for name, D in pdfs:
        L.append(f"| {name} | {D['pdf']} | {D['bytes'] / 1024:.0f} | {D['pages']} | {D['pages_with_text']} "
                 f"| {D['chars']} | {D['skipped'] or '-'} | {D['extract_s'] * 1000:.0f} |")
    L += ["", "## 5. PDF text coverage of the LaTeX vocabulary", "",
          "Distinct words (>= 5 letters, lower case) of the LaTeX body (comments, preamble, control "
          "sequences, acronym definitions, labels/refs/citations/file names removed) behind the "
          "PDF, found in the PDF "
          "text; *normalised* = NFKC (ligatures) and words hyphenated at line ends joined.", "",
          "| paper | LaTeX sources | words | coverage raw | coverage normalised |",
          "|---|---|---|---|---|"]
    for name, D in pdfs:
        cov = "-" if D["coverage"] is None else f"{D['coverage']:.3f}"
        raw = "-" if D["coverage_raw"] is None else f"{D['coverage_raw']:.3f}"
        L.append(f"| {name} | {len(D['sources'])} files | {D['tex_words']} | {raw} | {cov} |")
    covs = [D["coverage"] for _, D in pdfs if D["coverage"] is not None]
    if covs:
        L.append(f"| **mean** | | | | {sum(covs) / len(covs):.3f} |")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="/work/shared/corpora/papers")
    ap.add_argument("--out", default=f"benchmarks/results/{_dt.date.today().isoformat()}-papers")
    args = ap.parse_args(argv)
    import pypdf

    t0 = time.perf_counter()
    corpus = Path(args.corpus)
    R: dict = {"date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
               "corpus": str(corpus), "python": sys.version.split()[0],
               "platform": platform.platform(), "pypdf": pypdf.__version__, "papers": {}}
    for paper in sorted(p for p in corpus.iterdir() if p.is_dir()):
        tex = bench_tex(paper)
        docs = tex.pop("docs")
        pdfs = [bench_pdf(paper, p, docs) for p in sorted(paper.rglob("*.pdf"))]
        tex["by_category"] = dict(tex["by_category"])
        tex["split_by_category"] = dict(tex["split_by_category"])
        tex["unrecognised"] = dict(tex["unrecognised"])
        R["papers"][paper.name] = {"tex": tex, "pdfs": pdfs}
        print(f"{paper.name}: atomic {tex['atomic']} split {tex['split']}; "
              + ", ".join(f"{d['pdf']} {d['pages']}p cov {d['coverage']}" for d in pdfs), flush=True)
    R["tex_files"] = sum(P["tex"]["files"] for P in R["papers"].values())
    R["pdf_files"] = sum(len(P["pdfs"]) for P in R["papers"].values())
    R["atomic"] = sum(P["tex"]["atomic"] for P in R["papers"].values())
    R["split"] = sum(P["tex"]["split"] for P in R["papers"].values())
    R["total_s"] = round(time.perf_counter() - t0, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(R, indent=1, ensure_ascii=False) + "\n")
    out.with_suffix(".md").write_text(fmt_md(R))
    print(f"atomic {R['atomic']} split {R['split']}; wrote {out}.json/.md in {R['total_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
