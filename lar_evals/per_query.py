"""Per-query results, like ``trec_eval -q``: one row per query with its id, type, text and
every metric of every route, policy and the default search.

* :func:`per_query_section`: the summary's ``per_query`` section (``{"metrics", "labels",
  "rows": [{"qid", "type", "text", "values": {label: {metric: value}}}]}``);
* :func:`write_table`: the same as a wide table through polars, one column per
  ``<label> <metric>`` (``.tsv``, ``.csv`` or ``.parquet`` by the file's extension);
* :func:`wins_losses`: the queries where one list beats another most, and loses most.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from lar_evals.errors import EvalConfigError

if TYPE_CHECKING:  # pragma: no cover
    from lar_evals.data import BeirData
    from lar_evals.evaluation import BeirEvaluation

FORMATS = (".tsv", ".csv", ".parquet")

__all__ = ["FORMATS", "column", "per_query_section", "to_frame", "wins_losses", "write_table"]


def per_query_section(ev: "BeirEvaluation", data: "BeirData", labels: Sequence[str],
                      metrics: Sequence[str], digits: int = 4) -> dict[str, Any]:
    """Every scored query with its metric values per label (rounded to ``digits``)."""
    rows = []
    for q in ev.qids:
        values = {}
        for label in labels:
            per_m = ev.per_query.get(label, {})
            values[label] = {m: (round(per_m[m][q], digits) if q in per_m.get(m, {}) else None)
                             for m in metrics}
        rows.append({"qid": q, "type": data.query_type(q), "text": data.queries[q].get("text", ""),
                     "values": values})
    return {"metrics": list(metrics), "labels": list(labels), "rows": rows}


def column(label: str, metric: str) -> str:
    """The table's column name of ``metric`` of ``label``: ``"route:bm25 ndcg@10"``."""
    return f"{label} {metric}"


def to_frame(section: Mapping[str, Any]):
    """The section as a polars DataFrame: ``qid``, ``type``, ``text``, then one Float64 column
    per label and metric."""
    from lar.core.errors import require

    pl = require("polars", "eval")
    labels, metrics = section["labels"], section["metrics"]
    data: dict[str, list] = {"qid": [], "type": [], "text": []}
    cols = [(lab, m) for lab in labels for m in metrics]
    for lab, m in cols:
        data[column(lab, m)] = []
    for r in section["rows"]:
        data["qid"].append(r["qid"])
        data["type"].append(r.get("type"))
        data["text"].append(r.get("text", ""))
        for lab, m in cols:
            data[column(lab, m)].append((r["values"].get(lab) or {}).get(m))
    schema = {"qid": pl.String, "type": pl.String, "text": pl.String}
    schema.update({column(lab, m): pl.Float64 for lab, m in cols})
    return pl.DataFrame(data, schema=schema)


def write_table(path: str | Path, section: Mapping[str, Any]) -> Path:
    """Write the per-query table; the format follows the extension (:data:`FORMATS`)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise EvalConfigError(f"per-query table {str(path)!r}: use one of {', '.join(FORMATS)}")
    frame = to_frame(section)
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".parquet":
        frame.write_parquet(path)
    else:  # query text may hold tabs or newlines: polars quotes such fields
        frame.write_csv(path, separator="\t" if suffix == ".tsv" else ",", null_value="")
    return path


def wins_losses(section: Mapping[str, Any], a: str, b: str, metric: str, n: int = 5
                ) -> dict[str, list[dict[str, Any]]]:
    """The ``n`` queries where ``a`` beats ``b`` on ``metric`` by most (``wins``, largest
    difference first) and where it loses by most (``losses``); ties are neither. Each entry:
    ``{"qid", "type", "text", "a", "b", "delta"}``; queries are ordered by id on equal
    differences."""
    diffs = []
    for r in section.get("rows", ()):
        va = (r["values"].get(a) or {}).get(metric)
        vb = (r["values"].get(b) or {}).get(metric)
        if va is None or vb is None or va == vb:
            continue
        diffs.append({"qid": r["qid"], "type": r.get("type"), "text": r.get("text", ""),
                      "a": va, "b": vb, "delta": round(va - vb, 4)})
    wins = sorted((d for d in diffs if d["delta"] > 0), key=lambda d: (-d["delta"], d["qid"]))
    losses = sorted((d for d in diffs if d["delta"] < 0), key=lambda d: (d["delta"], d["qid"]))
    return {"wins": wins[:n], "losses": losses[:n]}
