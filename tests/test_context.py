"""Contexts: ``with rm.cpu(1):`` sets the current context, as ``with mx.cpu(1):`` does."""
import threading

import numpy as np

import raymod as rm


def test_with_context_sets_and_restores_current_context():
    assert rm.current_context() == rm.cpu(0)
    with rm.cpu(1) as ctx:
        assert ctx == rm.cpu(1)
        assert rm.current_context() == rm.cpu(1)
        with rm.cpu(2):
            assert rm.current_context() == rm.cpu(2)
        assert rm.current_context() == rm.cpu(1)
    assert rm.current_context() == rm.cpu(0)


def test_one_context_object_entered_twice_restores_each_level():
    ctx = rm.cpu(3)
    with rm.cpu(1):
        with ctx:
            with rm.cpu(2):
                with ctx:
                    assert rm.current_context() == ctx
                assert rm.current_context() == rm.cpu(2)
            assert rm.current_context() == ctx
        assert rm.current_context() == rm.cpu(1)
    assert rm.current_context() == rm.cpu(0)


def test_context_is_restored_when_the_block_raises():
    try:
        with rm.cpu(4):
            raise KeyError("boom")
    except KeyError:
        pass
    assert rm.current_context() == rm.cpu(0)


def test_current_context_is_per_thread():
    seen = []
    with rm.cpu(1):
        t = threading.Thread(target=lambda: seen.append(rm.current_context()))
        t.start()
        t.join()
    assert seen == [rm.cpu(0)]  # as MXNet: the default lives in a threading.local


def test_eval_without_ctx_runs_on_the_current_context():
    a = rm.sym.Variable("a")
    with rm.cpu(1):
        ex = (a * 2).bind(rm.current_context(), {"a": np.ones(2, np.float32)})
        assert ex.ctx == rm.cpu(1)
        out = (a * 2).eval(a=np.ones(2, np.float32))
    np.testing.assert_array_equal(out[0], [2, 2])


def test_module_default_context_is_cpu0_inside_with_as_in_mxnet():
    # MXNet's Module(context=cpu()) default is evaluated once, at definition: a ``with``
    # block does not change it
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=2)
    with rm.cpu(1):
        mod = rm.mod.Module(net, label_names=None)
    assert mod._context == [rm.cpu(0)]
