"""Running lar's two heavy passes on Ray (the optional ``ray`` extra, docs/ray.md): the build's
encoder pass on Ray tasks (:mod:`lar.distributed.ray_build`) and the exact scan over shards held
by Ray actors (:mod:`lar.distributed.ray_scan`). Ray is imported only when one of them runs."""
