"""arbiter: the cross-app GPU arbiter (Themis) and its policies."""
