"""Neural-network layers: FullyConnected, Convolution, Pooling, activations, normalisation."""
