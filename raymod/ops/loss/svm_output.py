"""SVMOutput: identity forward, one-vs-all hinge (L1-SVM) or squared hinge (L2-SVM) backward."""
from __future__ import annotations

from ..base import Param
from ._labelled import ClassHead


class SVMOutput(ClassHead):
    """Passes ``data`` through; in backward the gradient of a one-vs-all SVM loss, ignoring any
    head gradient.

    Classes lie on the last axis: data (..., k) takes a label of shape data.shape[:-1] holding
    class indices (truncated to integers; one outside [0, k) marks no class). Each score ``x``
    gets a target ``t``: +1 for the labelled class, -1 for the others, and a slack
    ``s = margin - t * x``. With ``C = regularization_coefficient`` the gradient is
    ``-t * C * [s > 0]`` (``use_linear``: the hinge ``C * max(0, s)``) or
    ``-2 * t * C * max(0, s)`` (default: the squared hinge ``C * max(0, s)**2``), per sample and
    not divided by the batch, as MXNet. Backward keeps the label and the output.
    """

    name = "SVMOutput"
    params = {"margin": Param("float", 1.0), "regularization_coefficient": Param("float", 1.0),
              "use_linear": Param("bool", False)}
    retain_inputs = (1,)
    retain_outputs = (0,)

    def _label_shapes(self, data: tuple) -> list[tuple]:
        return [tuple(data[:-1])]

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[0]:
            return [None, None]
        out, label = outputs[0], inputs[1]
        dt, k = out.dtype.type, out.shape[-1]
        x = out.reshape(-1, k)
        labelled = label.reshape(-1, 1).astype(xp.int64) == xp.arange(k)
        # -t * C: the labelled class pulls its score up, the others push theirs down
        push = xp.where(labelled, dt(-self.regularization_coefficient),
                        dt(self.regularization_coefficient))
        slack = xp.where(labelled, -x, x) + dt(self.margin)
        if self.use_linear:
            grad = xp.where(slack > 0, push, dt(0))
        else:  # max(0, s) written as a where, so a NaN score gives 0 as in MXNet
            grad = xp.where(slack > 0, slack * dt(2), dt(0)) * push
        return [grad.reshape(out.shape), None]
