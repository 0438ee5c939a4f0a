"""lar's IPython extension: ``%load_ext lar`` (or ``%load_ext lar_magics``)."""
from __future__ import annotations


def load_ipython_extension(ipython):  # replaced by the magics module when it lands
    raise NotImplementedError("lar_magics is being built")
