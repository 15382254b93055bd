"""Model in: an int8 .tflite becomes the graph IR (tensors, ops, their quantized parameters)."""
