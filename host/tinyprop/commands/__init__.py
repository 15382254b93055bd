"""CLI verbs, one module each (see tinyprop.cli.VERBS)."""
