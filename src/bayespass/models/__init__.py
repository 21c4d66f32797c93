"""bayespass.models."""
