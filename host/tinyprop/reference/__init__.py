"""The NumPy reference: TFLite's integer arithmetic, the forward pass and the training step, bit
for bit what the C core computes. Documentation that runs."""
