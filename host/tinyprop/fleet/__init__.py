"""Federated learning over a fleet of boards on Flower: each board trains its sparse update in
place, and only the trainable parameters travel (params.py); a board with its own data as a
fleet member (node.py); the Flower apps (apps.py) and a Simulation Engine run (simulation.py:
the `tinyprop fleet` verb). Flower (`flwr`) is needed from apps.py on."""

import os

# Flower reports usage to its makers unless told not to, read once when flwr is first
# imported (every import of flwr in tinyprop comes after this package's): a tinyprop command
# sends nothing anywhere unless its user opts in (FLWR_TELEMETRY_ENABLED=1).
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
