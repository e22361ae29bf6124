"""raymod.actor_setup: the steps the driver registers, shipped to and run by new actors."""
import sys

import pytest

from raymod import actor_setup


@pytest.fixture
def clean_steps():
    saved = actor_setup.steps()
    yield
    actor_setup._STEPS[:] = list(saved)


def test_steps_ship_in_order_once_each_and_run_in_the_actor(clean_steps, tmp_path):
    actor_setup.register("raymod.actor_setup:prepend_path", str(tmp_path))
    actor_setup.register("raymod.actor_setup:prepend_path", str(tmp_path))  # no duplicate
    actor_setup.register("os.path:exists", "/")
    shipped = actor_setup.steps()
    assert shipped[-2:] == (("raymod.actor_setup:prepend_path", (str(tmp_path),)),
                            ("os.path:exists", ("/",)))
    path = list(sys.path)
    try:
        actor_setup.apply(shipped)
        assert sys.path[0] == str(tmp_path)
    finally:
        sys.path[:] = path
    actor_setup.unregister("raymod.actor_setup:prepend_path")
    assert all(f != "raymod.actor_setup:prepend_path" for f, _ in actor_setup.steps())


@pytest.mark.parametrize("bad", ["raymod.actor_setup", ":prepend_path", "raymod.actor_setup:"])
def test_a_step_must_name_module_and_function(bad):
    with pytest.raises(ValueError, match=r"function must be 'module:function', got"):
        actor_setup.register(bad)


def test_installing_the_compatibility_layer_registers_it_for_actors(clean_steps):
    from raymod.compat import runner
    was = runner.installed()
    runner.install()
    try:
        assert ("raymod.compat.runner:install", ()) in actor_setup.steps()
    finally:
        if not was:
            runner.uninstall()
    if not was:
        assert ("raymod.compat.runner:install", ()) not in actor_setup.steps()
