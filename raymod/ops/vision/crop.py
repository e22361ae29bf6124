"""Crop: cut a window out of the two spatial axes of NCHW data."""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, known


class Crop(Op):
    """A ``(h, w)`` window of the spatial axes of ``data`` (N, C, H, W); MXNet's ``Crop``.

    With ``num_args=1`` the window size is ``h_w``; with ``num_args=2`` it is the height and
    width of the second input (``crop_like``, only its shape is read). The window starts at
    ``offset`` (y, x), or is centred (offsets ``(H - h) // 2``, ``(W - w) // 2``) when
    ``center_crop`` is true. As in MXNet the inputs are named ``arg0`` (data) and ``arg1``
    (crop_like), like every op whose input count is ``num_args``.

    Attributes
    ----------
    num_args : int
        1 or 2: the number of inputs.
    offset : tuple of int, default (0, 0)
        Top-left corner of the window, ignored with ``center_crop``.
    h_w : tuple of int, default (0, 0)
        Window height and width; used (and required) only with ``num_args=1``.
    center_crop : bool, default False

    Backward keeps only the data shape and the offsets: the gradient of ``data`` is the head
    gradient placed in the window, zero elsewhere; ``crop_like`` gets zeros, as in MXNet.
    """

    name = "Crop"
    variadic = "num_args"
    params = {"num_args": Param("int"), "offset": Param("shape", (0, 0)),
              "h_w": Param("shape", (0, 0)), "center_crop": Param("bool", False)}

    def check(self) -> None:
        if self.num_args not in (1, 2):
            raise AttributeValueError(f"Crop: num_args must be 1 (data) or 2 (data, crop_like), "
                                      f"got {self.num_args}")
        for key in ("offset", "h_w"):
            value = getattr(self, key)
            if len(value) != 2 or any(v is None for v in value):
                raise AttributeValueError(f"Crop: {key} must have 2 entries (y, x), got {value}")
        if self.num_args == 1 and min(self.h_w) < 1:
            raise AttributeValueError(f"Crop: with num_args=1, h_w must give a crop height and "
                                      f"width >= 1, got h_w={self.h_w}")
        if not self.center_crop and min(self.offset) < 0:
            raise AttributeValueError(f"Crop: offset must be >= 0, got {self.offset}")

    def _window(self, data: tuple, like: tuple | None) -> tuple[int, int]:
        """The crop size (h, w) for the data shape and (with num_args=2) crop_like's shape."""
        if len(data) != 4:
            raise ShapeError(f"data (arg0) must be 4-D (batch, channel, y, x), got {data}")
        if self.num_args == 1:
            size, what = self.h_w, f"h_w={self.h_w}"
        else:
            if len(like) != 4:
                raise ShapeError(f"crop_like (arg1) must be 4-D (batch, channel, y, x), "
                                 f"got {like}")
            size, what = tuple(like[2:]), f"crop_like (arg1) {like}"
        if any(s and d and s > d for s, d in zip(size, data[2:])):
            raise ShapeError(f"the crop size {size} from {what} is larger than data (arg0) "
                             f"{data} on its spatial axes")
        return size

    def _offsets(self, data: tuple, size: tuple) -> tuple[int, int]:
        room = (data[2] - size[0], data[3] - size[1])
        if self.center_crop:
            return room[0] // 2, room[1] // 2
        if self.offset[0] > room[0] or self.offset[1] > room[1]:
            raise ShapeError(f"offset={self.offset} leaves no room for a {size} crop of "
                             f"data (arg0) {data}: at most {room}")
        return self.offset

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        like = in_shapes[1] if self.num_args == 2 else None
        if data is None or (self.num_args == 2 and like is None):
            return list(in_shapes), [None], []
        size = self._window(data, like)
        if known(size) and known(data[2:]):
            self._offsets(data, size)
        return list(in_shapes), [tuple(data[:2]) + tuple(size)], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        like = inputs[1].shape if self.num_args == 2 else None
        size = self._window(x.shape, like)
        top, left = self._offsets(x.shape, size)
        out = x[:, :, top:top + size[0], left:left + size[1]]
        return [out], (x.shape, like, top, left)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        shape, like, top, left = saved
        g = out_grads[0]
        grads = [None] * self.num_args
        if need_grad[0]:
            grads[0] = xp.zeros(shape, g.dtype)
            grads[0][:, :, top:top + g.shape[2], left:left + g.shape[3]] = g
        if self.num_args == 2 and need_grad[1]:
            grads[1] = xp.zeros(like, g.dtype)
        return grads
