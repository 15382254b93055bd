"""Engines: what runs a blob (the NumPy reference, the C core in this process, a board)."""
