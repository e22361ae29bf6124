"""Faults at any moment of a fit: seeded schedules run on raymod's loopback multi-node cluster.

A :class:`~raymod.chaos.schedules.Schedule` names faults (a worker or KVServer killed or
stopped, a node removed, a worker failing to start) and the moments of a fit's life they
strike at (:data:`raymod.cluster.moments.MOMENTS`, plus batch ends);
:func:`~raymod.chaos.schedules.generate` draws them from a seed, and
:class:`~raymod.chaos.harness.Rig` runs one on real Ray actors and nodes and says how it
ended: on the failure-free trajectory, stopped with a checkpoint that resumes onto it, or
(a bug) off it, hung or failed. ``bench/bench_faults.py`` runs many; the test suite a few
dozen.
"""
from .harness import Outcome, Rig
from .schedules import FAULTS, WHERE, Fault, Schedule, generate

__all__ = ["Fault", "Schedule", "generate", "FAULTS", "WHERE", "Rig", "Outcome"]
