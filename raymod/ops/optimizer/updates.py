"""sgd_update, sgd_mom_update, adam_update, ftrl_update, _sparse_adagrad_update: one step of
an optimizer on one weight, as MXNet's update ops.

Each op runs the update rule of raymod's optimizer of that kind (:mod:`raymod.optimizer`),
so the formulas are written once: ``sgd_update`` and ``sgd_mom_update`` are
:class:`~raymod.optimizer.SGD`'s step, ``adam_update`` :class:`~raymod.optimizer.Adam`'s
without the bias correction (MXNet's Python optimizer folds it into ``lr`` before calling the
op), ``ftrl_update`` :class:`~raymod.optimizer.Ftrl`'s, ``_sparse_adagrad_update``
:class:`~raymod.optimizer.AdaGrad`'s.

The weight and the gradient are the op's inputs; the optimizer states (``mom``, ``mean`` and
``var``, ``z`` and ``n``, ``history``) are its auxiliary states, updated in place, so that
``mx.nd.sgd_mom_update(weight, grad, mom, lr=0.1, out=weight)`` changes ``weight`` and
``mom`` as MXNet's does (MXNet's Python optimizers call them so, ``out=weight``). The output
is the updated weight: the input weight itself is not modified. The weight and states are
dense; the gradient is dense or row_sparse. With a row_sparse gradient:

- ``sgd_update``, ``sgd_mom_update``, ``adam_update`` with ``lazy_update=True`` (the default)
  update only the gradient's rows of the weight and states; with ``lazy_update=False`` the
  dense update with zeros for the other rows;
- ``_sparse_adagrad_update`` updates only the gradient's rows (it takes no weight decay);
- ``ftrl_update`` runs the dense update on the densified gradient (MXNet's sparse Ftrl kernel
  is for row_sparse weights and states; dense ones take its storage fallback).

No gradient flows through an update.
"""
from __future__ import annotations

from typing import Any

from ...base import ShapeError
from ..base import Op, Param, merge_shape
from ..tensor._sparse_math import bare, dense

_COMMON = {"wd": Param("float", 0.0), "rescale_grad": Param("float", 1.0),
           "clip_gradient": Param("float", -1.0)}
# update counts this large make Adam's bias correction exactly 1 (beta ** t is 0.0)
_NO_BIAS_CORRECTION = 2 ** 62


class _Update(Op):
    inputs = ("weight", "grad")
    outputs = ("output",)
    no_grad_inputs = ("weight", "grad")
    # a row_sparse gradient is densified first (the optimizer's dense rule on every row)
    dense_grad = False

    def check(self) -> None:
        from ...optimizer.optimizer import any_learning_rate_sign

        with any_learning_rate_sign():  # MXNet's ops take whatever rate they are given
            self._optimizer = self.make_optimizer()

    def optimizer_settings(self) -> dict:
        clip = self.clip_gradient
        return {"learning_rate": self.lr, "wd": self.wd, "rescale_grad": self.rescale_grad,
                "clip_gradient": clip if clip is not None and clip > 0 else None}

    def infer_shape(self, in_shapes, out_shapes):
        shape = None
        names = list(self.inputs) + list(self.aux)
        for name, s in zip(names + ["output"], list(in_shapes) + list(out_shapes)):
            try:
                shape = merge_shape(shape, s)
            except ShapeError:
                raise ShapeError(f"{name} has shape {tuple(s)}, the weight and every state "
                                 f"and gradient must share one shape (so far {shape})") from None
        return [shape] * len(in_shapes), [shape] * len(out_shapes), [shape] * len(self.aux)

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == "default" and in_stypes[1] == "row_sparse"

    def state(self, aux: list) -> Any:
        return tuple(aux)

    def forward(self, xp, inputs, aux, is_train):
        weight, grad = inputs
        grad = dense(grad) if self.dense_grad else bare(grad)
        out = weight.copy()
        self._optimizer.update(0, out, grad, self.state(aux))
        return [out], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None, None]


class SGDUpdate(_Update):
    """``weight = (1 - lr * wd) * weight - lr * clip(rescale_grad * grad, clip_gradient)``
    (``clip_gradient`` <= 0: no clipping). See the module notes for a row_sparse ``grad`` and
    ``lazy_update``."""

    name = "sgd_update"
    params = {"lr": Param("float"), **_COMMON, "lazy_update": Param("bool", True)}

    def make_optimizer(self):
        from ...optimizer import SGD
        return SGD(momentum=0.0, lazy_update=self.lazy_update, **self.optimizer_settings())

    def state(self, aux):
        return None


class SGDMomUpdate(_Update):
    """``mom = momentum * mom - lr * wd * weight - lr * clip(rescale_grad * grad)``, then
    ``weight += mom``; ``mom`` (an auxiliary state) is updated in place. See the module notes
    for a row_sparse ``grad`` and ``lazy_update``."""

    name = "sgd_mom_update"
    aux = ("mom",)
    params = {"lr": Param("float"), "momentum": Param("float", 0.0), **_COMMON,
              "lazy_update": Param("bool", True)}

    def make_optimizer(self):
        from ...optimizer import SGD
        return SGD(momentum=self.momentum, lazy_update=self.lazy_update,
                   **self.optimizer_settings())

    def state(self, aux):
        return aux[0]


class AdamUpdate(_Update):
    """With ``g = clip(rescale_grad * grad + wd * weight)``: ``mean = beta1 * mean +
    (1 - beta1) * g``, ``var = beta2 * var + (1 - beta2) * g**2``, then ``weight -= lr * mean
    / (sqrt(var) + epsilon)`` (no bias correction, as MXNet's op). ``mean`` and ``var``
    (auxiliary states) are updated in place. See the module notes for a row_sparse ``grad``
    and ``lazy_update``."""

    name = "adam_update"
    aux = ("mean", "var")
    params = {"lr": Param("float"), "beta1": Param("float", 0.9),
              "beta2": Param("float", 0.999), "epsilon": Param("float", 1e-8), **_COMMON,
              "lazy_update": Param("bool", True)}

    def make_optimizer(self):
        from ...optimizer import Adam
        # Adam's rule scales lr by sqrt(1 - beta2**t) / (1 - beta1**t); at this count both
        # powers are 0.0, so the factor is exactly 1 and the rule is MXNet's op
        return Adam(beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
                    lazy_update=self.lazy_update, begin_num_update=_NO_BIAS_CORRECTION,
                    **self.optimizer_settings())


class FtrlUpdate(_Update):
    """FTRL-Proximal: with ``g = clip(rescale_grad * grad)``, ``z += g - (sqrt(n + g**2) -
    sqrt(n)) * weight / lr``, ``n += g**2``, then ``weight = (sign(z) * lamda1 - z) /
    ((beta + sqrt(n)) / lr + wd)`` where ``|z| > lamda1``, else 0. ``z`` and ``n`` (auxiliary
    states) are updated in place; a row_sparse ``grad`` is densified (see the module notes)."""

    name = "ftrl_update"
    aux = ("z", "n")
    params = {"lr": Param("float"), "lamda1": Param("float", 0.01), "beta": Param("float", 1.0),
              **_COMMON}
    dense_grad = True

    def make_optimizer(self):
        from ...optimizer import Ftrl
        return Ftrl(lamda1=self.lamda1, beta=self.beta, **self.optimizer_settings())


class SparseAdagradUpdate(_Update):
    """AdaGrad: with ``g = clip(rescale_grad * grad)``, ``history += g**2``, then ``weight -=
    lr * g / sqrt(history + epsilon)``; ``history`` (an auxiliary state) is updated in place.
    A row_sparse ``grad`` updates only its rows and takes no weight decay (as MXNet's
    ``_sparse_adagrad_update``; a ValueError says so for ``wd != 0``)."""

    name = "_sparse_adagrad_update"
    aux = ("history",)
    params = {"lr": Param("float"), "epsilon": Param("float", 1e-7), **_COMMON}

    def make_optimizer(self):
        from ...optimizer import AdaGrad
        return AdaGrad(eps=self.epsilon, **self.optimizer_settings())

    def state(self, aux):
        return aux[0]
