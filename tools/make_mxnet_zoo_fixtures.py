"""Record MXNet 1.9.1's own example networks as ground truth for raymod.

Must run under real MXNet (its venv), with MXNet's ``example/`` folder of tag 1.9.1 extracted:

    mkdir -p /tmp/mxnet-1.9.1 && for d in $(git -C MIRROR ls-tree --name-only 1.9.1 example/); do
        git -C MIRROR archive 1.9.1 "$d" | tar -x -C /tmp/mxnet-1.9.1; done
    OMP_NUM_THREADS=2 /tmp/mxvenv/bin/python tools/make_mxnet_zoo_fixtures.py [EXAMPLE_ROOT]
        [--only NAME[,NAME]] [--list] [--no-onednn-check]     # EXAMPLE_ROOT: /tmp/mxnet-1.9.1

(one ``git archive`` per sub-folder because the mirror lacks a blob of ``example/gluon``).
The networks are built by importing the examples' own symbol-building code from that folder at
run time; none of it is copied into raymod. Each network ``NET`` gets, in tests/fixtures/mxnet/zoo/:

    NET-symbol.json   ``sym.tojson()`` of the example's symbol, unchanged
    NET.npz           inputs MXNet drew or that need structure, outputs, gradient summaries
    index.json        one entry per network: inputs, lists, infer_shape/infer_type, which ops,
                      per-array checksums of the recipe-made parameters, what was made
                      deterministic and how, and the npz key of every recorded array

Parameters, auxiliary states, most inputs and all head gradients are not stored: both sides make
them with ``tests/zoo/params.py`` from (name, shape). What is recorded per network:

1. inference: ``forward(is_train=False)`` outputs, in full;
2. training: ``forward(is_train=True)`` + ``backward(head gradients)`` outputs in full, every
   parameter gradient as ``params.summarize`` (full when < 4096 entries, else norm, max |g|,
   projection on a fixed probe and 64 sampled entries), and the auxiliary states afterwards.

Randomness is removed the same way on both sides with ``tests/zoo/graph_edits.py``: sampling
nodes become input variables fed with the values MXNet drew (recorded), Dropout gets p=0 in the
training run, and Python custom ops (Faster R-CNN's proposal_target) are replayed: their inputs
and outputs are recorded here and raymod's test plays the outputs back through a CustomOp.

Each network is recorded in its own process with MXNet's own CPU kernels (oneDNN off: with it,
MXNet 1.9.1 gets the VAE's inference loss wrong), in float32 and, where every op allows it,
float64; a mode whose float32 result strays more than RTOL/4 from float64 is recorded from the
float64 run. A second process re-runs the float32 modes with oneDNN and keeps the discrepancy.
tests/fixtures/mxnet/README.md describes every choice per network.
"""
from __future__ import annotations

import argparse
import ast
import configparser
import contextlib
import importlib
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
import types

os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
os.environ.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")

import numpy as np  # noqa: E402
import mxnet as mx  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "mxnet", "zoo")
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import params as P  # noqa: E402
import graph_edits as E  # noqa: E402

EXAMPLE_ROOT = "/tmp/mxnet-1.9.1"
BATCH = 2
NUM_CLASSES = 10


# ------------------------------------------------------------------ importing the examples
def ex_path(*parts: str) -> str:
    return os.path.join(EXAMPLE_ROOT, "example", *parts)


@contextlib.contextmanager
def on_path(*dirs: str):
    """Put example folders first on sys.path (their modules import siblings by bare name)."""
    saved = list(sys.path)
    sys.path[:0] = list(dirs)
    try:
        yield
    finally:
        sys.path[:] = saved


def forget_modules(*names: str) -> None:
    """Drop cached example modules whose bare names clash between examples (lstm, symbol...)."""
    for key in list(sys.modules):
        if key.split(".")[0] in names:
            del sys.modules[key]


def load_file(relpath: str, extra_dirs: tuple = ()) -> types.ModuleType:
    """Import one example file by path (names like inception-bn.py are not identifiers)."""
    path = ex_path(relpath)
    name = "mxzoo_" + re.sub(r"\W", "_", relpath)
    with on_path(os.path.dirname(path), *extra_dirs):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def run_statements(module: types.ModuleType, container: str, starts: tuple,
                   namespace: dict) -> dict:
    """Execute, in ``namespace`` (over the module's globals), the statements of the
    ``if __name__ == '__main__'`` block (container ``'__main__'``) or of function ``container``
    whose source begins with one of ``starts``. Used where an example builds its symbol inside
    its training entry point (its data loading and training are skipped)."""
    src = open(module.__file__).read()
    tree = ast.parse(src)
    body = None
    for node in tree.body:
        is_main = isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        if container == "__main__" and is_main:
            body = node.body
        elif isinstance(node, ast.FunctionDef) and node.name == container:
            body = node.body
    if body is None:
        raise RuntimeError(f"{module.__file__}: no {container!r} block")
    chosen = [s for s in body if ast.get_source_segment(src, s).lstrip().startswith(starts)]
    if len(chosen) != len(starts):
        raise RuntimeError(f"{module.__file__}:{container}: found {len(chosen)} of {starts}")
    ns = dict(vars(module))
    ns.update(namespace)
    exec(compile(ast.Module(body=chosen, type_ignores=[]), module.__file__, "exec"), ns)
    return ns


def stub_modules(*names: str, **attrs) -> None:
    """Empty stand-ins for imports an example needs only for data I/O (skimage, cv2, scipy)."""
    for name in names:
        if name not in sys.modules:
            try:
                importlib.import_module(name)
                continue
            except ImportError:
                pass
            mod = types.ModuleType(name)
            sys.modules[name] = mod
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, mod)
    for dotted, value in attrs.items():
        mod_name, _, attr = dotted.replace("__", ".").rpartition(".")
        setattr(sys.modules[mod_name], attr, value)


@contextlib.contextmanager
def patched(obj, name, value):
    old = getattr(obj, name, None)
    had = hasattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if had:
            setattr(obj, name, old)
        else:
            delattr(obj, name)


# ------------------------------------------------------------------ network specifications
class Net:
    """One network to record: its symbol, its inputs and how to feed them."""

    def __init__(self, symbol, inputs: dict, grad_inputs=(), notes: str = "",
                 custom=None, group: str = "", mxnet_symbol=None, substitutions=None):
        self.symbol = symbol
        # what MXNet computes with, when it cannot run ``symbol`` itself (same arguments)
        self.mxnet_symbol = mxnet_symbol
        self.substitutions = substitutions
        # name -> {"shape", and "recipe": {...} (params.make_input) or "array": ndarray}
        self.inputs = inputs
        self.grad_inputs = list(grad_inputs)
        self.notes = notes
        # replayed Python custom op: {"op_type", "operator": CustomOp class, "prop": its Prop}
        self.custom = custom
        self.group = group


def img(shape, low=-1.0, high=1.0):
    return {"shape": tuple(shape), "recipe": {"kind": "uniform", "low": low, "high": high}}


def ints(shape, high, low=0):
    return {"shape": tuple(shape), "recipe": {"kind": "int", "high": high, "low": low}}


def given(array):
    array = np.asarray(array, dtype=np.float32)
    return {"shape": array.shape, "array": array}


def classifier(sym, hw, channels=3, batch=BATCH, notes=""):
    return Net(sym, {"data": img((batch, channels) + tuple(hw)),
                     "softmax_label": ints((batch,), NUM_CLASSES)}, notes=notes,
               group="image-classification")


NETS: dict = {}


def network(name):
    def deco(fn):
        NETS[name] = fn
        return fn
    return deco


def ic(module_file):
    return load_file(f"image-classification/symbols/{module_file}")


# image-classification/symbols: every file (resnetv1.py is a byte-identical copy of resnet-v1.py)
@network("alexnet")
def _():
    return classifier(ic("alexnet.py").get_symbol(NUM_CLASSES), (67, 67),
                      notes="67x67: the smallest input whose third pooling still has a 1x1 output")


@network("vgg11")
def _():
    return classifier(ic("vgg.py").get_symbol(NUM_CLASSES, num_layers=11), (32, 32))


@network("vgg11_bn")
def _():
    return classifier(ic("vgg.py").get_symbol(NUM_CLASSES, num_layers=11, batch_norm=True),
                      (32, 32))


@network("googlenet")
def _():
    return classifier(ic("googlenet.py").get_symbol(NUM_CLASSES), (64, 64))


@network("inception_bn_small")
def _():
    return classifier(ic("inception-bn.py").get_symbol(NUM_CLASSES, image_shape="3,28,28"),
                      (28, 28), notes="image_shape 3,28,28 selects the example's CIFAR-sized "
                                      "branch (its ImageNet branch needs 224x224)")


@network("inception_v3")
def _():
    return classifier(ic("inception-v3.py").get_symbol(NUM_CLASSES), (299, 299), batch=1,
                      notes="299x299 is the only size its fixed 8x8 final pooling accepts; "
                            "batch 1 to keep the test fast")


@network("inception_v4")
def _():
    return classifier(ic("inception-v4.py").get_symbol(NUM_CLASSES), (299, 299), batch=1,
                      notes="batch 1, 299x299 (fixed 8x8 final pooling)")


@network("inception_resnet_v2")
def _():
    return classifier(ic("inception-resnet-v2.py").get_symbol(NUM_CLASSES), (139, 139),
                      batch=1, notes="139x139: global pooling allows small inputs; batch 1")


@network("resnet18_imagenet")
def _():
    return classifier(ic("resnet.py").get_symbol(NUM_CLASSES, 18, "3,64,64"), (64, 64))


@network("resnet20_cifar")
def _():
    return classifier(ic("resnet.py").get_symbol(NUM_CLASSES, 20, "3,28,28"), (28, 28))


@network("resnet_v1_18_imagenet")
def _():
    return classifier(ic("resnet-v1.py").get_symbol(NUM_CLASSES, 18, "3,64,64"), (64, 64))


@network("resnet_v1_20_cifar")
def _():
    return classifier(ic("resnet-v1.py").get_symbol(NUM_CLASSES, 20, "3,28,28"), (28, 28))


@network("resnext50")
def _():
    return classifier(ic("resnext.py").get_symbol(NUM_CLASSES, 50, "3,64,64"), (64, 64))


@network("mobilenet")
def _():
    return classifier(ic("mobilenet.py").get_symbol(NUM_CLASSES, alpha=0.25, resolution=64),
                      (64, 64), notes="alpha 0.25, resolution 64")


@network("mobilenetv2")
def _():
    return classifier(ic("mobilenetv2.py").get_symbol(NUM_CLASSES, multiplier=0.25), (64, 64),
                      notes="multiplier 0.25; global pooling, so 64x64 input")


@network("lenet")
def _():
    return classifier(ic("lenet.py").get_symbol(NUM_CLASSES), (28, 28), channels=1)


@network("lenet_stn")
def _():
    return classifier(ic("lenet.py").get_symbol(NUM_CLASSES, add_stn=True), (28, 28),
                      channels=1, notes="lenet.py with add_stn=True (SpatialTransformer)")


@network("mlp")
def _():
    return classifier(ic("mlp.py").get_symbol(NUM_CLASSES), (28, 28), channels=1)


# rnn/bucketing: sym_gen lives in the scripts' entry points; build it for one bucket
VOCAB, SEQ_LEN = 40, 8


@network("lstm_bucketing")
def _():
    mod = load_file("rnn/bucketing/lstm_bucketing.py")
    args = mod.parser.parse_args(["--num-hidden", "32", "--num-embed", "16"])
    ns = run_statements(mod, "__main__", ("stack =", "for i in range(args.num_layers)",
                                          "def sym_gen"),
                        {"args": args, "vocab": dict.fromkeys(range(VOCAB))})
    sym = ns["sym_gen"](SEQ_LEN)[0]
    return Net(sym, {"data": ints((BATCH, SEQ_LEN), VOCAB),
                     "softmax_label": ints((BATCH, SEQ_LEN), VOCAB)}, group="rnn",
               notes=f"2x LSTMCell(32), embed 16, vocab {VOCAB}, bucket {SEQ_LEN}")


@network("cudnn_rnn_bucketing")
def _():
    mod = load_file("rnn/bucketing/cudnn_rnn_bucketing.py")
    args = mod.parser.parse_args(["--num-hidden", "32", "--num-embed", "16"])
    ns = run_statements(mod, "train", ("if args.stack_rnn", "def sym_gen"),
                        {"args": args, "vocab": dict.fromkeys(range(VOCAB))})
    sym = ns["sym_gen"](SEQ_LEN)[0]
    # the script's iterators use layout 'TN' for training: data is (seq_len, batch)
    return Net(sym, {"data": ints((SEQ_LEN, BATCH), VOCAB),
                     "softmax_label": ints((SEQ_LEN, BATCH), VOCAB)}, group="rnn",
               notes=f"FusedRNNCell lstm, 2 layers of 32, embed 16, vocab {VOCAB}, bucket "
                     f"{SEQ_LEN}, layout TN")


# rcnn: Faster R-CNN, ResNet body, small
def rcnn_modules():
    forget_modules("symnet", "symdata", "symimdb")
    with on_path(ex_path("rcnn")):
        sr = importlib.import_module("symnet.symbol_resnet")
        pt = importlib.import_module("symnet.proposal_target")
    return sr, pt


RCNN = dict(anchor_scales=(2, 4, 8), anchor_ratios=(0.5, 1, 2), rpn_feature_stride=16,
            rpn_pre_topk=64, rpn_post_topk=12, rpn_nms_thresh=0.7, rpn_min_size=4,
            num_classes=NUM_CLASSES, rcnn_feature_stride=16, rcnn_pooled_size=(14, 14),
            rcnn_batch_size=BATCH, units=(1, 1, 1, 1), filter_list=(64, 128, 256, 512))
RCNN_HW = 128


def rcnn_inputs(with_labels):
    feat = RCNN_HW // 16
    anchors = len(RCNN["anchor_scales"]) * len(RCNN["anchor_ratios"])
    im_info = np.array([[RCNN_HW, RCNN_HW, 1.0]] * BATCH, np.float32)
    inputs = {"data": img((BATCH, 3, RCNN_HW, RCNN_HW)), "im_info": given(im_info)}
    if with_labels:
        # gt boxes (x1, y1, x2, y2, class); class 0 rows are padding
        gt = np.array([[[10, 12, 60, 70, 3], [50, 40, 120, 100, 7], [0, 0, 0, 0, 0]],
                       [[30, 20, 90, 110, 1], [5, 60, 50, 120, 5], [70, 10, 125, 50, 9]]],
                      np.float32)
        inputs["gt_boxes"] = given(gt)
        inputs["label"] = ints((BATCH, 1, anchors * feat, feat), 2, low=-1)
        inputs["bbox_target"] = img((BATCH, 4 * anchors, feat, feat))
        inputs["bbox_weight"] = ints((BATCH, 4 * anchors, feat, feat), 2)
    return inputs


@network("faster_rcnn_train")
def _():
    sr, pt = rcnn_modules()
    sym = sr.get_resnet_train(rpn_batch_rois=256, rcnn_batch_rois=8, rcnn_fg_fraction=0.25,
                              rcnn_fg_overlap=0.5, rcnn_bbox_stds=(0.1, 0.1, 0.2, 0.2), **RCNN)
    return Net(sym, rcnn_inputs(True), group="rcnn",
               custom={"op_type": "proposal_target", "operator": pt.ProposalTargetOperator,
                       "prop": pt.ProposalTargetProp},
               notes="symnet.symbol_resnet.get_resnet_train with units (1,1,1,1), filters "
                     "(64,128,256,512), anchors scales (2,4,8), 128x128 images, 12 post-NMS "
                     "rois per image, 8 sampled rcnn rois")


@network("faster_rcnn_test")
def _():
    sr, _pt = rcnn_modules()
    kw = {k: v for k, v in RCNN.items()}
    sym = sr.get_resnet_test(**kw)
    return Net(sym, rcnn_inputs(False), group="rcnn",
               notes="symnet.symbol_resnet.get_resnet_test, same settings as faster_rcnn_train")


# ssd: vgg16_reduced body with a configuration small enough for 64x64 images
SSD_SMALL = dict(from_layers=["relu4_3", "relu7", ""], num_filters=[512, -1, 256],
                 strides=[-1, -1, 2], pads=[-1, -1, 1],
                 sizes=[[.1, .141], [.2, .272], [.37, .447]],
                 ratios=[[1, 2, .5], [1, 2, .5, 3, 1. / 3], [1, 2, .5]],
                 normalizations=[20, -1, -1], steps=[], num_classes=NUM_CLASSES,
                 nms_thresh=0.5, force_suppress=False, nms_topk=400)
SSD_HW = 64


def ssd_factory():
    forget_modules("symbol", "config", "tools")
    with on_path(ex_path("ssd")):
        return importlib.import_module("symbol.symbol_factory")


@network("ssd_train")
def _():
    sf = ssd_factory()
    with on_path(ex_path("ssd"), ex_path("ssd", "symbol")):
        sym = sf.get_symbol_train("vgg16_reduced", SSD_HW, **SSD_SMALL)
    label = np.array([[[2, .1, .1, .5, .6], [7, .4, .3, .9, .8], [-1, -1, -1, -1, -1]],
                      [[0, .2, .2, .7, .9], [-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1]]],
                     np.float32)
    return Net(sym, {"data": img((BATCH, 3, SSD_HW, SSD_HW)), "label": given(label)},
               group="ssd", notes=f"symbol_factory.get_symbol_train('vgg16_reduced', {SSD_HW}) "
                                  f"with three feature layers (relu4_3, relu7, one extra) "
                                  f"instead of six, so 64x64 images suffice")


@network("ssd_deploy")
def _():
    sf = ssd_factory()
    with on_path(ex_path("ssd"), ex_path("ssd", "symbol")):
        sym = sf.get_symbol("vgg16_reduced", SSD_HW, **SSD_SMALL)
    return Net(sym, {"data": img((BATCH, 3, SSD_HW, SSD_HW))}, group="ssd",
               notes="symbol_factory.get_symbol (softmax + MultiBoxDetection, what deploy.py "
                     "saves), same settings as ssd_train")


# fcn-xs
@network("fcn32s")
def _():
    mod = load_file("fcn-xs/symbol_fcnxs.py")
    return Net(mod.get_fcn32s_symbol(numclass=NUM_CLASSES),
               {"data": img((1, 3, 32, 32)), "softmax_label": ints((1, 32, 32), NUM_CLASSES)},
               group="fcn-xs", notes="batch 1 (as the example), 32x32: the smallest size "
                                     "that leaves fc6's 7x7 window room after conv1_1's pad 100")


@network("fcn8s")
def _():
    mod = load_file("fcn-xs/symbol_fcnxs.py")
    return Net(mod.get_fcn8s_symbol(numclass=NUM_CLASSES),
               {"data": img((1, 3, 32, 32)), "softmax_label": ints((1, 32, 32), NUM_CLASSES)},
               group="fcn-xs", notes="batch 1, 32x32")


# ctc: LSTM OCR with MXNet's own CTC loss
CTC = dict(num_lstm_layer=2, seq_len=10, num_hidden=16, num_label=3)


@network("ctc_lstm")
def _():
    forget_modules("lstm")
    with on_path(ex_path("ctc")):
        lstm = importlib.import_module("lstm")
    sym = lstm.lstm_unroll(loss_type="ctc", **CTC)
    inputs = {"data": img((BATCH, CTC["seq_len"], 12))}
    for name, shape in lstm.init_states(BATCH, CTC["num_lstm_layer"], CTC["num_hidden"]):
        inputs[name] = img(shape, -0.5, 0.5)
    # labels 1..10 (0 is the blank); the second row is padded with 0
    inputs["label"] = given([[3, 1, 4], [10, 2, 0]])
    return Net(sym, inputs, group="ctc",
               notes="lstm.lstm_unroll(2 layers, seq 10, hidden 16, 3 labels, loss 'ctc'): "
                     "contrib.ctc_loss; 12 features per step")


# speech_recognition: DeepSpeech2's arch() with a small configuration
DS2_CFG = """
[common]
mode = train
batch_size = 4
[arch]
channel_num = 4
conv_layer1_filter_dim = [5, 5]
conv_layer1_stride = [2, 2]
conv_layer2_filter_dim = [3, 3]
conv_layer2_stride = [1, 2]
num_rnn_layer = 2
num_hidden_rnn_list = [12, 12]
num_hidden_proj = 0
num_rear_fc_layers = 1
num_hidden_rear_fc_list = [16]
act_type_rear_fc_list = ["relu"]
rnn_type = bigru
lstm_type = fc_lstm
is_batchnorm = True
is_bucketing = True
max_t_count = 20
max_label_length = 3
n_classes = 8
"""


@network("deepspeech2")
def _():
    forget_modules("lstm")
    ctc_lstm = load_file("ctc/lstm.py")
    with on_path(ex_path("speech_recognition")):
        arch = importlib.import_module("arch_deepspeech")
    cfg = configparser.ConfigParser()
    cfg.read_string(DS2_CFG)
    args = argparse.Namespace(config=cfg)
    batch, frames, width = 4, 20, 16

    def warpctc_standin(data, label, label_length, input_length):
        # pip MXNet has no WarpCTC plugin: use the ctc example's MXNet-CTC head instead
        label = mx.sym.Reshape(label, shape=(-1, label_length))
        return ctc_lstm._add_mxnet_ctc_loss(data, input_length, label)

    with patched(mx.sym, "WarpCTC", warpctc_standin):
        sym, state_names, _ = arch.BucketingArch(args).sym_gen(frames)
    inputs = {"data": img((batch, frames, width))}
    for name, shape in arch.prepare_data(args):
        inputs[name] = img(shape, -0.5, 0.5)
    inputs["label"] = given([[1, 2, 3], [4, 5, 0], [8, 8, 2], [6, 0, 0]])
    return Net(sym, inputs, group="speech_recognition",
               notes="arch_deepspeech.BucketingArch.sym_gen(20) with bigru 2x12, conv 4 "
                     "channels (5x5/2, 3x3/(1,2)), rear fc 16, BatchNorm, batch 4, 16 features; "
                     "mx.sym.WarpCTC (a plugin missing from pip MXNet) replaced by the ctc "
                     "example's _add_mxnet_ctc_loss (contrib.ctc_loss + MakeLoss, softmax "
                     "under BlockGrad)")


# neural-style: VGG19 features, gram matrices and the losses nstyle.py optimises
@network("neural_style")
def _():
    stub_modules("skimage", "skimage.io", "skimage.transform", "skimage.restoration",
                 skimage__restoration__denoise_tv_chambolle=None)
    forget_modules("find_mxnet", "model_vgg19", "nstyle")
    with on_path(ex_path("neural-style")):
        vgg = importlib.import_module("model_vgg19")
        nstyle = importlib.import_module("nstyle")
    size = (32, 32)
    style, content = vgg.get_symbol()
    gram, _scale = nstyle.style_gram_symbol(size, style)
    style_loss, content_loss = nstyle.get_loss(gram, content)
    sym = mx.sym.Group([style_loss, content_loss])
    inputs = {"data": img((1, 3) + size)}
    _, out_shapes, _ = gram.infer_shape(data=(1, 3) + size)
    for i, shape in enumerate(out_shapes):
        inputs[f"target_gram_{i}"] = img(shape)
    _, (cshape,), _ = content.infer_shape(data=(1, 3) + size)
    inputs["target_content"] = img(cshape, 0, 1)
    return Net(sym, inputs, grad_inputs=["data"], group="neural-style",
               notes="model_vgg19.get_symbol + nstyle.style_gram_symbol + nstyle.get_loss, "
                     "Group(style losses, content loss) as nstyle.train_nstyle binds it; "
                     "32x32 image; the data gradient is recorded too (what nstyle optimises)")


# vae-gan: the six symbols vaegan_mxnet.train binds
VG = dict(nef=8, ndf=8, ngf=8, Z=8)


def vaegan():
    stub_modules("cv2", "scipy", "scipy.io", scipy__io__savemat=None)
    return load_file("vae-gan/vaegan_mxnet.py")


@network("vaegan_encoder")
def _():
    m = vaegan()
    z_mu, z_lv, z = m.encoder(VG["nef"], VG["Z"], BATCH)
    return Net(mx.sym.Group([z_mu, z_lv, z]), {"data": img((BATCH, 3, 32, 32))},
               group="vae-gan", notes="encoder(nef 8, z 8): random_normal frozen (recorded)")


@network("vaegan_generator")
def _():
    m = vaegan()
    sym = m.generator(VG["ngf"], 3, z_dim=VG["Z"], activation="sigmoid")
    return Net(sym, {"rand": img((BATCH, VG["Z"]))}, grad_inputs=["rand"], group="vae-gan")


@network("vaegan_discriminator1")
def _():
    m = vaegan()
    return Net(m.discriminator1(VG["ndf"]), {"data": img((BATCH, 3, 32, 32))},
               grad_inputs=["data"], group="vae-gan")


@network("vaegan_discriminator2")
def _():
    m = vaegan()
    return Net(m.discriminator2(VG["ndf"]),
               {"data": img((BATCH, VG["ndf"] * 4, 4, 4)), "label": ints((BATCH,), 2)},
               grad_inputs=["data"], group="vae-gan")


@network("vaegan_layer_loss")
def _():
    m = vaegan()
    shape = (BATCH, VG["nef"] * 4, 4, 4)
    return Net(m.DiscriminatorLayerLoss(), {"data": img(shape), "label": img(shape)},
               grad_inputs=["data"], group="vae-gan")


@network("vaegan_kl_loss")
def _():
    m = vaegan()
    return Net(m.KLDivergenceLoss(), {"data": img((BATCH * 2, VG["Z"]))},
               grad_inputs=["data"], group="vae-gan")


# autoencoder/variational_autoencoder: the symbol VAE.train_vae builds (its fit is skipped)
@network("vae")
def _():
    mod = load_file("autoencoder/variational_autoencoder/VAE.py")
    captured = {}

    class Capture:
        def __init__(self, symbol, data_names, label_names, **_kw):
            captured["symbol"] = symbol

        def fit(self, *a, **k):
            return None

    features = 16
    x = np.zeros((4, features), np.float32)
    with patched(mx.mod, "Module", Capture):
        mod.VAE.train_vae(x, None, BATCH, 4, 16, 16, 0.001, 0.01, 1, "sgd", None,
                          mod.VAE.Bernoulli, mx.init.Normal(0.01))
    return Net(captured["symbol"], {"data": img((BATCH, features), 0.05, 0.95),
                                    "loss_label": img((BATCH, features), 0, 1)},
               group="autoencoder", notes="VAE.train_vae(n_latent 4, hidden 16/16, 16 features)"
                                          " with Module replaced by a recorder; random_normal "
                                          "frozen (recorded)")


# sparse: factorization machine and wide & deep, rebuilt dense
def dense_variable(orig):
    def var(name, *args, stype=None, **kwargs):
        return orig(name, *args, **kwargs)
    return var


@network("factorization_machine")
def _():
    mod = load_file("sparse/factorization_machine/model.py")
    num_features = 20
    cfg = {"v": 0.01, "w": 0.01, "w0": 0.01}
    inits = {"v": mx.init.Normal(0.001), "w": mx.init.Normal(0.01), "w0": mx.init.Normal(0.01)}
    with patched(mx.symbol, "Variable", dense_variable(mx.symbol.Variable)):
        sym = mod.factorization_machine_model(4, num_features, cfg, cfg, inits)
        # MXNet implements _square_sum for row_sparse input only: compute with sum(square(v))
        with mx.name.NameManager(), \
                patched(mx.symbol._internal, "_square_sum", lambda data, axis, keepdims:
                        mx.symbol.sum(mx.symbol.square(data), axis=axis, keepdims=keepdims)):
            run_sym = mod.factorization_machine_model(4, num_features, cfg, cfg, inits)
    return Net(sym, {"data": img((BATCH, num_features), 0, 1),
                     "softmax_label": ints((BATCH,), 2)}, group="sparse", mxnet_symbol=run_sym,
               substitutions={"_square_sum(v, axis=1, keepdims=True)":
                              "sum(square(v), axis=1, keepdims=True) (MXNet's _square_sum "
                              "refuses dense input)"},
               notes="model.factorization_machine_model(factor 4, 20 features) built with "
                     "stype dropped from every Variable: csr data and row_sparse v/w become "
                     "dense; the ops (dot, _square_sum, ...) are the example's")


@network("wide_deep")
def _():
    mod = load_file("sparse/wide_deep/model.py")
    dims, n_cont, n_lin = [7, 5], 6, 12
    dense_embedding = lambda **kw: mx.symbol.Embedding(  # noqa: E731
        **{k: v for k, v in kw.items() if k != "sparse_grad"})
    with patched(mx.symbol, "Variable", dense_variable(mx.symbol.Variable)), \
            patched(mx.symbol.sparse, "dot", mx.symbol.dot), \
            patched(mx.symbol.sparse, "Embedding", dense_embedding):
        sym = mod.wide_deep_model(n_lin, len(dims), n_cont, dims, [8, 16, 12])
    rng = np.random.default_rng(7)
    dns = np.concatenate([rng.integers(0, d, (BATCH, 1)) for d in dims]
                         + [rng.uniform(-1, 1, (BATCH, n_cont))], axis=1)
    return Net(sym, {"csr_data": img((BATCH, n_lin), 0, 1), "dns_data": given(dns),
                     "softmax_label": ints((BATCH,), 2)}, group="sparse",
               notes="model.wide_deep_model(12 linear, 2 embedded (dims 7, 5), 6 continuous, "
                     "hidden [8, 16, 12]) rebuilt dense: stype dropped, sparse.dot -> dot, "
                     "sparse.Embedding -> Embedding without sparse_grad")


# ------------------------------------------------------------------ recording
def shapes_of(sym, shapes):
    arg, out, aux = sym.infer_shape(**shapes)
    return ({n: list(s) for n, s in zip(sym.list_arguments(), arg)}, [list(s) for s in out],
            {n: list(s) for n, s in zip(sym.list_auxiliary_states(), aux)})


def input_array(name, spec):
    if "array" in spec:
        return spec["array"]
    return P.make_input(name, spec["shape"], spec["recipe"])


class CustomCapture:
    """Wraps a Python custom operator's forward to record what it received and returned,
    under the label of the run in progress (``self.tag``)."""

    def __init__(self, op_cls):
        self.op_cls = op_cls
        self.calls: dict = {}
        self.tag = None
        self._orig = op_cls.forward

    def __enter__(self):
        orig, capture = self._orig, self

        def forward(op, is_train, req, in_data, out_data, aux):
            np.random.seed(0)   # the op samples with numpy's global generator
            orig(op, is_train, req, in_data, out_data, aux)
            capture.calls.setdefault(capture.tag, []).append(
                ([a.asnumpy() for a in in_data], [a.asnumpy() for a in out_data]))
        self.op_cls.forward = forward
        return self

    def __exit__(self, *exc):
        self.op_cls.forward = self._orig


def bind(sym, inputs, params, aux, grads, dtype=np.float32):
    args = {k: mx.nd.array(v, dtype=dtype) for k, v in (inputs | params).items()
            if k in sym.list_arguments()}
    args_grad = {k: mx.nd.zeros(args[k].shape, dtype=dtype) for k in grads}
    req = {k: ("write" if k in grads else "null") for k in args}
    return sym.bind(mx.cpu(), args, args_grad=args_grad, grad_req=req,
                    aux_states={k: mx.nd.array(v, dtype=dtype) for k, v in aux.items()})


RTOL = 1e-4
# a mode whose MXNet float32 result is further than this from MXNet's float64 result is
# recorded in float64: two float32 runs would then differ by ~2x that, too close to RTOL
F32_TRUST = RTOL / 4


def rel(a, b, floor=1e-30):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), floor))


def run_mode(sym, train, dtype, inputs, params, aux, grad_names, name, n_out, probes):
    """One MXNet run: outputs, probes and (training) gradients and aux states afterwards."""
    exe = bind(sym, inputs, params, aux, grad_names if train else [], dtype)
    outs = [o.asnumpy() for o in exe.forward(is_train=train)]
    res = {"out": outs[:n_out], "probe": dict(zip(probes, outs[n_out:]))}
    if train:
        heads = [P.head_grad(f"{name}:{i}", o.shape) for i, o in enumerate(outs[:n_out])]
        exe.backward([mx.nd.array(h, dtype=dtype) for h in heads]
                     + [mx.nd.zeros(o.shape, dtype=dtype) for o in outs[n_out:]])
        res["heads"] = heads
    mx.nd.waitall()
    if train:
        res["grads"] = {g: exe.grad_dict[g].asnumpy() for g in grad_names}
        res["aux"] = {k: exe.aux_dict[k].asnumpy() for k in aux}
    return res


def discrepancy(r32, r64) -> dict:
    """Per recorded array, MXNet float32's relative distance from MXNet float64 (gradients
    with the test's floor: 1e-3 of the norm of all gradients together)."""
    d = {f"out:{i}": rel(a, b) for i, (a, b) in enumerate(zip(r32["out"], r64["out"]))}
    d.update({f"probe:{p}": rel(r32["probe"][p], r64["probe"][p]) for p in r64["probe"]})
    if "grads" in r64:
        total = float(np.sqrt(sum(np.sum(np.square(g, dtype=np.float64))
                                  for g in r64["grads"].values())))
        floor = max(1e-3 * total, 1e-30)
        d.update({f"grad:{k}": rel(r32["grads"][k], g, floor) for k, g in r64["grads"].items()})
        d.update({f"aux:{k}": rel(r32["aux"][k], a) for k, a in r64["aux"].items()})
    return d


def stored(a):
    """How an array is kept in the npz: float arrays as float32 (a float64 reference loses
    <= 6e-8 relative to the rounding, far below RTOL; float32 compresses twice as well),
    positions as int32."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return a.astype(np.float32)
    return a.astype(np.int32) if a.dtype.kind in "iu" else a


def short_checksum(a):
    c = P.checksum(a)
    return {"crc32": c["crc32"], "sum": c["sum"]}


def dump_index(index, path):
    """indent=1 JSON with every list of numbers on one line (shapes, stats)."""
    text = json.dumps(index, indent=1)
    text = re.sub(r"\[[\d\s,.eE+-]*\]", lambda m: " ".join(m.group(0).split()), text)
    with open(path, "w") as f:
        f.write(text + "\n")


def prepare(name, net, frozen_values=None) -> types.SimpleNamespace:
    """Everything both a recording and a check run need: the graphs MXNet runs (sampling
    nodes frozen, probes added, Dropout p=0 for training), inputs, parameters, aux states."""
    sym = net.symbol
    graph = json.loads(sym.tojson())
    in_shapes = {k: tuple(v["shape"]) for k, v in net.inputs.items()}
    arg_shapes, out_shapes, aux_shapes = shapes_of(sym, in_shapes)
    # what MXNet runs: the symbol itself, or a stand-in with the same arguments and outputs
    run_sym = sym if net.mxnet_symbol is None else net.mxnet_symbol
    if run_sym is not sym and (run_sym.list_arguments() != sym.list_arguments()
                               or run_sym.list_auxiliary_states() != sym.list_auxiliary_states()):
        raise RuntimeError(f"{name}: the MXNet stand-in symbol has other arguments")
    cmp_graph, frozen = E.freeze_random(json.loads(run_sym.tojson()))
    inputs = {k: input_array(k, v) for k, v in net.inputs.items()}
    params = {n: P.make_param(n, s) for n, s in arg_shapes.items() if n not in inputs}
    aux = {n: P.make_param(n, s) for n, s in aux_shapes.items()}
    if frozen and frozen_values is not None:
        inputs.update({n: frozen_values[n] for n in frozen})
    elif frozen:   # draw once with MXNet; both modes and raymod then use these values
        internals = run_sym.get_internals()
        group = mx.sym.Group([internals[n + "_output"] for n in frozen])
        exe = bind(group, inputs, params, {}, [])
        mx.random.seed(11)
        for n, value in zip(frozen, exe.forward(is_train=True)):
            inputs[n] = value.asnumpy()
    probes = E.head_probes(graph)
    cmp_sym = mx.sym.load_json(json.dumps(cmp_graph))
    cmp_sym = mx.sym.Group([cmp_sym] + [cmp_sym.get_internals()[p] for p in probes])
    train_graph, zeroed = E.zero_dropout(cmp_graph)
    train_sym = mx.sym.load_json(json.dumps(train_graph))
    train_sym = mx.sym.Group([train_sym] + [train_sym.get_internals()[p] for p in probes])
    return types.SimpleNamespace(
        sym=sym, graph=graph, in_shapes=in_shapes, arg_shapes=arg_shapes,
        out_shapes=out_shapes, aux_shapes=aux_shapes, frozen=frozen, inputs=inputs,
        params=params, aux=aux, probes=probes, cmp_sym=cmp_sym, train_sym=train_sym,
        zeroed=zeroed, n_out=len(sym.list_outputs()),
        grad_names=sorted(params) + list(net.grad_inputs))


def record(name, net):
    t0 = time.time()
    x = prepare(name, net)
    sym, graph, inputs, params, aux = x.sym, x.graph, x.inputs, x.params, x.aux
    probes, n_out, grad_names = x.probes, x.n_out, x.grad_names
    cmp_sym, train_sym, frozen, zeroed = x.cmp_sym, x.train_sym, x.frozen, x.zeroed
    arg_shapes, out_shapes, aux_shapes = x.arg_shapes, x.out_shapes, x.aux_shapes
    with open(os.path.join(OUT, f"{name}-symbol.json"), "w") as f:
        f.write(sym.tojson())
    _, out_types, _ = sym.infer_type(**{k: np.float32 for k in x.in_shapes})
    arrays = {}
    for k in sorted(inputs):
        if "array" in net.inputs.get(k, {}) or k in frozen:
            arrays[f"input:{k}"] = inputs[k]

    # 3. inference and training, each in float32 and (where MXNet can) float64
    capture = CustomCapture(net.custom["operator"]) if net.custom else None
    runs, f64_error = {}, None
    with capture or contextlib.nullcontext():
        for dtype in (np.float32, np.float64):
            for mode, s in (("infer", cmp_sym), ("train", train_sym)):
                tag = f"{mode}:{np.dtype(dtype).name}"
                if capture:
                    capture.tag = tag
                try:
                    runs[tag] = run_mode(s, mode == "train", dtype, inputs, params, aux,
                                         grad_names, name, n_out, probes)
                except Exception as err:  # noqa: BLE001 - an op without float64 support
                    if dtype is np.float32:
                        raise
                    lines = [ln for ln in str(err).splitlines() if "Check failed" in ln
                             or "Error" in ln] or str(err).splitlines() or [repr(err)]
                    f64_error = f"{type(err).__name__}: {lines[0].strip()[:300]}"
                    break
            if f64_error:
                break

    # 4. per mode, the reference: float32 unless MXNet's float32 is itself too far from exact
    modes, f32_vs_f64 = {}, {}
    for mode in ("infer", "train"):
        r32, r64 = runs[f"{mode}:float32"], runs.get(f"{mode}:float64")
        dtype = "float32"
        if r64 is not None:
            d = discrepancy(r32, r64)
            worst = sorted(d.items(), key=lambda kv: -kv[1])
            f32_vs_f64[mode] = {"max": worst[0][1], "worst": [[k, v] for k, v in worst[:5]]}
            if worst[0][1] > F32_TRUST:
                dtype = "float64"
        modes[mode] = dtype
        ref = runs[f"{mode}:{dtype}"]
        for i, o in enumerate(ref["out"]):
            arrays[f"{mode}:{i}"] = stored(o)
        for p, o in ref["probe"].items():
            arrays[f"{mode}_probe:{p}"] = stored(o)
    train_ref = runs[f"train:{modes['train']}"]
    heads = train_ref["heads"]
    grads = {}
    for g in grad_names:
        rec = P.summarize(g, train_ref["grads"][g])
        for key in ("full", "positions", "samples"):
            if key in rec:
                arrays[f"grad:{g}:{key}"] = stored(rec.pop(key))
        grads[g] = rec
    for k in sorted(aux):
        arrays[f"aux_after:{k}"] = stored(train_ref["aux"][k])

    custom = None
    if capture:
        prop = net.custom["prop"]()
        custom = {"op_type": net.custom["op_type"], "arguments": prop.list_arguments(),
                  "outputs": prop.list_outputs(), "passes": {}}
        for mode in ("infer", "train"):
            calls = capture.calls.get(f"{mode}:{modes[mode]}", [])
            if len(calls) != 1:
                raise RuntimeError(f"{name}: custom op ran {len(calls)} times in {mode}")
            ins, outs = calls[0]
            custom["passes"][mode] = {"inputs": len(ins), "outputs": len(outs)}
            for j, a in enumerate(ins):
                arrays[f"custom:{mode}:in:{j}"] = a
            for j, a in enumerate(outs):
                arrays[f"custom:{mode}:out:{j}"] = a

    entry = {
        "group": net.group,
        "notes": net.notes,
        "symbol_file": f"{name}-symbol.json",
        "npz_file": f"{name}.npz",
        "ops": E.op_names(graph),
        "inputs": [{"name": k, "shape": list(v["shape"]), "dtype": "float32",
                    **({"recipe": v["recipe"], "crc32": P.checksum(inputs[k])["crc32"]}
                       if "recipe" in v else {"npz": f"input:{k}"})}
                   for k, v in net.inputs.items()],
        "list_arguments": sym.list_arguments(),
        "list_outputs": sym.list_outputs(),
        "list_auxiliary_states": sym.list_auxiliary_states(),
        "arg_shapes": arg_shapes, "out_shapes": out_shapes, "aux_shapes": aux_shapes,
        "out_types": [np.dtype(t).name for t in out_types],
        "reference_dtype": modes,
        "mxnet_f32_vs_f64": f32_vs_f64,
        "mxnet_f64_unsupported": f64_error,
        "probes": probes,
        "frozen_random_nodes": frozen,
        "train_dropout_zeroed": zeroed,
        "mxnet_substitutions": net.substitutions,
        "mxnet_env": {k: os.environ.get(k, "") for k in ("MXNET_MKLDNN_ENABLED",)},
        "grad_inputs": list(net.grad_inputs),
        "params": {k: short_checksum(v) for k, v in params.items()},
        "aux": {k: short_checksum(v) for k, v in aux.items()},
        "head_grads": [{"recipe": f"{name}:{i}", "shape": list(h.shape)}
                       for i, h in enumerate(heads)],
        "grads": grads,
        "custom": custom,
        "num_params": int(sum(v.size for v in params.values())),
    }
    np.savez_compressed(os.path.join(OUT, f"{name}.npz"), **arrays)
    entry["seconds_mxnet"] = round(time.time() - t0, 2)
    return entry


def record_one(name: str, out_file: str) -> None:
    """Build and record one network in this process; write its index entry to out_file."""
    mx.random.seed(0)
    np.random.seed(0)
    with mx.name.NameManager(), mx.AttrScope():
        net = NETS[name]()
    entry = record(name, net)
    with open(out_file, "w") as f:
        json.dump(entry, f)


def onednn_check(name: str, out_file: str) -> None:
    """Run the network's float32 modes with oneDNN on (this process's setting) and write how
    far they are from the recorded reference: informational, the fixtures use MXNet's own
    CPU kernels (oneDNN float32 gave a wrong VAE loss in inference, see the README)."""
    with open(os.path.join(OUT, "index.json")) as f:
        e = json.load(f)["networks"][name]
    with np.load(os.path.join(OUT, e["npz_file"])) as z:
        ref = {k: z[k] for k in z.files}
    mx.random.seed(0)
    np.random.seed(0)
    with mx.name.NameManager(), mx.AttrScope():
        net = NETS[name]()
    x = prepare(name, net, {n: ref[f"input:{n}"] for n in e["frozen_random_nodes"]})
    result = {}
    capture = CustomCapture(net.custom["operator"]) if net.custom else None
    for mode, s in (("infer", x.cmp_sym), ("train", x.train_sym)):
        with capture or contextlib.nullcontext():
            r = run_mode(s, mode == "train", np.float32, x.inputs, x.params, x.aux, x.grad_names,
                         name, x.n_out, x.probes)
        errs = {f"out:{i}": rel(o, ref[f"{mode}:{i}"]) for i, o in enumerate(r["out"])}
        errs.update({f"probe:{p}": rel(o, ref[f"{mode}_probe:{p}"])
                     for p, o in r["probe"].items()})
        if mode == "train":
            total = math.sqrt(sum(g["norm"] ** 2 for g in e["grads"].values()))
            floor = max(1e-3 * total, 1e-30)
            for g, rec in e["grads"].items():
                norm = float(np.linalg.norm(r["grads"][g].astype(np.float64)))
                errs[f"grad:{g}"] = abs(norm - rec["norm"]) / max(rec["norm"], floor)
            errs.update({f"aux:{k}": rel(v, ref[f"aux_after:{k}"]) for k, v in r["aux"].items()})
        worst = sorted(errs.items(), key=lambda kv: -kv[1])
        result[mode] = {"max": worst[0][1], "worst": [[k, v] for k, v in worst[:3]]}
    with open(out_file, "w") as f:
        json.dump(result, f)


# MXNet's own CPU kernel for the fused RNN op fails in 1.9.1 ("in_data.size() == num_inputs
# (4 vs. 3)" for LSTM); that network is recorded with oneDNN, the path MXNet's CPU build uses
RECORD_ENV = {"cudnn_rnn_bucketing": {"MXNET_MKLDNN_ENABLED": "1"}}


def child(args: list, env_extra: dict) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "MXNET_MKLDNN_ENABLED"}
    env.update(env_extra)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), EXAMPLE_ROOT] + args,
                          env=env)
    return done.returncode == 0


def main(argv=None):
    global EXAMPLE_ROOT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("example_root", nargs="?", default=EXAMPLE_ROOT,
                    help="folder holding MXNet 1.9.1's example/ (default %(default)s)")
    ap.add_argument("--only", help="comma-separated network names (others keep their entry)")
    ap.add_argument("--list", action="store_true", help="print the network names and exit")
    ap.add_argument("--no-onednn-check", action="store_true",
                    help="skip re-running each network with MXNet's oneDNN kernels")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--onednn-child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    EXAMPLE_ROOT = os.path.abspath(a.example_root)
    if a.list:
        print("\n".join(NETS))
        return
    if not os.path.isdir(ex_path()):
        sys.exit(f"no example/ folder under {EXAMPLE_ROOT}: extract MXNet 1.9.1's (see --help)")
    names = a.only.split(",") if a.only else list(NETS)
    unknown = [n for n in names if n not in NETS]
    if unknown:
        sys.exit(f"unknown network(s) {unknown}; known: {', '.join(NETS)}")
    os.makedirs(OUT, exist_ok=True)
    if a.child:
        record_one(names[0], a.child)
        return
    if a.onednn_child:
        onednn_check(names[0], a.onednn_child)
        return
    index_path = os.path.join(OUT, "index.json")
    index = {"networks": {}}
    if a.only and os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    index.update({
        "mxnet_version": mx.__version__, "numpy_version": np.__version__,
        "recipe_version": P.RECIPE_VERSION,
        "generator": "tools/make_mxnet_zoo_fixtures.py",
        "example_source": "apache/mxnet tag 1.9.1, example/",
    })
    failed = []
    for n in names:
        # one process per network: the examples' modules share bare names (symbol, lstm,
        # config), and MXNet reads MXNET_MKLDNN_ENABLED once per process. The record uses
        # MXNet's own CPU kernels (oneDNN off); a second process re-runs with oneDNN on.
        entry_file = os.path.join(OUT, f".{n}.entry.json")
        record_env = RECORD_ENV.get(n, {"MXNET_MKLDNN_ENABLED": "0"})
        if not child(["--only", n, "--child", entry_file], record_env):
            failed.append(n)
            continue
        with open(entry_file) as f:
            index["networks"][n] = json.load(f)
        os.remove(entry_file)
        e = index["networks"][n]
        if not a.no_onednn_check and record_env.get("MXNET_MKLDNN_ENABLED") == "0":
            dump_index(index, index_path)   # the check reads the entry back
            if child(["--only", n, "--onednn-child", entry_file], {}):
                with open(entry_file) as f:
                    e["mxnet_onednn_f32_vs_reference"] = json.load(f)
                os.remove(entry_file)
            else:
                e["mxnet_onednn_f32_vs_reference"] = "failed to run"
        f64 = e["mxnet_f32_vs_f64"]
        one = e.get("mxnet_onednn_f32_vs_reference")
        print(f"{n}: {e['num_params']} params, {e['seconds_mxnet']} s, reference "
              f"{e['reference_dtype']}, MXNet f32 vs f64: "
              + ", ".join(f"{m} {v['max']:.2g}" for m, v in f64.items())
              + (f" (no float64: {e['mxnet_f64_unsupported']})"
                 if e["mxnet_f64_unsupported"] else "")
              + (", oneDNN f32 vs reference: " + ", ".join(
                  f"{m} {v['max']:.2g}" for m, v in one.items()) if isinstance(one, dict)
                 else ""), flush=True)
    index["networks"] = {k: index["networks"][k] for k in NETS if k in index["networks"]}
    dump_index(index, index_path)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
