"""Kits several layers share: chunking, the embedding-layer base, lexical tokenizers and
segments, vector sidecars and stores, tree-sitter code parsing."""
