"""The training steps the speed benchmarks compare, built once for every benchmark.

``mlp``, ``lenet`` and the LSTM language model are DESIGN.md's anchors (their symbols come from
bench_module.py); ``resnet20`` is He et al.'s CIFAR ResNet-20 (3 stages of 3 basic blocks,
16/32/64 channels, a 1x1 projection where the shape changes). ``lstm_lm`` is the anchor LSTM at
one sequence length of 35, as PyTorch's word-language-model example trains it.

Each workload gives its symbol, a batch size and synthetic data of the right shape (seeded);
:func:`fit_rate` trains it through ``Module.fit`` and returns samples per second.
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raymod as rm  # noqa: E402
from bench_module import LSTM, lenet_symbol, lstm_sym_gen, mlp_symbol  # noqa: E402

SEQ_LEN = 35


def _conv_bn(x, filters, stride, name, relu=True, kernel=3):
    pad = (kernel // 2, kernel // 2)
    x = rm.sym.Convolution(x, kernel=(kernel, kernel), stride=(stride, stride), pad=pad,
                           num_filter=filters, no_bias=True, name=f"{name}_conv")
    x = rm.sym.BatchNorm(x, fix_gamma=False, momentum=0.9, eps=1e-5, name=f"{name}_bn")
    return rm.sym.Activation(x, act_type="relu") if relu else x


def resnet20_symbol():
    x = _conv_bn(rm.sym.Variable("data"), 16, 1, "stem")
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"s{stage}b{block}"
            y = _conv_bn(x, filters, stride, f"{name}a")
            y = _conv_bn(y, filters, 1, f"{name}b", relu=False)
            if stride != 1:
                x = _conv_bn(x, filters, stride, f"{name}p", relu=False, kernel=1)
            x = rm.sym.Activation(x + y, act_type="relu")
    x = rm.sym.Pooling(x, pool_type="avg", global_pool=True, kernel=(8, 8))
    x = rm.sym.FullyConnected(rm.sym.Flatten(x), num_hidden=10, name="fc")
    return rm.sym.SoftmaxOutput(x, name="softmax")


def lstm_lm_symbol():
    return lstm_sym_gen(SEQ_LEN)[0]


def lstm_lm_fused_symbol():
    """The LSTM LM with both layers in one fused ``RNN`` node (as torch's ``nn.LSTM``), in the
    op's time-major layout."""
    hidden = LSTM["hidden"]
    embed = rm.sym.Embedding(rm.sym.Variable("data"), input_dim=LSTM["vocab"],
                             output_dim=LSTM["embed"], name="embed")
    embed = rm.sym.transpose(embed, axes=(1, 0, 2))
    cell = rm.rnn.FusedRNNCell(hidden, num_layers=LSTM["layers"], mode="lstm", prefix="lstm_")
    outputs, _ = cell.unroll(SEQ_LEN, inputs=embed, layout="TNC", merge_outputs=True)
    pred = rm.sym.FullyConnected(rm.sym.Reshape(outputs, shape=(-1, hidden)),
                                 num_hidden=LSTM["vocab"], name="pred")
    label = rm.sym.Reshape(rm.sym.transpose(rm.sym.Variable("softmax_label")), shape=(-1,))
    return rm.sym.SoftmaxOutput(data=pred, label=label, name="softmax")


@dataclass(frozen=True)
class Workload:
    """One training step to time: its symbol, batch size and per-sample input shape."""
    name: str
    symbol: Callable
    batch: int
    sample_shape: tuple
    classes: int  # labels are drawn below this; tokens too for the LM
    label_shape: tuple = ()

    def data(self, batches: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.RandomState(seed)
        rows = batches * self.batch
        if self.name.startswith("lstm_lm"):
            X = rng.randint(1, self.classes, (rows,) + self.sample_shape).astype(np.float32)
            return X, rng.randint(1, self.classes, (rows,) + self.label_shape).astype(np.float32)
        X = rng.rand(rows, *self.sample_shape).astype(np.float32)
        return X, rng.randint(0, self.classes, rows).astype(np.float32)


WORKLOADS = {
    "mlp": Workload("mlp", mlp_symbol, 100, (784,), 10),
    "lenet": Workload("lenet", lenet_symbol, 64, (1, 28, 28), 10),
    "resnet20": Workload("resnet20", resnet20_symbol, 32, (3, 32, 32), 10),
    "lstm_lm": Workload("lstm_lm", lstm_lm_symbol, LSTM["batch"], (SEQ_LEN,), LSTM["vocab"],
                        (SEQ_LEN,)),
    "lstm_lm_fused": Workload("lstm_lm_fused", lstm_lm_fused_symbol, LSTM["batch"], (SEQ_LEN,),
                              LSTM["vocab"], (SEQ_LEN,)),
}


def fit_rate(name: str, batches: int, phases=(("quiet", 2),), before_phase=None,
             workers=None, cpus_per_worker: float = 1) -> dict:
    """``Module.fit`` of ``name`` over ``batches`` batches an epoch, in phases.

    Each phase is ``(label, epochs)``: ``before_phase(label)`` runs at its start, then one
    warm-up epoch (a thread pool or a neighbour settles) and ``epochs`` timed ones, all in
    one ``fit``. Returns, by label, samples/s (median timed epoch) and each epoch's seconds.
    """
    w = WORKLOADS[name]
    X, y = w.data(batches)
    it = rm.io.NDArrayIter(X, y, batch_size=w.batch, shuffle=False, label_name="softmax_label")
    spec = None if workers is None else rm.Workers(workers, cpus_per_worker=cpus_per_worker)
    mod = rm.mod.Module(w.symbol(), context=rm.cpu(), workers=spec)
    # epoch k belongs to phase plan[k]; None marks a warm-up epoch
    plan = [p for label, epochs in phases for p in [None] + [label] * epochs]
    starts = {sum(1 + e for _, e in phases[:i]): label for i, (label, _) in enumerate(phases)}
    stamps = []

    def on_epoch_end(epoch, *_):
        stamps.append(time.perf_counter())
        if before_phase and epoch + 1 in starts:
            before_phase(starts[epoch + 1])

    try:
        mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
        mod.init_params(initializer=rm.init.Xavier(magnitude=2.0))
        mod.init_optimizer(optimizer="sgd",
                           optimizer_params={"learning_rate": 0.01, "momentum": 0.9})
        if before_phase:
            before_phase(phases[0][0])
        stamps.append(time.perf_counter())
        metric = rm.metric.Perplexity(0) if name.startswith("lstm_lm") else "acc"
        mod.fit(it, num_epoch=len(plan), eval_metric=metric, epoch_end_callback=on_epoch_end)
    finally:
        mod.close()
    secs = [b - a for a, b in zip(stamps[:-1], stamps[1:])]
    out = {}
    for label, _ in phases:
        timed = [s for s, p in zip(secs, plan) if p == label]
        out[label] = {"samples_per_s": batches * w.batch / statistics.median(timed),
                      "epoch_seconds": [round(s, 3) for s in timed]}
    return out
