"""SliceChannel (split): cut one axis into equal parts."""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape
from ._axis import fill_unknown, norm_axis


class SliceChannel(Op):
    """Split ``data`` along ``axis`` into ``num_outputs`` equal parts ``output0``, ``output1``, ...

    With ``squeeze_axis=True`` the axis must have size ``num_outputs`` and is dropped from the
    outputs. Backward keeps nothing: it joins the output gradients.
    """

    name = "SliceChannel"
    aliases = ("split",)
    params = {"num_outputs": Param("int"), "axis": Param("int", 1),
              "squeeze_axis": Param("bool", False)}

    def check(self) -> None:
        if self.num_outputs < 1:
            raise AttributeValueError(
                f"SliceChannel: num_outputs must be >= 1, got {self.num_outputs}")

    def list_outputs(self) -> list[str]:
        return [f"output{i}" for i in range(self.num_outputs)]

    def infer_shape(self, in_shapes, out_shapes):
        data, n, squeeze = in_shapes[0], self.num_outputs, self.squeeze_axis
        part = None
        for s in out_shapes:
            part = merge_shape(part, s, "the outputs must share a shape")
        if data is None and part is None:
            return [None], [None] * n, []
        ax = norm_axis(self.axis, len(data) if data is not None else len(part) + squeeze)
        if part is not None:  # data from the outputs: its batch size, say
            whole = part[:ax] + (n if squeeze else part[ax] * n,) + part[ax + 1 - squeeze:]
            data = whole if data is None else fill_unknown(data, whole)
        size = data[ax]
        if squeeze and size and size != n:
            raise ShapeError(f"squeeze_axis=True needs data's axis {self.axis} to be "
                             f"num_outputs={n} long, data has shape {data}")
        if size % n:
            raise ShapeError(f"data of shape {data} cannot be split into {n} equal parts "
                             f"along axis {self.axis}")
        part = data[:ax] + (() if squeeze else (size // n,)) + data[ax + 1:]
        return [data], [part] * n, []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        ax = norm_axis(self.axis, x.ndim)
        n, lead = self.num_outputs, (slice(None),) * ax
        if self.squeeze_axis:  # plain indexing: xp.split's generic path costs more
            return [x[lead + (i,)] for i in range(n)], ax
        size = x.shape[ax] // n
        return [x[lead + (slice(i * size, (i + 1) * size),)] for i in range(n)], ax

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        join = xp.stack if self.squeeze_axis else xp.concatenate
        return [join(out_grads, axis=saved)]
