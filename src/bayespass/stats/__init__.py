"""bayespass.stats."""
