"""Syndicate's data plane on CPUs: rank processes exchanging real tensors over sockets, the
per-rank enforcer (Pseudocode 5), plans installed by two-phase commit, FIFO fallback (thesis
§4.4.3-4.4.4, T:1617-1691; spec §4, §6.5)."""
