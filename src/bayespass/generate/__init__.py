"""bayespass.generate."""
