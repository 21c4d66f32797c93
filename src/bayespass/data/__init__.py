"""bayespass.data."""
