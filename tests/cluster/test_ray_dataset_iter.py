"""RayDatasetIter: a Parquet dataset read with Ray Data trains on workers that read their rows
from the blocks, exactly as NDArrayIter over the same rows in process."""
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

import raymod as rm

from kill_during_fit import killing_callback
from nets import mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

BATCH = 40


def write_parquet(folder, x, y, files=4):
    """``x`` as a fixed-size-list column, ``y`` as a scalar one, split over ``files`` files."""
    folder.mkdir()
    for k, part in enumerate(np.array_split(np.arange(len(x)), files)):
        features = pa.FixedSizeListArray.from_arrays(pa.array(x[part].reshape(-1)), x.shape[1])
        pq.write_table(pa.table({"features": features, "label": y[part]}),
                       folder / f"part-{k}.parquet", row_group_size=100)
    return str(folder)


def dataset(folder, n, dim, seed=0, blocks=4):
    """Rows ``x, y`` written as Parquet and read back with Ray Data, in the files' order
    (in ``blocks`` blocks; None: as Ray reads them)."""
    import ray.data
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    y = x[:, :10].argmax(axis=1).astype(np.float32)
    options = ray.data.DataContext.get_current().execution_options
    before, options.preserve_order = options.preserve_order, True
    try:
        # Ray merges small files into one block; split it again to read across blocks
        ds = ray.data.read_parquet(write_parquet(folder, x, y))
        ds = (ds if blocks is None else ds.repartition(blocks)).materialize()
    finally:
        options.preserve_order = before
    return x, y, ds


@pytest.fixture(scope="module")
def rows(tmp_path_factory, ray_cluster):
    """1600 rows of 16 features (40 batches of 40), materialized once for the module."""
    return dataset(tmp_path_factory.mktemp("parquet") / "train", 1600, 16)


def test_in_process_batches_match_ndarrayiter(rows):
    x, y, ds = rows
    batch = 150  # a last batch padded from the start of the epoch's order
    it = rm.io.RayDatasetIter(ds, "features", "label", batch_size=batch, shuffle=True, seed=3)
    ref = rm.io.NDArrayIter(x, y, batch_size=batch, shuffle=True, seed=3)
    assert it.provide_data == ref.provide_data and it.provide_label == ref.provide_label
    assert it.num_rows == 1600 and len(it.reader().refs) == 4  # several blocks
    for _ in range(2):
        got, want = list(it), list(ref)
        assert len(got) == len(want) == 11 and got[-1].pad == want[-1].pad == 50
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.data[0], b.data[0])
            np.testing.assert_array_equal(a.label[0], b.label[0])
        it.reset()
        ref.reset()
    # a run inside one block is a view of the block, not a copy
    data, _ = it.take(np.arange(5, 15))
    assert not data[0].flags.owndata and not data[0].flags.writeable


def test_tensor_columns_and_bad_input():
    images = np.arange(6 * 2 * 3, dtype=np.float32).reshape(6, 2, 3)
    ds = ray.data.from_numpy(images)  # Ray's own tensor column type
    it = rm.io.RayDatasetIter(ds, "data", batch_size=4, last_batch_handle="discard")
    assert it.provide_data[0].shape == (4, 2, 3) and it.provide_label == []
    np.testing.assert_array_equal(it.take(np.arange(6))[0][0], images)
    with pytest.raises(TypeError, match="must be a ray.data.Dataset, got ndarray"):
        rm.io.RayDatasetIter(images, "data")
    with pytest.raises(ValueError, match=r"columns \['nope'\] not found; available columns: "
                                         "data"):
        rm.io.RayDatasetIter(ds, "data", "nope")
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        rm.io.RayDatasetIter(ds, "data", batch_size=0)


def fit(it, workers, close, epochs=2, on_batch=None):
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(), workers=workers)
    if workers is not None:
        close(mod)
    mod.fit(it, num_epoch=epochs, kvstore="local", initializer=rm.init.Xavier(),
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            eval_metric="acc", batch_end_callback=on_batch)
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


def assert_close(a, b, tol=1e-5):
    for name in a:
        err = np.abs(a[name] - b[name]).max() / max(np.abs(a[name]).max(), 1e-3)
        assert err < tol, f"{name}: max relative difference {err:.2e}"


def test_two_workers_read_blocks_and_survive_a_kill(rows, close_modules):
    x, y, ds = rows  # 40 steps per epoch
    _, reference = fit(rm.io.NDArrayIter(x, y, batch_size=BATCH, shuffle=True, seed=2), None,
                       close_modules)
    it = rm.io.RayDatasetIter(ds, "features", "label", batch_size=BATCH, shuffle=True, seed=2)
    counted, killed = [], []
    on_batch = killing_callback(BATCH, (0, 10), (1, 20), counted, killed)

    # windows of 8 steps, not the default's time-based ones: however fast the machine, steps
    # remain after batch 20's callback (callbacks run up to two windows late)
    mod, got = fit(it, rm.Workers(2, run_ahead=8), close_modules, on_batch=on_batch)
    assert_close(reference, got)
    assert counted == [0] * 80  # every row of the epoch so far counted once after each step
    events = [e["event"] for e in mod._pool.events]
    assert len(killed) == 2 and events.count("lost") == 2 and events.count("join") >= 3
    assert it.blocks_fetched == 0  # the driver never read a block


def test_driver_memory_stays_below_the_dataset(tmp_path, close_modules):
    n, dim, batch = 4000, 1024, 400  # 16 MB of features, 1.6 MB per step
    _, _, ds = dataset(tmp_path / "train", n, dim)  # 4 blocks
    it = rm.io.RayDatasetIter(ds, "features", "label", batch_size=batch)
    mod = rm.mod.Module(mlp(), workers=2)
    close_modules(mod)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(rm.init.Xavier())
    mod.init_optimizer(kvstore="local", optimizer_params={"learning_rate": 0.01})
    tracemalloc.start()
    try:
        mod.fit(it, num_epoch=1, kvstore="local")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = n * dim * 4
    assert peak < size / 8, f"driver peak {peak / 1e6:.1f} MB for a {size / 1e6:.0f} MB dataset"
    assert it.blocks_fetched == 0
    # the default reader (every row through the driver, gathered over the blocks) would
    # have held the whole dataset: what this check would have seen
    tracemalloc.start()
    try:
        rm.io.base.RowSource.reader(it)
        _, peak_default = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_default >= size
