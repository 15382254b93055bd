"""tinyprop: int8 sparse-update training for microcontrollers, from an ordinary TFLite model."""

__version__ = "0.1.0"
