"""Array operators: shape changes, elementwise and broadcast arithmetic, reductions, math."""
