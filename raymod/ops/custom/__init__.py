"""Operators whose computation the user writes in Python (``Custom``, see ``rm.operator``)."""
