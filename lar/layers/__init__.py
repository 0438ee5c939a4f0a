"""Built-in layers. Each module registers itself through the ``lar.layers`` entry-point group
(see pyproject.toml), exactly as a third-party plugin would; the engine imports none by name."""
