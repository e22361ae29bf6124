"""Sequence operators: connectionist temporal classification and the fused recurrent layer."""
