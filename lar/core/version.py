"""lar's version (the package's own; layers version their artefacts separately)."""
__version__ = "0.1.0"
