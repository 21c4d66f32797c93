"""bayespass.report."""
