"""bayespass.execute."""
