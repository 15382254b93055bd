"""Where the figures of docs/benchmarks.md come from: `tinyprop bench`, the TTE comparison, the
float baseline."""
