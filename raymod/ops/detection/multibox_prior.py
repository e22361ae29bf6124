"""_contrib_MultiBoxPrior: SSD prior (anchor) boxes for every cell of a feature map."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param
from ._common import float_tuple


class MultiBoxPrior(Op):
    """Anchor boxes ``[xmin, ymin, xmax, ymax]`` in [0, 1] image coordinates.

    For each cell ``(r, c)`` of data's (height, width), centred at
    ``((c + offsets[1]) * steps[1], (r + offsets[0]) * steps[0])``, the anchors are: every
    size with the first ratio, then the first size with every other ratio. A box of size
    ``s`` and ratio ``q`` has width ``s * height / width * sqrt(q)`` and height
    ``s / sqrt(q)``. Steps ``<= 0`` mean ``(1 / height, 1 / width)``; ``clip`` clips to
    [0, 1]. Computed in float32 as MXNet does, returned in the data's dtype.

    Output: (1, height * width * (len(sizes) + len(ratios) - 1), 4). Only data's shape is
    read; it gets no gradient (MXNet writes zeros).

    Attributes
    ----------
    sizes, ratios : tuple of float, default (1,)
    clip : bool, default False
    steps : (float, float), default (-1, -1)
    offsets : (float, float), default (0.5, 0.5)
    """

    name = "_contrib_MultiBoxPrior"
    params = {"sizes": Param("any", (1.0,)), "ratios": Param("any", (1.0,)),
              "clip": Param("bool", False), "steps": Param("any", (-1.0, -1.0)),
              "offsets": Param("any", (0.5, 0.5))}
    no_grad_inputs = ("data",)

    def check(self) -> None:
        self.sizes = float_tuple(self.name, "sizes", self.sizes)
        self.ratios = float_tuple(self.name, "ratios", self.ratios)
        self.steps = float_tuple(self.name, "steps", self.steps, 2)
        self.offsets = float_tuple(self.name, "offsets", self.offsets, 2)
        if not self.sizes or not self.ratios:
            raise AttributeValueError(f"{self.name}: sizes and ratios need at least one value, "
                                      f"got {self.sizes} and {self.ratios}")
        if not all(0 <= o <= 1 for o in self.offsets):
            raise AttributeValueError(f"{self.name}: offsets must be in [0, 1], got "
                                      f"{self.offsets}")
        if self.steps[0] * self.steps[1] < 0:
            raise AttributeValueError(f"{self.name}: give both steps or neither (-1), got "
                                      f"{self.steps}")

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is None:
            return [None], [None], []
        if len(data) < 4:
            raise ShapeError(f"data must be at least 4-D (batch, channel, height, width), got "
                             f"shape {tuple(data)}")
        per_cell = len(self.sizes) + len(self.ratios) - 1
        count = data[2] * data[3] * per_cell
        return [tuple(data)], [(1, count, 4)], []

    def forward(self, xp, inputs, aux, is_train):
        data = inputs[0]
        h, w = data.shape[2], data.shape[3]
        f32 = np.float32
        step_y, step_x = map(f32, self.steps)
        if step_y <= 0 or step_x <= 0:
            step_y, step_x = f32(1) / f32(h), f32(1) / f32(w)
        cy = (xp.arange(h, dtype=f32) + f32(self.offsets[0])) * step_y
        cx = (xp.arange(w, dtype=f32) + f32(self.offsets[1])) * step_x
        # half sizes per anchor of a cell: every size at the first ratio, then the first size
        # at the other ratios; float32 operations in MXNet's order
        pairs = [(s, self.ratios[0]) for s in self.sizes]
        pairs += [(self.sizes[0], q) for q in self.ratios[1:]]
        half_w, half_h = [], []
        for size, ratio in pairs:
            root = np.sqrt(f32(ratio))
            half_w.append(f32(size) * f32(h) / f32(w) * root / f32(2))
            half_h.append(f32(size) / root / f32(2))
        half_w = xp.asarray(np.array(half_w, f32))
        half_h = xp.asarray(np.array(half_h, f32))
        shape = (h, w, len(pairs))
        xc = xp.broadcast_to(cx[None, :, None], shape)
        yc = xp.broadcast_to(cy[:, None, None], shape)
        boxes = xp.stack([xc - half_w, yc - half_h, xc + half_w, yc + half_h], axis=-1)
        if self.clip:
            boxes = xp.clip(boxes, f32(0), f32(1))
        return [boxes.reshape(1, -1, 4).astype(data.dtype)], None
