"""MXNet's optimizer update ops (``sgd_update``, ``adam_update``, ...), run on raymod's
optimizer rules."""
