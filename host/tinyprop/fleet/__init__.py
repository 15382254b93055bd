"""Federated learning over a fleet of boards on Flower: each board trains its sparse update in
place, and only the trainable parameters travel (params.py); the Flower apps (apps.py) and the
`tinyprop fleet` verb's Simulation Engine run (simulation.py). Flower (`flwr`) is needed only
from apps.py on."""
