"""Each converted operator, on small graphs: onnxruntime equals raymod's forward (1e-4), and
bad input to ``export_model`` fails with a message naming the argument."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="ONNX export needs raymod[onnx]")
ort = pytest.importorskip("onnxruntime", reason="the ONNX checks run onnxruntime")

import raymod as rm  # noqa: E402
from raymod.onnx import UnsupportedOperatorError  # noqa: E402

S = rm.sym
x = S.Variable("data")
y = S.Variable("other")
idx = S.Variable("idx")    # filled with whole numbers in [-2, 6), out-of-range ones included
cond = S.Variable("cond")  # filled with 0 / 1
NCHW = {"data": (2, 4, 6, 6)}
MAT = {"data": (3, 5)}
PAIR = {"data": (3, 5), "other": (3, 5)}
BCAST = {"data": (3, 5), "other": (1, 5)}

# (id, symbol, data shapes); every other argument is a parameter filled at random
CASES = [
    ("conv", S.Convolution(x, kernel=(3, 3), num_filter=5, pad=(1, 1), stride=(2, 2)), NCHW),
    ("conv_group_dilate", S.Convolution(x, kernel=(3, 3), num_filter=4, num_group=2,
                                        dilate=(2, 2), no_bias=True), NCHW),
    ("deconv", S.Deconvolution(x, kernel=(4, 4), num_filter=3, stride=(2, 2), pad=(1, 1)),
     NCHW),
    ("deconv_adj", S.Deconvolution(x, kernel=(3, 3), num_filter=3, stride=(2, 2), pad=(1, 1),
                                   adj=(1, 1), no_bias=True), NCHW),
    ("deconv_target", S.Deconvolution(x, kernel=(4, 4), num_filter=2, stride=(2, 2),
                                      target_shape=(11, 13)), NCHW),
    ("deconv_group", S.Deconvolution(x, kernel=(2, 2), num_filter=4, stride=(2, 2),
                                     num_group=2), NCHW),
    ("fc", S.FullyConnected(x, num_hidden=7), NCHW),
    ("fc_noflatten", S.FullyConnected(x, num_hidden=3, flatten=False), NCHW),
    ("fc_nobias", S.FullyConnected(x, num_hidden=3, no_bias=True), MAT),
    *[(f"act_{a}", S.Activation(x, act_type=a), MAT)
      for a in ("relu", "sigmoid", "tanh", "softrelu", "softsign")],
    *[(f"leaky_{a}", S.LeakyReLU(x, act_type=a, slope=0.3), NCHW)
      for a in ("leaky", "elu", "selu", "gelu", "prelu")],
    ("batchnorm", S.BatchNorm(x, fix_gamma=False, eps=1e-3), NCHW),
    ("batchnorm_fixgamma", S.BatchNorm(x), NCHW),
    ("instancenorm", S.InstanceNorm(x, eps=1e-3), NCHW),
    ("pool_max", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pool_type="max"), NCHW),
    ("pool_max_full", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pool_type="max",
                                pooling_convention="full"), {"data": (1, 2, 7, 8)}),
    ("pool_avg_pad", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg"),
     NCHW),
    ("pool_avg_nopad_count", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                       pool_type="avg", count_include_pad=False), NCHW),
    ("pool_avg_full", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pool_type="avg",
                                pooling_convention="full"), {"data": (1, 2, 8, 8)}),
    ("pool_sum", S.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="sum"), NCHW),
    *[(f"global_{p}", S.Pooling(x, kernel=(1, 1), global_pool=True, pool_type=p), NCHW)
      for p in ("max", "avg", "sum")],
    ("flatten", S.Flatten(x), NCHW),
    ("concat", S.Concat(x, y, dim=1), {"data": (2, 3, 4), "other": (2, 5, 4)}),
    ("dropout", S.Dropout(x, p=0.5), MAT),
    ("softmax_output", S.SoftmaxOutput(x, name="softmax"), MAT),
    ("softmax_output_4d", S.SoftmaxOutput(x, name="softmax"), NCHW),
    ("softmax_output_multi", S.SoftmaxOutput(x, multi_output=True, name="softmax"), NCHW),
    ("softmax_output_preserve", S.SoftmaxOutput(x, preserve_shape=True, name="softmax"), NCHW),
    ("softmax", S.softmax(x, axis=1, temperature=2.0), NCHW),
    ("log_softmax", S.log_softmax(x), MAT),
    ("softmax_activation", S.SoftmaxActivation(x, mode="channel"), NCHW),
    ("logistic", S.LogisticRegressionOutput(x, name="lro"), MAT),
    ("linear", S.LinearRegressionOutput(x, name="lin"), MAT),
    ("reshape_codes", S.Reshape(x, shape=(0, -1, 3)), NCHW),
    ("reshape_split", S.Reshape(x, shape=(-4, 1, 2, -2)), NCHW),
    ("reshape_merge", S.Reshape(x, shape=(-3, -2)), NCHW),
    ("transpose", S.transpose(x, axes=(0, 2, 3, 1)), NCHW),
    ("transpose_default", S.transpose(x), NCHW),
    ("swapaxis", S.SwapAxis(x, dim1=1, dim2=3), NCHW),
    ("expand_dims", S.expand_dims(x, axis=-1), MAT),
    ("slice", S.slice(x, begin=(None, 1, 0), end=(None, 3, -1), step=(1, 1, 2)), NCHW),
    ("slice_negative_step", S.slice(x, begin=(None, 4), end=(None, 0), step=(1, -2)), MAT),
    ("slice_axis", S.slice_axis(x, axis=1, begin=1, end=None), NCHW),
    ("split", S.SliceChannel(x, num_outputs=2, axis=1), NCHW),
    ("split_squeeze", S.SliceChannel(x, num_outputs=4, axis=1, squeeze_axis=True), NCHW),
    ("clip", S.clip(x, a_min=-0.3, a_max=0.4), MAT),
    ("lrn", S.LRN(x, nsize=3, alpha=0.01, beta=0.75, knorm=2.0), NCHW),
    ("upsampling", S.UpSampling(x, scale=2, sample_type="nearest", num_args=1), NCHW),
    ("upsampling_multi", S.UpSampling(x, y, scale=2, sample_type="nearest", num_args=2),
     {"data": (1, 2, 4, 4), "other": (1, 3, 2, 2)}),
    ("crop", S.Crop(x, y, num_args=2, center_crop=True), {"data": (1, 2, 7, 8),
                                                           "other": (1, 2, 4, 5)}),
    ("crop_offset", S.Crop(x, num_args=1, offset=(1, 2), h_w=(3, 3)), NCHW),
    ("l2norm", S.L2Normalization(x, mode="channel"), NCHW),
    ("add_n", S.add_n(x, y, x), PAIR),
    ("dot", S.dot(x, y, transpose_b=True), PAIR),
    ("dot_nd", S.dot(x, y), {"data": (2, 3, 4), "other": (4, 5)}),
    ("batch_dot", S.batch_dot(x, y, transpose_a=True), {"data": (2, 4, 3), "other": (2, 4, 5)}),
    *[(n, getattr(S, n)(x, y), PAIR) for n in ("elemwise_add", "elemwise_sub",
                                               "elemwise_mul", "elemwise_div")],
    *[(n, getattr(S, n)(x, y), BCAST) for n in ("broadcast_add", "broadcast_sub",
                                                "broadcast_mul", "broadcast_div",
                                                "broadcast_maximum", "broadcast_minimum",
                                                "broadcast_greater", "broadcast_equal",
                                                "broadcast_not_equal")],
    ("scalar_arith", ((x + 2.0) * 3.0 - 1.5) / 2.0, MAT),
    ("rscalar_arith", 1.0 - (2.0 / (x * x + 1.0)), MAT),
    ("power_scalar", (x * x + 1.0) ** 1.5, MAT),
    ("compare_scalar", (x > 0.1) + (x <= -0.2), MAT),
    *[(n, getattr(S, n)(x), MAT) for n in ("abs", "negative", "exp", "tanh", "sigmoid", "relu",
                                           "floor", "ceil", "square", "sin", "cos", "sign")],
    ("log_sqrt", S.log(S.sqrt(S.abs(x) + 1.0)) + S.rsqrt(S.abs(x) + 1.0), MAT),
    ("sum_axis", S.sum(x, axis=(1, 2)), NCHW),
    ("sum_all", S.sum(x), NCHW),
    ("mean_keepdims", S.mean(x, axis=1, keepdims=True), NCHW),
    ("max_exclude", S.max(x, axis=1, exclude=True), NCHW),
    ("min", S.min(x, axis=-1), MAT),
    ("tile", S.tile(x, reps=(2, 1)), MAT),
    ("stack", S.stack(x, y, axis=1), PAIR),
    ("squeeze", S.squeeze(S.expand_dims(x, axis=1)), MAT),
    ("broadcast_to", S.broadcast_to(S.expand_dims(x, axis=0), shape=(4, 3, 5)), MAT),
    ("cast", S.Cast(x, dtype="float64"), MAT),
    ("take_clip", S.take(x, idx, axis=1), {"data": (3, 5), "idx": (2, 2)}),
    ("take_wrap", S.take(x, idx, mode="wrap"), {"data": (4, 3), "idx": (5,)}),
    ("pick", S.pick(x, idx, axis=1), {"data": (3, 5), "idx": (3,)}),
    ("pick_keepdims_wrap", S.pick(x, idx, axis=0, keepdims=True, mode="wrap"),
     {"data": (3, 5), "idx": (5,)}),
    ("one_hot", S.one_hot(idx, depth=4, on_value=2.0, off_value=-1.0), {"idx": (2, 3)}),
    ("where", S.where(cond, x, y), {"cond": (3, 5), "data": (3, 5), "other": (3, 5)}),
    ("where_rows", S.where(cond, x, y), {"cond": (3,), "data": (3, 5), "other": (3, 5)}),
    ("argmax", S.argmax(x, axis=1), MAT),
    ("argmin_keepdims", S.argmin(x, axis=0, keepdims=True), MAT),
    ("argmax_all", S.argmax(x), MAT),
    ("reverse", S.reverse(x, axis=(0, 2)), NCHW),
    ("repeat_axis", S.repeat(x, repeats=3, axis=1), MAT),
    ("repeat_flat", S.repeat(x, repeats=2), MAT),
    ("slice_like", S.slice_like(x, y, axes=(1,)), {"data": (3, 5), "other": (3, 2)}),
    ("round_trunc", S.round(x * 3.0) + S.trunc(x * 3.0) * 10.0, MAT),
    ("hypot", S.broadcast_hypot(x, y), BCAST),
    ("smooth_l1", S.smooth_l1(x * 3.0, scalar=1.5), MAT),
    ("norm_l2", S.norm(x, axis=1), NCHW),
    ("norm_l1_keep", S.norm(x, ord=1, axis=(2, 3), keepdims=True), NCHW),
    ("zeros_ones", S.zeros_like(x) + S.ones_like(x) + x, MAT),
    ("zeros_op", S.broadcast_add(x, S.zeros(shape=(1, 5))), MAT),
    ("layernorm", S.LayerNorm(x, eps=1e-3), NCHW),
    ("layernorm_axis1", S.LayerNorm(x, axis=1), NCHW),
]


def _data(name: str, shape: tuple, rng) -> np.ndarray:
    if name == "idx":
        return rng.integers(-2, 6, shape).astype(np.float32)
    if name == "cond":
        return rng.integers(0, 2, shape).astype(np.float32)
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _arrays(sym, shapes: dict, rng) -> tuple[dict, dict, dict]:
    """(data, arg_params, aux_params) of random values for ``sym`` at ``shapes``."""
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    data = {n: _data(n, s, rng) for n, s in shapes.items()}
    arg = {n: rng.uniform(-1, 1, s).astype(np.float32)
           for n, s in zip(sym.list_arguments(), arg_shapes)
           if n not in shapes and not n.endswith("label")}
    aux = {n: (rng.uniform(0.5, 1.5, s) if "var" in n else rng.uniform(-0.2, 0.2, s))
           .astype(np.float32) for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    return data, arg, aux


def _check(sym, shapes, tmp_path, rng, dynamic=False, run_shapes=None):
    data, arg, aux = _arrays(sym, shapes, rng)
    path = str(tmp_path / "m.onnx")
    rm.onnx.export_model(sym, [arg, aux], list(shapes.values()), onnx_file_path=path,
                         dynamic=dynamic)
    onnx.checker.check_model(path)
    if run_shapes:
        data = {n: _data(n, s, rng) for n, s in run_shapes.items()}
    labels = {n: np.zeros(s, np.float32) for n, s in zip(
        sym.list_arguments(), sym.infer_shape(**{k: v.shape for k, v in data.items()})[0])
        if n not in data and n not in arg}
    ex = sym.bind(rm.cpu(), args={**data, **arg, **labels}, aux_states=aux, grad_req="null")
    ours = [np.asarray(o) for o in ex.forward(is_train=False)]
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, data)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sym,shapes", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_operator_matches_onnxruntime(sym, shapes, tmp_path, rng):
    _check(sym, shapes, tmp_path, rng)


def test_embedding_clips_indices_as_raymod(tmp_path, rng):
    sym = S.Embedding(x, input_dim=6, output_dim=3)
    weight = rng.uniform(-1, 1, (6, 3)).astype(np.float32)
    idx = np.array([[0, 5, 9], [-2, 2.7, 3]], dtype=np.float32)
    path = str(tmp_path / "e.onnx")
    rm.onnx.export_model(sym, {"embedding0_weight": weight}, [idx.shape], onnx_file_path=path)
    ours = sym.bind(rm.cpu(), args={"data": idx, "embedding0_weight": weight},
                    grad_req="null").forward()[0]
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"data": idx})[0]
    np.testing.assert_allclose(theirs, ours, rtol=1e-6)


def test_dynamic_batch_runs_other_batch_sizes(tmp_path, rng):
    net = S.Reshape(S.Convolution(x, kernel=(3, 3), num_filter=4, name="c"), shape=(0, -1))
    net = S.SoftmaxOutput(S.FullyConnected(net, num_hidden=5, name="fc"), name="softmax")
    _check(net, {"data": (2, 3, 6, 6)}, tmp_path, rng, dynamic=True,
           run_shapes={"data": (5, 3, 6, 6)})
    model = onnx.load(str(tmp_path / "m.onnx"))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert [o.name for o in model.graph.output] == ["softmax"]


def test_params_files_and_prefixed_names(tmp_path, rng):
    net = S.SoftmaxOutput(S.BatchNorm(S.FullyConnected(x, num_hidden=4, name="fc"),
                                      fix_gamma=False, name="bn"), name="softmax")
    data, arg, aux = _arrays(net, MAT, rng)
    rm.model.save_checkpoint(str(tmp_path / "m"), 3, net, arg, aux)
    path = rm.onnx.export_model(str(tmp_path / "m-symbol.json"), str(tmp_path / "m-0003.params"),
                                [(3, 5)], onnx_file_path=str(tmp_path / "f.onnx"))
    ex = net.bind(rm.cpu(), args={**data, **arg, "softmax_label": np.zeros(3, np.float32)},
                  aux_states=aux, grad_req="null")
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, data)
    np.testing.assert_allclose(theirs[0], ex.forward()[0], rtol=1e-4, atol=1e-6)


def test_unconvertible_operator_names_op_and_node(tmp_path):
    net = S.FullyConnected(S.topk(x, k=2, name="best"), num_hidden=2, name="fc")
    with pytest.raises(UnsupportedOperatorError, match=r"operator topk \(node 'best'\)"):
        rm.onnx.export_model(net, {}, [(3, 5)], onnx_file_path=str(tmp_path / "t.onnx"))
    act = S.Activation(x, act_type="relu")
    with pytest.raises(UnsupportedOperatorError, match=r"BatchNorm \(node 'bn'\).*axis"):
        rm.onnx.export_model(S.BatchNorm(act, axis=2, name="bn"),
                             {"bn_gamma": np.ones(6), "bn_beta": np.zeros(6),
                              "bn_moving_mean": np.zeros(6), "bn_moving_var": np.ones(6)},
                             [(2, 4, 6)], onnx_file_path=str(tmp_path / "b.onnx"))
    assert not (tmp_path / "b.onnx").exists()


@pytest.mark.parametrize("kwargs,match", [
    ({"in_shapes": [(3, 5), (3, 5)]}, r"in_shapes has 2 shape\(s\), the network has 1 input"),
    ({"in_shapes": [(3, 0)]}, r"shape of input 'data' must be positive"),
    ({"in_shapes": [(3, 5)], "in_types": [np.float32] * 2}, r"in_types has 2 dtype"),
    ({"in_shapes": None}, r"in_shapes must be a list of shape tuples"),
])
def test_bad_arguments_are_named(kwargs, match, tmp_path):
    net = S.FullyConnected(x, num_hidden=2, name="fc")
    prm = {"fc_weight": np.ones((2, 5), np.float32), "fc_bias": np.zeros(2, np.float32)}
    with pytest.raises((ValueError, TypeError), match=match):
        rm.onnx.export_model(net, prm, onnx_file_path=str(tmp_path / "x.onnx"), **kwargs)
    with pytest.raises(TypeError, match="params must be a dict"):
        rm.onnx.export_model(net, 3, [(3, 5)], onnx_file_path=str(tmp_path / "x.onnx"))
    assert not (tmp_path / "x.onnx").exists()
