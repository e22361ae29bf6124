"""A visible cluster: the State API lists a fit's named actors, Ray's metrics endpoint serves
its figures, and a TensorBoard event file holds its membership events."""
import re
import time
import urllib.request

import numpy as np
import pytest
import ray
from ray.util.state import list_actors

import raymod as rm

from nets import mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


def metric_values(text, name, fit):
    """Values of Prometheus samples ``name{...fit="<fit>"...} value``."""
    pattern = re.compile(rf'^{name}{{([^}}]*)}} (\S+)$', re.M)
    return [float(value) for labels, value in pattern.findall(text) if f'fit="{fit}"' in labels]


def test_named_actors_metrics_and_membership_scalars(ray_cluster, close_modules, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((800, 16)).astype(np.float32)
    y = x[:, :10].argmax(axis=1).astype(np.float32)
    seen = {}

    def look(param):  # during the fit: what the State API lists
        if param.nbatch == 5 and param.epoch == 0:
            pool = param.locals["self"]._pool
            seen["fit"] = rm.cluster.naming.namespace_of(pool)
            seen["actors"] = {(a.name, a.class_name) for a in list_actors(
                address=ray_cluster["address"], filters=[("state", "=", "ALIVE")],
                limit=10_000)
                if a.ray_namespace == seen["fit"]}
            ray.kill(pool.workers[1], no_restart=True)  # a membership event to log

    tb = rm.callback.TensorBoard(tmp_path / "tb")
    mod = rm.mod.Module(mlp(), workers=2)
    close_modules(mod)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=40), num_epoch=2,
            optimizer_params={"learning_rate": 0.1}, batch_end_callback=[look, tb],
            epoch_end_callback=tb)
    tb.close()
    assert seen["fit"].startswith("raymod-fit-")
    assert seen["actors"] == {("raymod-worker-0", "Worker"), ("raymod-worker-1", "Worker"),
                              ("raymod-kvserver-0", "KVServer")}
    assert mod._ray_metrics.figures["raymod_live_workers"] == 2
    # Ray's metrics agent exports the driver's figures every few seconds: an export from
    # before the replacement joined still says 1 live worker, so wait for the last figures
    url = f"http://127.0.0.1:{ray_cluster['metrics_export_port']}/metrics"
    deadline, samples, workers = time.monotonic() + 90, [], []
    while time.monotonic() < deadline and not (samples and workers == [2.0]):
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        samples = metric_values(text, "ray_raymod_samples_per_second", seen["fit"])
        workers = metric_values(text, "ray_raymod_live_workers", seen["fit"])
        time.sleep(1)
    assert samples and samples[0] > 0, "no samples/s figure on the metrics endpoint"
    assert workers == [2.0]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    reader = EventAccumulator(str(tmp_path / "tb"))
    reader.Reload()
    assert [e.value for e in reader.Scalars("membership/lost")] == [1]
    assert [e.step for e in reader.Scalars("train/accuracy")] == [0, 1]
