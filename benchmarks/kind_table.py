"""The per-kind tables of a ``lar_evals beir`` run, in Markdown, with paired tests per kind.

Reads the run's JSON summary (``--out``) and its per-query table (``--per-query``) and prints:
nDCG@10 of every route, two offline policies and the default per query type, found@10 per route
(the share of the kind's queries with a relevant document in the first 10), how often grep's
first hit is relevant, and per kind the harness's own paired tests
(``lar_evals.significance.paired_tests``: paired t-test, bootstrap CI, Holm within the kind's
comparisons) of the comparisons asked for.

    python benchmarks/kind_table.py run.json run.tsv --compare dense/bm25,dense/grep,static/bm25
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

POLICIES = ("adaptive", "rrf")


def _label(name: str, routes) -> str:
    if name == "default" or ":" in name:
        return name
    return f"route:{name}" if name in routes else f"fusion:{name}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summary")
    ap.add_argument("per_query")
    ap.add_argument("--compare", default="dense/bm25,dense/grep,static/bm25",
                    help="A/B pairs of routes, policies or default")
    ap.add_argument("--metric", default="ndcg@10")
    a = ap.parse_args(argv)
    from lar_evals.significance import paired_tests

    s = json.loads(Path(a.summary).read_text(encoding="utf-8"))
    routes = list(s["routes"])
    with open(a.per_query, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    by_type = s["per_type"]["by_type"]
    m = a.metric
    head = ["type", "n", *routes, *POLICIES, "default", *(f"{r} found@10" for r in routes)]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for kind, t in sorted(by_type.items()):
        cells = [kind, str(t["n_queries"])]
        cells += [f"{t['routes'][r][m]:.3f}" for r in routes]
        cells += [f"{t['fusion'][p][m]:.3f}" for p in POLICIES]
        cells.append(f"{t['default'][m]:.3f}")
        cells += [f"{t['found_at_10'][f'route:{r}']:.2f}" for r in routes]
        print("| " + " | ".join(cells) + " |")
    if "grep" in routes:
        first = []
        for kind in sorted(by_type):
            ks = [r for r in rows if r["type"] == kind]
            n = sum(float(r["route:grep mrr@10"]) == 1.0 for r in ks)
            first.append(f"{kind} {n}/{len(ks)} ({100 * n / max(1, len(ks)):.0f}%)")
        print("\ngrep alone, first hit relevant (mrr@10 = 1): " + ", ".join(first))
    pairs = [tuple(_label(x, routes) for x in p.split("/")) for p in a.compare.split(",") if p]
    print(f"\nPaired tests per kind ({m}; student t, bootstrap 95 % CI, Holm within each kind):\n")
    print("| type | a | b | delta [95% CI] | d_z | wins/losses/ties | p | p adjusted |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in sorted(by_type):
        ks = [r for r in rows if r["type"] == kind]
        qids = [r["qid"] for r in ks]
        per_query: dict = {}
        for name in {x for p in pairs for x in p}:
            per_query[name] = {m: {r["qid"]: float(r[f"{name} {m}"]) for r in ks}}
        res = paired_tests(per_query, pairs, [m], qids)
        for t in res["tests"]:
            p = "-" if t["p_value"] is None else f"{t['p_value']:.3g}"
            padj = "-" if t["p_adjusted"] is None else f"{t['p_adjusted']:.3g}"
            dz = "-" if t["d_z"] is None else f"{t['d_z']:.2f}"
            print(f"| {kind} | {t['a']} | {t['b']} | {t['delta']:+.3f} [{t['ci_low']:+.3f}, "
                  f"{t['ci_high']:+.3f}] | {dz} | {t['wins']}/{t['losses']}/{t['ties']} | {p} | "
                  f"{padj}{' *' if t['significant'] else ''} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
