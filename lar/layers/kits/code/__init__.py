"""Source-code helpers shared by the code-aware layers: which language a file is in, and the
tree-sitter extraction of definitions and call sites (``lar.layers.kits.code.treesitter``)."""
