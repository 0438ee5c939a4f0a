"""The engine: the ``Engine`` facade, the anytime orchestrator and the build scheduler."""
