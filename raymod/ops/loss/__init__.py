"""Loss heads: ops whose backward ignores the head gradient and emits the loss gradient."""
