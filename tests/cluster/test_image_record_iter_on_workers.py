"""ImageRecordIter on Ray workers: the driver plans draws, each worker reads and decodes its
own records from the .rec, and a worker killed mid-epoch changes nothing (every draw once,
the in-process trajectory)."""
from pathlib import Path

import numpy as np
import pytest

import raymod as rm

from kill_during_fit import killing_callback
from nets import mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mxnet" / "recordio"
BATCH = 10  # 20 steps per epoch of the 200 images


def images(uri=None):
    return rm.io.ImageRecordIter(
        path_imgrec=uri or str(FIXTURES / "images.rec"), path_imgidx=str(FIXTURES / "images.idx"),
        data_shape=(3, 8, 8), batch_size=BATCH, shuffle=True, seed=5, rand_crop=True,
        rand_mirror=True, scale=1 / 255, preprocess_threads=2)


def fit(it, workers, close, on_batch=None):
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(), workers=workers)
    if workers is not None:
        close(mod)
    mod.fit(it, num_epoch=2, kvstore="local", initializer=rm.init.Xavier(),
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9}, eval_metric="acc",
            batch_end_callback=on_batch)
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


def test_workers_decode_their_own_records_and_survive_a_kill(close_modules):
    _, reference = fit(images(), None, close_modules)
    it = images(f"file://{FIXTURES}/images.rec")  # a pyarrow.fs URI
    counted, killed = [], []
    on_batch = killing_callback(BATCH, (0, 5), (1, 6), counted, killed)
    mod, got = fit(it, rm.Workers(2, run_ahead=4), close_modules, on_batch=on_batch)
    for name in reference:
        err = np.abs(reference[name] - got[name]).max() / max(np.abs(reference[name]).max(), 1e-3)
        assert err < 1e-5, f"{name}: max relative difference {err:.2e}"
    assert counted == [0] * 40  # every draw of the epoch so far counted once after each step
    events = [e["event"] for e in mod._pool.events]
    assert len(killed) == 2 and events.count("lost") == 2
    assert it.reader().decoded == 0  # the driver decoded no image
