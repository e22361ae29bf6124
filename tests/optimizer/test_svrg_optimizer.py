"""_SVRGOptimizer: a wrapper that assigns full-gradient keys and delegates the rest.

Follows MXNet 1.9.1's test_contrib_svrg_optimizer.py (spec section 5), with raymod's
collision-free full-gradient key names.
"""
import numpy as np
import pytest

import raymod as rm
from raymod import optimizer as opt
from raymod.optimizer.svrg import (FULL_GRAD_PREFIX, _AssignmentOptimizer, _SVRGOptimizer,
                                   full_grad_key, is_full_grad_key)


def test_wrapped_default_optimizer_takes_the_keyword_settings():
    svrg = _SVRGOptimizer(default_optimizer="sgd", learning_rate=-1.0)
    assert isinstance(svrg.default_opt, opt.SGD)
    assert isinstance(svrg.aux_opt, _AssignmentOptimizer)
    assert svrg.default_opt.lr == -1.0
    assert svrg.lr == svrg.learning_rate == -1.0
    svrg.set_learning_rate(0.5)  # settings are the wrapped optimizer's
    assert svrg.default_opt.lr == 0.5


@pytest.mark.parametrize("full_name", [full_grad_key("weight"), "weight_full"])
def test_full_gradient_keys_are_assigned_and_others_use_sgd_on_a_local_kvstore(full_name):
    # "weight_full" next to "weight" is MXNet's own naming (its test_kvstore_init_aux_keys)
    idx2name = {0: "weight", 1: full_name}
    kv = rm.kv.create("local")
    kv.set_optimizer(_SVRGOptimizer(default_optimizer="sgd", param_idx2name=idx2name,
                                    learning_rate=1.0))
    weight, full = np.zeros(3, np.float32), np.ones(3, np.float32)
    kv.init(0, weight)
    kv.push(0, np.ones(3, np.float32))
    kv.pull(0, out=weight)
    kv.init(1, full)
    kv.push(1, np.full(3, 2.0, np.float32))
    kv.pull(1, out=full)
    np.testing.assert_array_equal(weight, [-1, -1, -1])  # 0 - 1 * 1
    np.testing.assert_array_equal(full, [2, 2, 2])       # assigned


def test_string_keys_route_by_name_and_device_values_are_summed():
    kv = rm.kv.create("local")
    kv.set_optimizer(_SVRGOptimizer(learning_rate=1.0))
    kv.init("fc_weight", np.zeros(2, np.float32))
    kv.init(full_grad_key("fc_weight"), np.zeros(2, np.float32))
    kv.push(full_grad_key("fc_weight"), [np.ones(2, np.float32)] * 4)
    out = np.zeros(2, np.float32)
    kv.pull(full_grad_key("fc_weight"), out=out)
    np.testing.assert_array_equal(out, [4, 4])


@pytest.mark.parametrize("name", ["weight_full", "fullc_weight", "full"])
def test_user_parameters_named_full_are_trained_not_assigned(name):
    # MXNet 1.9.1 assigns any key whose name contains "full"; raymod only its reserved keys
    # and MXNet's "w_full" next to a parameter "w" (none here)
    svrg = _SVRGOptimizer(param_idx2name={0: name}, learning_rate=1.0)
    weight = np.zeros(2, np.float32)
    opt.get_updater(svrg)(0, np.ones(2, np.float32), weight)
    np.testing.assert_array_equal(weight, [-1, -1])
    assert not is_full_grad_key(name) and is_full_grad_key(full_grad_key(name))
    assert full_grad_key(name).startswith(FULL_GRAD_PREFIX)


def test_states_and_update_counts_belong_to_the_wrapped_optimizer():
    idx2name = {0: "w", 1: full_grad_key("w")}
    svrg = _SVRGOptimizer("sgd", momentum=0.9, param_idx2name=idx2name, learning_rate=0.1)
    updater = opt.get_updater(svrg)
    weights = [np.zeros(3, np.float32), np.zeros(3, np.float32)]
    for _ in range(2):
        updater([0, 1], [np.ones(3, np.float32)] * 2, weights)
    assert updater.states[1] is None and updater.states[0].shape == (3,)
    assert svrg.default_opt.num_update == 2  # assignments do not count as updates
    np.testing.assert_array_equal(weights[1], np.ones(3))
    restored = opt.get_updater(_SVRGOptimizer("sgd", momentum=0.9, param_idx2name=idx2name))
    restored.set_states(updater.get_states())
    assert restored.optimizer.default_opt.num_update == 2
    np.testing.assert_array_equal(restored.states[0], updater.states[0])


def test_multi_precision_float16_weights():
    idx2name = {0: "w", 1: full_grad_key("w")}
    svrg = _SVRGOptimizer("sgd", multi_precision=True, param_idx2name=idx2name,
                          learning_rate=1.0)
    updater = opt.get_updater(svrg)
    weights = [np.zeros(2, np.float16), np.zeros(2, np.float16)]
    updater([0, 1], [np.full(2, 3, np.float16)] * 2, weights)
    np.testing.assert_array_equal(weights[0], [-3, -3])
    np.testing.assert_array_equal(weights[1], [3, 3])
    assert updater.states[0][1].dtype == np.float32  # SGD's master copy (MXNet: last)


def test_constructor_errors_and_no_registration():
    with pytest.raises(TypeError, match="not both"):
        _SVRGOptimizer(opt.SGD(), learning_rate=0.1)
    with pytest.raises(TypeError, match="default_optimizer"):
        _SVRGOptimizer(3)
    with pytest.raises(TypeError, match="already"):
        _SVRGOptimizer(_SVRGOptimizer())
    with pytest.raises(ValueError, match="unknown optimizer"):
        _SVRGOptimizer("nope")
    names = opt.Optimizer.opt_registry.names()
    assert not any("svrg" in n or "assignment" in n for n in names)
