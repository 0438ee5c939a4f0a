"""Exact late interaction (MaxSim) over per-unit token-vector sidecars: query parsing with
per-token weights, block scanning, and token-level explanations with span localisation."""
