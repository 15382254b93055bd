"""Graph IR to training blob: the sparse-update scheme, the memory plans, the training program
and the blob format (what `tinyprop convert` does, as a library)."""
