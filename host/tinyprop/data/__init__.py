"""Data in: the model and dataset assets, images as int8 samples, the sensor shifts."""
