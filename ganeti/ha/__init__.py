"""High availability (doc/ha.md): the per-instance auto-repair policy (:mod:`.policy`)."""
