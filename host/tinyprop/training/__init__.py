"""Training runs on an engine: the loop and its events, checkpoints, evaluation, export."""
