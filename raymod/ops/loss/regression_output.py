"""Regression loss heads: LinearRegressionOutput, LogisticRegressionOutput, MAERegressionOutput."""
from __future__ import annotations

from ..base import Param, merge_shape
from ._labelled import LabelledLoss


class _RegressionOutput(LabelledLoss):
    """Shared shape rules and gradient scaling of the regression heads.

    The label has the data's shape, or (n,) for data (n, 1). Backward ignores head gradients
    and emits ``d(out, label) * grad_scale / num_output`` with
    ``num_output = label.size / label.shape[0]`` (as MXNet). Backward keeps the label and the
    output.
    """

    params = {"grad_scale": Param("float", 1.0)}
    retain_inputs = (1,)
    retain_outputs = (0,)

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        label = in_shapes[1]
        if data is None and label is not None and len(label) >= 2:
            data = tuple(label)  # a 1-d label could be for (n,) or (n, 1) data
        if data is not None:
            options = [tuple(data)]
            if len(data) == 2 and data[1] == 1:
                options.insert(0, (data[0],))
            label = self.match_label(label, options, data)
        return [data, label], [data], []

    def forward(self, xp, inputs, aux, is_train):
        return [self._link(xp, inputs[0])], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[0]:
            return [None, None]
        out, label = outputs[0], inputs[1]
        label = label.reshape(out.shape).astype(out.dtype, copy=False)
        num_output = label.size // label.shape[0] if label.ndim else 1
        return [self._diff(xp, out, label) * (self.grad_scale / num_output), None]

    def _link(self, xp, x):
        return x

    def _diff(self, xp, out, label):
        return out - label


class LinearRegressionOutput(_RegressionOutput):
    """Identity forward; backward ``(out - label) * grad_scale / num_output`` (squared loss)."""

    name = "LinearRegressionOutput"


class LogisticRegressionOutput(_RegressionOutput):
    """Sigmoid forward; backward ``(sigmoid(x) - label) * grad_scale / num_output``."""

    name = "LogisticRegressionOutput"

    def _link(self, xp, x):
        return 1 / (1 + xp.exp(-x))


class MAERegressionOutput(_RegressionOutput):
    """Identity forward; backward ``sign(out - label) * grad_scale / num_output`` (L1 loss)."""

    name = "MAERegressionOutput"

    def _diff(self, xp, out, label):
        return xp.sign(out - label)
