import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod.parallel import DataParallelExecutorGroup, split_input_slice


class Batch:
    def __init__(self, data, label=None):
        self.data, self.label = data, label or []


def test_split_input_slice_follows_mxnet_rounding():
    assert split_input_slice(7, [1, 1]) == [slice(0, 4), slice(4, 7)]
    assert split_input_slice(10, [1, 2, 2]) == [slice(0, 2), slice(2, 6), slice(6, 10)]
    with pytest.raises(ValueError, match="Too many slices"):
        split_input_slice(2, [1, 1, 1])


def _mlp():
    data = sym.Variable("data")
    h = sym.Activation(sym.FullyConnected(data, num_hidden=6, name="fc1"), act_type="tanh")
    return sym.FullyConnected(h, num_hidden=3, name="fc2")


def _group(contexts, batch=7, **kw):
    net = _mlp()
    params = [n for n in net.list_arguments() if n != "data"]
    return DataParallelExecutorGroup(net, contexts, None, [("data", (batch, 5))], None, params,
                                     for_training=True, inputs_need_grad=True, **kw)


def _same_training_step(groups, rng) -> dict:
    """Set the same random parameters on every group, run one batch and heads through each;
    returns the parameters."""
    params = {n: rng.standard_normal(a[0].shape).astype(np.float32)
              for n, a in zip(groups[0].param_names, groups[0].param_arrays)}
    x = rng.standard_normal((7, 5)).astype(np.float32)
    head = rng.standard_normal((7, 3)).astype(np.float32)
    for g in groups:
        g.set_params(params, {})
        g.forward(Batch([x]), is_train=True)
        g.backward([head])
    return params


def test_two_devices_sum_to_one_executor_gradients(rng):
    one, two = _group([rm.cpu(0)]), _group([rm.cpu(0), rm.cpu(1)])
    assert two.slices == [slice(0, 4), slice(4, 7)]
    _same_training_step((one, two), rng)
    np.testing.assert_allclose(two.get_outputs()[0], one.get_outputs()[0], rtol=1e-5, atol=1e-6)
    for name, grads_one, grads_two in zip(one.param_names, one.grad_arrays, two.grad_arrays):
        np.testing.assert_allclose(grads_two[0] + grads_two[1], grads_one[0], rtol=1e-5,
                                   atol=1e-5, err_msg=name)
    np.testing.assert_allclose(two.get_input_grads()[0], one.get_input_grads()[0], rtol=1e-5,
                               atol=1e-6)
    per_device = two.get_outputs(merge_multi_context=False)[0]
    assert [o.shape for o in per_device] == [(4, 3), (3, 3)]


def test_shared_group_shares_parameter_and_gradient_memory():
    first = _group([rm.cpu(0), rm.cpu(1)], batch=8)
    second = _group([rm.cpu(0), rm.cpu(1)], batch=4, shared_group=first)
    for a, b in zip(first.param_arrays, second.param_arrays):
        assert all(x is y for x, y in zip(a, b))
    for a, b in zip(first.grad_arrays, second.grad_arrays):
        assert all(x is y for x, y in zip(a, b))
    assert second.shared_data_arrays is first.shared_data_arrays
    # the smaller bucket's data lives inside the first bucket's input buffer
    assert np.shares_memory(second.execs[0].arg_dict["data"], first.execs[0].arg_dict["data"])


def test_layout_tnc_splits_axis_one(rng):
    data = sym.Variable("data")
    net = sym.Activation(data, act_type="relu")
    group = DataParallelExecutorGroup(net, [rm.cpu(0), rm.cpu(1)], None,
                                      [rm_desc("data", (3, 6, 2), "TNC")], None, [],
                                      for_training=False, inputs_need_grad=False)
    x = rng.standard_normal((3, 6, 2)).astype(np.float32)
    group.forward(Batch([x]), is_train=False)
    assert [e.arg_dict["data"].shape for e in group.execs] == [(3, 3, 2), (3, 3, 2)]


class rm_desc(tuple):
    """A minimal (name, shape, layout) description, as DataDesc carries."""

    def __new__(cls, name, shape, layout):
        obj = super().__new__(cls, (name, shape))
        obj.name, obj.shape, obj.dtype, obj.layout = name, shape, np.float32, layout
        return obj


def test_rebind_moves_parameters_and_gradients_to_outside_memory(rng):
    """What a worker does with the kvstore's blocks: parameters read from one flat buffer
    (read-only) and gradients written into another; results equal the private arrays'."""
    private = _group([rm.cpu(0)])
    params = {n: rng.standard_normal(a[0].shape).astype(np.float32)
              for n, a in zip(private.param_names, private.param_arrays)}
    x = rng.standard_normal((7, 5)).astype(np.float32)
    head = rng.standard_normal((7, 3)).astype(np.float32)
    private.set_params(params, {})
    private.forward(Batch([x]), is_train=True)
    private.backward([head])

    group = _group([rm.cpu(0)])
    bucket = _group([rm.cpu(0)], batch=3, shared_group=group)  # shares group's arrays
    sizes = [a[0].size for a in group.param_arrays]
    weights, grads = np.zeros(sum(sizes), np.float32), np.full(sum(sizes), np.nan, np.float32)
    replace, offset = {}, 0
    for name, (w,), (g,), n in zip(group.param_names, group.param_arrays, group.grad_arrays,
                                   sizes):
        view = weights[offset:offset + n].reshape(w.shape)
        view[...] = params[name]
        view.flags.writeable = False
        replace[id(w)] = view
        replace[id(g)] = grads[offset:offset + n].reshape(g.shape)
        offset += n
    for g in (group, bucket):
        g.rebind(replace)
    group.forward(Batch([x]), is_train=True)
    group.backward([head])
    np.testing.assert_allclose(group.get_outputs()[0], private.get_outputs()[0], rtol=1e-6)
    offset = 0
    for (g,), n in zip(private.grad_arrays, sizes):
        np.testing.assert_allclose(grads[offset:offset + n], g.reshape(-1), rtol=1e-6)
        offset += n
    assert all(np.shares_memory(a[0], weights) for a in bucket.param_arrays)
    assert all(np.shares_memory(a[0], grads) for a in bucket.grad_arrays)
    with pytest.raises(ValueError, match="read-only"):
        group.set_params(params, {})
    with pytest.raises(rm.base.MXNetError, match="cannot become"):
        group.rebind({id(group.param_arrays[0][0]): np.zeros(3, np.float32)})


def test_one_device_group_on_each_backend_matches_the_cpu_group(ctx, rng):
    """The group's host <-> device moves (set_params, the batch, the heads, get_*) on ctx."""
    from raymod.context import as_numpy
    cpu, other = _group([rm.cpu(0)]), _group([ctx])
    params = _same_training_step((cpu, other), rng)
    np.testing.assert_allclose(as_numpy(other.get_outputs()[0]), cpu.get_outputs()[0], rtol=1e-5)
    np.testing.assert_allclose(as_numpy(other.get_input_grads()[0]), cpu.get_input_grads()[0],
                               rtol=1e-5, atol=1e-6)
    arg, aux = {n: np.zeros_like(v) for n, v in params.items()}, {}
    other.get_params(arg, aux)
    for name, value in params.items():
        np.testing.assert_array_equal(arg[name], value)
    for name, (grad_cpu,), (grad_other,) in zip(cpu.param_names, cpu.grad_arrays,
                                                 other.grad_arrays):
        np.testing.assert_allclose(as_numpy(grad_other), grad_cpu, rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def test_a_second_rebind_finds_the_arrays_behind_ndarray_views(rng):
    """Under MXNet's compatibility layer (as in a worker actor of ``raymod run --workers``)
    executors hand out NDArray views, while a rebound group holds the plain arrays it was
    given: the next rebind, keyed by those, must still move the executors (a worker
    alternates between the servers' two published blocks every step)."""
    from raymod import array_view
    from raymod.compat.ndarray import wrap
    array_view.set_viewer(wrap)
    try:
        group = _group([rm.cpu(0)])
        x = rng.standard_normal((7, 5)).astype(np.float32)
        head = rng.standard_normal((7, 3)).astype(np.float32)
        for fill in (1.0, 2.0):  # two blocks, as a worker sees them
            replace = {}
            for (w,), (g,) in zip(group.param_arrays, group.grad_arrays):
                replace[id(w)] = np.full(w.shape, fill, np.float32)
                replace[id(g)] = np.zeros(g.shape, np.float32)
            group.rebind(replace)
            group.forward(Batch([x]), is_train=True)
            group.backward([head])
            for (w,), (g,), (exe_w,) in zip(group.param_arrays, group.grad_arrays,
                                            [[e.arg_dict[n] for e in group.execs]
                                             for n in group.param_names]):
                assert np.all(exe_w == fill) and np.shares_memory(exe_w, w)
                assert np.any(g != 0)  # the executors wrote into the new gradient arrays
    finally:
        array_view.set_viewer(None)


def test_a_bucket_bound_after_a_rebind_follows_the_next_one(rng):
    """A worker actor of ``raymod run --workers`` (the compatibility layer installed) binds a
    new bucket while its root group computes in one published block, then rebinds the root's
    arrays to the next block: the bucket's executors must move with it. A worker's executors
    hand out their arrays plain (``keep_bound_plain``), so the bucket shares the root's very
    arrays (with NDArray views it got views of its own, which no rebind named, and kept
    computing with the block it was bound in: example/rnn/bucketing drifted)."""
    from raymod import array_view
    from raymod.compat.ndarray import wrap
    array_view.set_viewer(wrap)
    array_view.keep_bound_plain()
    try:
        root = _group([rm.cpu(0)])

        def move_to(fill):
            replace = {}
            for (w,), (g,) in zip(root.param_arrays, root.grad_arrays):
                replace[id(w)] = np.full(w.shape, fill, np.float32)
                replace[id(g)] = np.zeros(g.shape, np.float32)
            for group in groups:
                group.rebind(replace)

        groups = [root]
        move_to(1.0)                                       # block A
        bucket = _group([rm.cpu(0)], batch=3, shared_group=root)
        groups.append(bucket)
        move_to(2.0)                                       # block B
        for name in root.param_names:
            assert np.all(bucket.execs[0].arg_dict[name] == 2.0), name
    finally:
        array_view.keep_bound_plain(False)
        array_view.set_viewer(None)
