"""What a search asks for, as the engine reads it: the pool size each emphasis gives a layer."""
from __future__ import annotations

from lar.core.errors import ConfigError

#: candidates a generate layer returns per hit asked for (at least MIN_POOL)
EMPHASIS_POOL = {"precision": 2, "balanced": 5, "recall": 20}
MIN_POOL = 20


def pool_size(k: int, emphasis: str) -> int:
    """How many candidates each layer returns for ``k`` hits at this ``emphasis``."""
    if emphasis not in EMPHASIS_POOL:
        raise ConfigError(f"emphasis must be one of {sorted(EMPHASIS_POOL)}, got {emphasis!r}")
    return max(MIN_POOL, k * EMPHASIS_POOL[emphasis])


__all__ = ["EMPHASIS_POOL", "MIN_POOL", "pool_size"]
