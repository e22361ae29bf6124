"""BucketingModule: bucket switching and memory sharing, grad_req across buckets, checkpoints,
training an LSTM language model on one and two devices, bad inputs.

Follows MXNet 1.9.1's test_module.py / train/test_bucketing.py (spec sections 1 and 2).
"""
import time
import numpy as np
import pytest

import raymod as rm
from raymod.io import DataBatch, DataDesc
from raymod.module import BucketingModule, Module, Stage, StageError

VOCAB, HIDDEN = 50, 16


def _lm_sym_gen(named_embedding=True):
    """sym_gen of a 2-layer LSTM language model; the Embedding may be left unnamed."""
    def sym_gen(seq_len):
        data = rm.sym.Variable("data")
        embed = rm.sym.Embedding(data, input_dim=VOCAB, output_dim=HIDDEN,
                                 name="embed" if named_embedding else None)
        stack = rm.rnn.SequentialRNNCell()
        for i in range(2):
            stack.add(rm.rnn.LSTMCell(HIDDEN, prefix=f"lstm_l{i}_"))
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = rm.sym.FullyConnected(rm.sym.Reshape(outputs, shape=(-1, HIDDEN)),
                                     num_hidden=VOCAB, name="pred")
        label = rm.sym.Reshape(rm.sym.Variable("softmax_label"), shape=(-1,))
        net = rm.sym.SoftmaxOutput(pred, label, name="softmax", use_ignore=True,
                                   ignore_label=-1)
        return net, ("data",), ("softmax_label",)
    return sym_gen


def _sentences(n, seed=0):
    """Random sentences of length 3..20 from a Markov chain an LSTM can learn."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sent = [int(rng.integers(0, VOCAB))]
        for _ in range(int(rng.integers(3, 21)) - 1):
            sent.append((sent[-1] * 7 + int(rng.integers(0, 3))) % VOCAB)
        out.append(sent)
    return out


def _lm_iter(n=600, seed=0):
    return rm.rnn.BucketSentenceIter(_sentences(n, seed), 16, buckets=[5, 10, 20])


def _fit(mod, it, num_epoch, begin_epoch=0, callback=None, **kwargs):
    """Fit with Adam; returns the training perplexity at the end of each epoch."""
    per_epoch = {}
    record = lambda p: per_epoch.__setitem__(p.epoch, p.eval_metric.get()[1])  # noqa: E731
    mod.fit(it, eval_metric=rm.metric.Perplexity(-1), num_epoch=num_epoch,
            begin_epoch=begin_epoch, optimizer="adam",
            optimizer_params={"learning_rate": 0.02},
            initializer=rm.init.Xavier(factor_type="in", magnitude=2.34),
            batch_end_callback=[record] + ([callback] if callback else []),
            **kwargs)
    return [per_epoch[e] for e in sorted(per_epoch)]


# ---- buckets share memory --------------------------------------------------------------------

def test_switch_bucket_shares_parameters_and_keeps_default_bucket_memory():
    mod = BucketingModule(_lm_sym_gen(named_embedding=False), default_bucket_key=10)
    mod.bind([("data", (4, 10))], [("softmax_label", (4, 10))])
    mod.init_params(initializer=rm.init.Xavier())
    default = mod._buckets[10]
    # sym_gen runs under a fresh NameManager, so the unnamed Embedding is embedding0 each time
    assert default.symbol.list_arguments()[1] == "embedding0_weight"
    mod.switch_bucket(5, [("data", (4, 5))], [("softmax_label", (4, 5))])
    small = mod._buckets[5]
    assert mod._curr_module is small and mod.symbol is small.symbol
    assert small.symbol.list_arguments()[1] == "embedding0_weight"
    before = default._total_exec_bytes
    for name in default._param_names:
        a = default._exec_group.execs[0].arg_dict[name]
        b = small._exec_group.execs[0].arg_dict[name]
        assert np.shares_memory(a, b), name
    # parameters and gradients are shared, inputs are views into the default bucket's buffers
    assert small._total_exec_bytes == 0
    del mod._buckets[5]
    mod.switch_bucket(5, [("data", (4, 5))], [("softmax_label", (4, 5))])
    assert mod._buckets[5] is not small
    mod.switch_bucket(20, [("data", (4, 20))], [("softmax_label", (4, 20))])
    assert default._total_exec_bytes == before
    assert mod.data_shapes[0].shape == (4, 20)
    mod.switch_bucket(10, None)  # an existing bucket needs no shapes
    assert mod.output_shapes == [("softmax_output", (40, VOCAB))]


def _scalar_weight_sym_gen(_key):
    data = rm.sym.Variable("data")
    weight = rm.sym.Variable("a", shape=(1,), init=rm.init.One())
    return rm.sym.make_loss(rm.sym.broadcast_mul(data, weight)), ("data",), None


def _ones_batch(key, batch_size):
    return DataBatch([np.ones((batch_size,), np.float32)], None, bucket_key=key,
                     provide_data=[DataDesc("data", (batch_size,), layout="N")])


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_grad_req_applies_to_every_bucket(grad_req):
    batch_size = 2
    mod = BucketingModule(_scalar_weight_sym_gen, default_bucket_key=10)
    mod.bind(data_shapes=[("data", (batch_size,))], for_training=True, grad_req=grad_req)
    mod.init_params()

    def grad():
        return float(mod._curr_module._exec_group.execs[0].grad_dict["a"][0])

    mod.forward_backward(_ones_batch(10, batch_size))
    assert grad() == batch_size
    mod.forward_backward(_ones_batch(5, batch_size))
    assert mod._curr_module is mod._buckets[5]
    assert mod._curr_module._grad_req == grad_req
    assert mod._curr_module._exec_group.execs[0]._grad_req["a"] == grad_req
    # 'add' accumulates into the gradient memory both buckets share
    assert grad() == (batch_size if grad_req == "write" else 2 * batch_size)


# ---- lifecycle -------------------------------------------------------------------------------

def test_stages_and_optimizer_borrowed_by_old_and_new_buckets():
    mod = BucketingModule(_scalar_weight_sym_gen, default_bucket_key=10)
    assert mod.data_names == ["data"] and mod.stage is Stage.CREATED
    with pytest.raises(StageError, match="call bind before forward"):
        mod.forward(_ones_batch(10, 2))
    mod.bind([("data", (2,))])
    mod.init_params()
    mod.switch_bucket(5, [("data", (2,))])
    with pytest.raises(StageError, match="call init_optimizer before update"):
        mod.update()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.25})
    mod.forward_backward(_ones_batch(7, 2))  # bound after the optimizer
    mod.update()
    opts = {id(m._optimizer) for m in mod._buckets.values()}
    assert len(opts) == 1 and all(m.optimizer_initialized for m in mod._buckets.values())
    # the update ran on bucket 7, get_params through bucket 7 or 10 sees it: 1 - 0.25*2/2
    np.testing.assert_allclose(mod.get_params()[0]["a"], [0.75])
    mod.switch_bucket(10, None)
    mod.forward_backward(_ones_batch(10, 2))
    mod.update()
    mod.switch_bucket(5, None)
    np.testing.assert_allclose(mod.get_params()[0]["a"], [0.5])
    # force_rebind keeps parameters and optimizer; other buckets are dropped
    mod.bind([("data", (2,))], force_rebind=True)
    assert list(mod._buckets) == [10] and mod.stage is Stage.OPTIMIZER_READY
    np.testing.assert_allclose(mod.get_params()[0]["a"], [0.5])
    mod.forward_backward(_ones_batch(5, 2))
    mod.update()
    np.testing.assert_allclose(mod.get_params()[0]["a"], [0.25])
    mod._reset_bind()  # executors dropped, values held for the next bind
    assert mod.stage is Stage.PARAMS_LOADED and mod._buckets == {}
    mod.bind([("data", (2,))])
    assert mod.stage is Stage.PARAMS_READY
    np.testing.assert_allclose(mod.get_params()[0]["a"], [0.25])


def test_prepare_binds_the_next_bucket_and_keeps_the_current_one():
    mod = BucketingModule(_scalar_weight_sym_gen, default_bucket_key=10)
    mod.bind([("data", (2,))])
    mod.init_params()
    mod.forward(_ones_batch(10, 2))
    mod.prepare(_ones_batch(3, 2))
    assert 3 in mod._buckets and mod._curr_module is mod._buckets[10]
    np.testing.assert_allclose(mod.get_outputs()[0], [1.0, 1.0])


# ---- training --------------------------------------------------------------------------------

def test_fit_lstm_language_model_perplexity_falls():
    rm.random.seed(3)
    it = _lm_iter()
    mod = BucketingModule(_lm_sym_gen(), default_bucket_key=it.default_bucket_key)
    ppl = _fit(mod, it, num_epoch=2)
    assert len(ppl) == 2 and ppl[1] < 0.7 * ppl[0] and ppl[0] < VOCAB
    assert sorted(mod._buckets) == [5, 10, 20]
    # rebind for inference (parameters kept) and score every bucket
    mod.bind(it.provide_data, it.provide_label, for_training=False, force_rebind=True)
    assert not mod.for_training and list(mod._buckets) == [20]
    (name, score), = mod.score(it, rm.metric.Perplexity(-1))
    assert name == "perplexity" and score < ppl[0]


def test_two_devices_match_one_device():
    results = []
    for context in (rm.cpu(0), [rm.cpu(0), rm.cpu(1)]):
        rm.random.seed(5)
        it = _lm_iter(n=300)
        mod = BucketingModule(_lm_sym_gen(), default_bucket_key=it.default_bucket_key,
                              context=context)
        ppl = _fit(mod, it, num_epoch=2)
        results.append((ppl, mod.get_params()[0]))
    (ppl1, args1), (ppl2, args2) = results
    np.testing.assert_allclose(ppl1, ppl2, rtol=1e-4)
    for name in args1:
        np.testing.assert_allclose(args1[name], args2[name], atol=1e-4, err_msg=name)


def test_save_checkpoint_and_load_then_keep_fitting(tmp_path):
    rm.random.seed(7)
    it = _lm_iter(n=300)
    sym_gen = _lm_sym_gen()
    mod = BucketingModule(sym_gen, default_bucket_key=it.default_bucket_key)
    _fit(mod, it, num_epoch=1)
    prefix = str(tmp_path / "lm")
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    assert (tmp_path / "lm-symbol.json").exists() and (tmp_path / "lm-0001.params").exists()
    assert rm.sym.load(prefix + "-symbol.json").tojson() == \
        mod._buckets[it.default_bucket_key].symbol.tojson()

    loaded = BucketingModule.load(prefix, 1, sym_gen=sym_gen,
                                  default_bucket_key=it.default_bucket_key,
                                  load_optimizer_states=True)
    assert loaded.params_initialized and not loaded.binded
    loaded.bind(it.provide_data, it.provide_label)
    saved_args, saved_aux = mod.get_params()
    args, aux = loaded.get_params()
    assert sorted(args) == sorted(saved_args) and aux == saved_aux == {}
    for name in saved_args:
        np.testing.assert_array_equal(args[name], saved_args[name], err_msg=name)
    ppl = _fit(loaded, it, num_epoch=2, begin_epoch=1)
    assert len(ppl) == 1 and np.isfinite(ppl[0])
    assert not np.array_equal(loaded.get_params()[0]["pred_weight"], saved_args["pred_weight"])

    with pytest.raises(ValueError, match="sym_gen and default_bucket_key"):
        BucketingModule.load(prefix, 1, sym_gen=sym_gen)
    with pytest.raises(FileNotFoundError):
        BucketingModule.load(prefix, 2, sym_gen=sym_gen, default_bucket_key=20)


def test_install_monitor_reaches_later_buckets():
    calls = []

    class _Mon:
        def install(self, exe):
            calls.append(exe)

    mod = BucketingModule(_scalar_weight_sym_gen, default_bucket_key=10)
    mod.bind([("data", (2,))])
    mod.init_params()
    mod.install_monitor(_Mon())
    mod.switch_bucket(5, [("data", (2,))])
    assert calls == [mod._buckets[10]._exec_group.execs[0],
                     mod._buckets[5]._exec_group.execs[0]]


# ---- bad inputs ------------------------------------------------------------------------------

def test_bad_constructor_arguments():
    with pytest.raises(TypeError, match="sym_gen must be callable"):
        BucketingModule("not a function", default_bucket_key=10)
    with pytest.raises(ValueError, match="default_bucket_key"):
        BucketingModule(_scalar_weight_sym_gen)
    with pytest.raises(TypeError, match=r"must return \(symbol, data_names, label_names\)"):
        BucketingModule(lambda key: rm.sym.Variable("data"), default_bucket_key=10)


def test_data_names_that_do_not_match_the_data_fail_before_any_change():
    mod = BucketingModule(_scalar_weight_sym_gen, default_bucket_key=10)
    with pytest.raises(ValueError, match=r"data_names \['data'\].*provides \['x'\]"):
        mod.bind([("x", (2,))])
    assert mod.stage is Stage.CREATED and mod._buckets == {}
    mod.bind([("data", (2,))])
    mod.init_params()
    bad = DataBatch([np.ones((2,), np.float32)], None, bucket_key=5,
                    provide_data=[DataDesc("x", (2,))])
    with pytest.raises(ValueError, match=r"sym_gen\(5\) returned data_names"):
        mod.forward(bad)
    assert list(mod._buckets) == [10] and mod._curr_module is mod._buckets[10]
    with pytest.raises(ValueError, match="shared_module"):
        mod.bind([("data", (2,))], force_rebind=True, shared_module=mod._buckets[10])


def test_workers_argument_is_passed_only_when_given(monkeypatch):
    seen = []
    real_init = Module.__init__

    def spy(self, *args, **kwargs):
        seen.append(kwargs.pop("workers", "absent"))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Module, "__init__", spy)
    for workers in (None, "pool"):
        mod = BucketingModule(_scalar_weight_sym_gen, default_bucket_key=10, workers=workers)
        assert mod._workers == workers
        mod.bind([("data", (2,))])
    assert seen == ["absent", "pool"]


def test_input_grads_and_outputs_come_from_the_current_bucket():
    mod = BucketingModule(_scalar_weight_sym_gen, default_bucket_key=10)
    mod.bind([("data", (2,))], inputs_need_grad=True)
    mod.init_params(initializer=rm.init.Zero())  # the variable's own init (One) wins
    batch = DataBatch([np.array([2.0, 3.0, 4.0], np.float32)], None, bucket_key=5,
                      provide_data=[DataDesc("data", (3,))])
    mod.forward_backward(batch)
    assert mod._curr_module is mod._buckets[5] and mod._buckets[5].inputs_need_grad
    np.testing.assert_allclose(mod.get_outputs()[0], [2.0, 3.0, 4.0])
    np.testing.assert_allclose(mod.get_input_grads()[0], [1.0, 1.0, 1.0])
    # unnamed ops get the same automatic name in every bucket (fresh NameManager per sym_gen)
    assert mod.output_names == ["make_loss0_output"] == mod._buckets[10].output_names


@pytest.mark.ray
def test_on_two_workers_matches_one_process(ray_cluster, close_modules):
    results = []
    for workers in (None, 2):
        rm.random.seed(5)
        it = _lm_iter(n=300)
        mod = BucketingModule(_lm_sym_gen(), default_bucket_key=it.default_bucket_key,
                              workers=workers)
        ppl = _fit(mod, it, num_epoch=2)
        results.append((ppl, {k: v.copy() for k, v in mod.get_params()[0].items()}))
        if workers:
            close_modules(mod._buckets[it.default_bucket_key])
    (ppl1, args1), (ppl2, args2) = results
    np.testing.assert_allclose(ppl1, ppl2, rtol=1e-4)
    for name in args1:
        scale = np.abs(args1[name]).max()
        np.testing.assert_allclose(args1[name], args2[name], atol=1e-4 * scale, err_msg=name)


@pytest.mark.ray
def test_workers_killed_while_buckets_switch(ray_cluster, close_modules):
    import ray
    runs = []
    for kill in (False, True):
        rm.random.seed(5)
        it = _lm_iter(n=300)
        mod = BucketingModule(_lm_sym_gen(), default_bucket_key=it.default_bucket_key,
                              workers=rm.Workers(2, 3))
        seen = []

        def on_batch(param, mod=mod, kill=kill):
            key = param.locals["data_batch"].bucket_key
            if kill and seen and key != seen[-1] and len(seen) % 7 == 3:  # at a switch
                pool = mod._buckets[mod._default_bucket_key]._pool
                if len(pool) > 2:
                    ray.kill(pool.workers[pool.ranks[0]], no_restart=True)
            seen.append(key)

        ppl = _fit(mod, it, num_epoch=2, callback=on_batch)
        runs.append((ppl, {k: v.copy() for k, v in mod.get_params()[0].items()}))
        pool = mod._buckets[it.default_bucket_key]._pool
        close_modules(mod._buckets[it.default_bucket_key])
        if kill:
            assert sum(e["event"] == "lost" for e in pool.events) >= 1
    (ppl1, args1), (ppl2, args2) = runs
    np.testing.assert_allclose(ppl1, ppl2, rtol=1e-4)
    for name in args1:
        scale = np.abs(args1[name]).max()
        np.testing.assert_allclose(args1[name], args2[name], atol=1e-4 * scale, err_msg=name)


@pytest.mark.ray
def test_a_spare_replays_the_buckets_bound_after_it_became_one(ray_cluster, close_modules):
    """A spare set up while one bucket existed joins after others were bound: it replays
    what was recorded since (their binds) and the run matches the one-process run."""
    import ray
    runs, seen = [], {}
    for workers in (None, rm.Workers(2, 2, spares=1, run_ahead=1)):  # binds as keys come
        rm.random.seed(5)
        it = _lm_iter(n=300)
        mod = BucketingModule(_lm_sym_gen(), default_bucket_key=it.default_bucket_key,
                              workers=workers)

        def on_batch(param, mod=mod):
            pool = mod._buckets[mod._default_bucket_key]._pool
            if pool is None or "killed" in seen:
                return
            if "spare" not in seen:
                deadline = time.monotonic() + 60
                while not pool.spares:  # bounded: a spare starts within a minute
                    assert time.monotonic() < deadline, "no spare ready within 60 s"
                    time.sleep(0.05)
                    pool.poll()
                seen["spare"], seen["buckets"] = min(pool.spares), set(mod._buckets)
            elif set(mod._buckets) - seen["buckets"]:  # bound after the spare was set up
                seen["killed"] = pool.ranks[0]
                ray.kill(pool.workers[seen["killed"]], no_restart=True)

        ppl = _fit(mod, it, num_epoch=2, callback=on_batch)
        runs.append((ppl, {k: v.copy() for k, v in mod.get_params()[0].items()}))
        if workers:
            pool = mod._buckets[it.default_bucket_key]._pool
            close_modules(mod._buckets[it.default_bucket_key])
    joined = [e for e in pool.events if e["event"] == "join" and e.get("spare")]
    assert [e["rank"] for e in joined] == [seen["spare"]], pool.events
    (ppl1, args1), (ppl2, args2) = runs
    np.testing.assert_allclose(ppl1, ppl2, rtol=1e-4)
    for name in args1:
        scale = np.abs(args1[name]).max()
        np.testing.assert_allclose(args1[name], args2[name], atol=1e-4 * scale, err_msg=name)
