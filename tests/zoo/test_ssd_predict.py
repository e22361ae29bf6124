"""Module.predict on MXNet 1.9.1's SSD deploy symbol returns MXNet's detections.

The deploy network (VGG-reduced SSD ending in softmax + MultiBoxDetection, as the example's
deploy.py saves it) and MXNet's recorded output come from tests/fixtures/mxnet/zoo; the
parameters are made with the generator's recipe (tests/zoo/params.py).
"""
import importlib.util
import json
import os

import numpy as np

import raymod as rm

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures", "mxnet", "zoo")


def _params_recipe():
    spec = importlib.util.spec_from_file_location("_raymod_zoo_params_predict",
                                                  os.path.join(HERE, "params.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ssd_deploy_predict_returns_mxnets_detections():
    params = _params_recipe()
    with open(os.path.join(FIXTURES, "index.json")) as f:
        entry = json.load(f)["networks"]["ssd_deploy"]
    sym = rm.sym.load(os.path.join(FIXTURES, entry["symbol_file"]))
    (image,) = entry["inputs"]
    data = params.make_input(image["name"], image["shape"], image["recipe"])
    arg_params = {n: params.make_param(n, s) for n, s in entry["arg_shapes"].items()
                  if n != image["name"]}
    mod = rm.mod.Module(sym, data_names=[image["name"]], label_names=None)
    mod.bind(data_shapes=[(image["name"], tuple(image["shape"]))], for_training=False)
    mod.set_params(arg_params, {})
    # one image per batch: predict concatenates the batches
    detections = mod.predict(rm.io.NDArrayIter(data, batch_size=1))
    with np.load(os.path.join(FIXTURES, entry["npz_file"])) as z:
        expected = z["infer:0"]
    assert detections.shape == expected.shape == (2, 368, 6)
    # rows are [class id, score, xmin, ymin, xmax, ymax], -1 for suppressed anchors
    np.testing.assert_array_equal(detections[..., 0], expected[..., 0])
    np.testing.assert_allclose(detections, expected, rtol=1e-4, atol=1e-5)
    assert (expected[..., 0] >= 0).any(), "the fixture holds no detection to compare"
