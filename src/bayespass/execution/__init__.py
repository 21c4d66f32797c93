"""Sandboxed execution of generated programs; the entry point is :func:`bayespass.execute`."""
