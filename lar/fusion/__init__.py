"""Fusion: grouping hits by place (:mod:`lar.fusion.grouping`), probing each route's list
(:mod:`lar.fusion.probe`), and the fusion policies, one module each (:mod:`lar.fusion.policies`
names them and runs one by name)."""
from __future__ import annotations

from lar.fusion.adaptive import adaptive_fusion, partial_factors
from lar.fusion.comb import combmnz, combsum
from lar.fusion.model import FusionModel, RouteWeights, load_model
from lar.fusion.policies import DEFAULT_POLICY, POLICIES, fuse
from lar.fusion.route_unique import route_unique
from lar.fusion.rrf import DEFAULT_C, rrf
from lar.fusion.scales import NORMS
from lar.fusion.table import SLOTS, FusedItem, Key, Runs

__all__ = ["DEFAULT_C", "DEFAULT_POLICY", "NORMS", "POLICIES", "SLOTS", "FusedItem", "FusionModel",
           "Key", "RouteWeights", "Runs", "adaptive_fusion", "combmnz", "combsum", "fuse",
           "load_model", "partial_factors", "route_unique", "rrf"]
