"""Vision layers: cropping, upsampling, LRN, sampling grids and spatial transformers."""
