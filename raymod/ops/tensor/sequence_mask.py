"""SequenceMask: overwrite the steps of each sequence beyond its length."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param, merge_shape


class SequenceMask(Op):
    """Set ``data`` to ``value`` at time steps ``t >= sequence_length[b]``.

    ``data`` is (time, batch, ...) for ``axis=0`` or (batch, time, ...) for ``axis=1``;
    ``sequence_length`` is (batch,). Without ``use_sequence_length`` the op is the identity
    and takes only ``data``. ``sequence_length`` gets no gradient. Backward keeps the mask.
    """

    name = "SequenceMask"
    inputs = ("data", "sequence_length")
    no_grad_inputs = ("sequence_length",)
    params = {"use_sequence_length": Param("bool", False), "value": Param("float", 0.0),
              "axis": Param("int", 0, choices=(0, 1))}

    def list_arguments(self) -> list[str]:
        return list(self.inputs) if self.use_sequence_length else ["data"]

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        if data is not None and len(data) < 2:
            raise ShapeError(f"data must have at least 2 dims (time and batch), got {data}")
        if not self.use_sequence_length:
            return [data], [data], []
        batch_axis = 1 - self.axis
        lengths = in_shapes[1]
        if lengths is not None and len(lengths) != 1:
            raise ShapeError(f"sequence_length must be 1-d (batch,), got {lengths}")
        if data is not None:
            try:
                lengths = merge_shape(lengths, (data[batch_axis],))
            except ShapeError:
                raise ShapeError(f"sequence_length of shape {in_shapes[1]} does not match the "
                                 f"batch size of data {data} (axis={self.axis})") from None
            if not data[batch_axis] and lengths[0]:
                data = data[:batch_axis] + lengths + data[batch_axis + 1:]
        return [data, lengths], [data], []

    def infer_type(self, in_types, out_types):
        dtype = in_types[0] if in_types[0] is not None else out_types[0]
        # lengths may be any numeric dtype (int32 from a data iterator, float32 by default)
        return [dtype] + list(in_types[1:]), [dtype], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if not self.use_sequence_length:
            return [x], None
        steps = xp.arange(x.shape[self.axis])
        lengths = inputs[1]
        keep = steps[:, None] < lengths[None, :] if self.axis == 0 else \
            steps[None, :] < lengths[:, None]
        keep = keep.reshape(keep.shape + (1,) * (x.ndim - 2))
        return [xp.where(keep, x, self.value).astype(x.dtype, copy=False)], keep

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [g if saved is None else g * saved, None][:len(need_grad)]
