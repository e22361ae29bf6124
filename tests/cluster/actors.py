"""Helpers for tests that kill actors."""
import time

import ray


def wait_until_dead(handle, seconds: float = 60) -> None:
    """Block until calls on ``handle`` fail as on a dead actor (``ray.kill`` is
    asynchronous: a call right after it may still be answered); fails after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(handle.ping.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the actor still answers {seconds} s after it was killed")
