"""Group hits of different layers that point at the same place.

Each layer returns its own best-first list of single-layer hits.  Before fusion those hits are
grouped: hits from *different* layers on the same content hash whose spans overlap become one
:class:`Group`; two distinct hits of one layer never share a group.  Each group is then one
fusion candidate, keyed by the id of its representative (smallest) span.

Rules, applied layer by layer in the given order and each layer's hits best-first:

* a hit whose span equals one already seen in its layer is dropped (first one kept);
* a hit whose span equals a group's representative span joins that group if the group has no
  member from its layer yet, and is otherwise dropped as a duplicate of that group (this keeps
  group keys unique);
* otherwise the hit joins the *best* group it overlaps (same hash, overlapping any member span)
  that has no member from its layer yet, best meaning the lowest rank in any layer so far, then
  the earliest created; a whole-file hit therefore attaches to the best group of its file and
  leaves the others alone;
* otherwise it starts a new group.

A group's rank in a layer is its 1-based position in that layer's list of groups, which is
exactly the order :func:`runs_for_fusion` returns.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping, Sequence

from lar.core.errors import ConfigError
from lar.core.types import Hit, Span


@dataclass(frozen=True, slots=True)
class Group:
    """Hits of different layers on one place.

    ``key`` is ``span.id``; ``span`` is the representative (smallest member span, the earliest
    layer's on ties); ``members`` holds one hit per layer, in layer order; ``ranks`` gives the
    group's 1-based rank in each member layer.
    """

    key: str
    span: Span
    members: Mapping[str, Hit]
    ranks: Mapping[str, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", MappingProxyType(dict(self.members)))
        object.__setattr__(self, "ranks", MappingProxyType(dict(self.ranks)))
        if not self.members:
            raise ConfigError("a Group needs at least one member hit")
        if set(self.members) != set(self.ranks):
            raise ConfigError(
                f"Group {self.key!r}: members {sorted(self.members)} and ranks {sorted(self.ranks)} "
                "must name the same layers"
            )
        if self.key != self.span.id:
            raise ConfigError(f"Group key must be its span's id {self.span.id!r}; got {self.key!r}")

    @property
    def layers(self) -> tuple[str, ...]:
        """Member layers, in layer order."""
        return tuple(self.members)


@dataclass(slots=True)
class _Building:
    order: int
    members: dict[str, Hit] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    rep: Span | None = None

    def add(self, layer: str, hit: Hit, rank: int) -> None:
        self.members[layer] = hit
        self.ranks[layer] = rank
        # strictly smaller wins, so on equal length the earlier layer's span stays
        if self.rep is None or hit.span.length < self.rep.length:
            self.rep = hit.span

    def overlaps(self, span: Span) -> bool:
        return any(m.span.overlaps(span) for m in self.members.values())


def _check(per_layer: Mapping[str, Sequence[Hit]]) -> None:
    if not isinstance(per_layer, Mapping):
        raise ConfigError(f"per_layer must map layer name -> [Hit, ...]; got {type(per_layer).__name__}")
    for layer, hits in per_layer.items():
        if not isinstance(layer, str) or not layer:
            raise ConfigError(f"layer names must be non-empty strings; got {layer!r}")
        if isinstance(hits, (str, bytes)) or not isinstance(hits, Sequence):
            raise ConfigError(f"layer {layer!r}: hits must be a best-first sequence of Hit")
        for pos, hit in enumerate(hits):
            if not isinstance(hit, Hit):
                raise ConfigError(f"layer {layer!r}, position {pos + 1}: expected a Hit, got {type(hit).__name__}")
            if hit.signals != (layer,):
                raise ConfigError(
                    f"layer {layer!r}, position {pos + 1}: a layer's hit must have exactly the one "
                    f"signal {layer!r}; got {list(hit.signals)}"
                )


def group_hits(per_layer: Mapping[str, Sequence[Hit]], fast: bool = True) -> list[Group]:
    """Group the layers' hits (see the module docstring); groups in creation order. One layer's
    list (``fast``, the default) takes a direct path with the same result: its distinct spans,
    one group each, ranked by position (``fast=False`` runs the general rules, for tests)."""
    _check(per_layer)
    if fast and len(per_layer) == 1:
        return _one_layer(*next(iter(per_layer.items())))
    groups: list[_Building] = []
    by_rep: dict[Span, _Building] = {}
    by_hash: dict[str, list[_Building]] = {}  # each hash's groups, in creation order
    for layer, hits in per_layer.items():
        seen: set[Span] = set()
        count = 0  # groups this layer has reached so far
        for hit in hits:
            span = hit.span
            if span in seen:
                continue
            seen.add(span)
            target = by_rep.get(span)
            if target is not None and layer in target.members:
                continue  # same place as a group this layer already ranks higher
            if target is None:
                # only this hash's groups can overlap (no scan of every group: O(n) per list
                # when places are spread over units, not O(n^2))
                same = by_hash.setdefault(span.hash, [])
                candidates = [g for g in same if layer not in g.members and g.overlaps(span)]
                if candidates:
                    target = min(candidates, key=lambda g: (min(g.ranks.values()), g.order))
                else:
                    target = _Building(order=len(groups))
                    groups.append(target)
                    same.append(target)
            count += 1
            old_rep = target.rep
            target.add(layer, hit, count)
            if target.rep != old_rep:
                if old_rep is not None:
                    by_rep.pop(old_rep, None)
                by_rep[target.rep] = target  # type: ignore[index]
    return [_group(g) for g in groups if g.rep is not None]  # always true: built with a member


def _one_layer(layer: str, hits: Sequence[Hit]) -> list[Group]:
    """The groups of a single layer's list: under the rules above no hit joins another (each
    group already has a member of this layer), so each distinct span is its own group."""
    seen: set[Span] = set()
    out = []
    for hit in hits:
        span = hit.span
        if span in seen:
            continue
        seen.add(span)
        g = object.__new__(Group)
        object.__setattr__(g, "key", span.id)
        object.__setattr__(g, "span", span)
        object.__setattr__(g, "members", MappingProxyType({layer: hit}))
        object.__setattr__(g, "ranks", MappingProxyType({layer: len(out) + 1}))
        out.append(g)
    return out


def _group(g: _Building) -> Group:
    """The frozen Group of a built one, without re-checking what building guarantees (members and
    ranks name the same layers, the key is the representative's id): ~40 % of grouping's time.
    The built one's dicts are wrapped, not copied: nothing else holds it once grouping returns."""
    out = object.__new__(Group)
    object.__setattr__(out, "key", g.rep.id)
    object.__setattr__(out, "span", g.rep)
    object.__setattr__(out, "members", MappingProxyType(g.members))
    object.__setattr__(out, "ranks", MappingProxyType(g.ranks))
    return out


def runs_for_fusion(
    groups: Sequence[Group], per_layer: Mapping[str, Sequence[Hit]]
) -> dict[str, list[tuple[str, float]]]:
    """Each layer's group keys best-first, scored by that layer's member evidence score.

    Layers come in ``per_layer`` order (a layer with no groups gives ``[]``), then any further
    layer named by the groups in order of appearance.  Keys are deduplicated per layer.
    """
    layers: list[str] = list(per_layer)
    for g in groups:
        layers.extend(layer for layer in g.members if layer not in layers)
    runs: dict[str, list[tuple[str, float]]] = {}
    for layer in layers:
        ranked = sorted(
            ((g.ranks[layer], i, g) for i, g in enumerate(groups) if layer in g.members),
            key=lambda t: (t[0], t[1]),
        )
        seen: set[str] = set()
        items: list[tuple[str, float]] = []
        for _, _, g in ranked:
            if g.key in seen:
                continue
            seen.add(g.key)
            items.append((g.key, float(g.members[layer].evidence[layer].score)))
        runs[layer] = items
    return runs


def member_ranks(group: Group, ranks_override: Mapping[str, int] | None = None) -> dict[str, int]:
    """Each member layer's rank: the group's own, or ``ranks_override[layer]`` where given
    (checked: known layers, integers >= 1)."""
    override = dict(ranks_override or {})
    unknown = sorted(set(override) - set(group.members))
    if unknown:
        raise ConfigError(
            f"ranks_override names layers {unknown} that are not members of group {group.key!r}; "
            f"members: {list(group.members)}"
        )
    out = {}
    for layer in group.members:
        rank = override.get(layer, group.ranks[layer])
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ConfigError(f"rank for layer {layer!r} must be an integer >= 1; got {rank!r}")
        out[layer] = rank
    return out


def representative(group: Group) -> tuple[Hit, tuple[str, ...]]:
    """The member whose span is the group's, and the union of the members' paths (its first)."""
    rep_hit = next(h for h in group.members.values() if h.span == group.span)
    paths = list(rep_hit.paths)
    for hit in group.members.values():
        paths.extend(p for p in hit.paths if p not in paths)
    return rep_hit, tuple(paths)


def merged_hit(group: Group, ranks_override: Mapping[str, int] | None = None) -> Hit:
    """One ``Hit`` for the whole group.

    Its span is the representative span, its signals the member layers (layer order), its
    evidence each member's own ``Evidence`` (``sub_spans``, ``details``, ``query`` untouched)
    with ``rank`` set to the group's rank in that layer, or ``ranks_override[layer]`` where
    given.  Excerpt, lines and context come from the member whose span is the representative;
    paths are the union of the members' paths, the representative's first.
    """
    ranks = member_ranks(group, ranks_override)
    evidence = {layer: replace(hit.evidence[layer], rank=ranks[layer])
                for layer, hit in group.members.items()}
    rep_hit, paths = representative(group)
    return Hit(
        span=group.span,
        signals=tuple(group.members),
        evidence=evidence,
        paths=paths,
        lines=rep_hit.lines,
        excerpt=rep_hit.excerpt,
        context=rep_hit.context,
    )


__all__ = ["Group", "group_hits", "member_ranks", "merged_hit", "representative", "runs_for_fusion"]
