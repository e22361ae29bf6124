"""Shared by loss heads that take a ``label`` input: label-shape matching and dtypes."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, merge_shape


def compatible(a: tuple, b: tuple) -> bool:
    """Whether two partial shapes can describe the same array (0 = unknown dim)."""
    return len(a) == len(b) and all(x == y or not x or not y for x, y in zip(a, b))


class LabelledLoss(Op):
    """A loss head with inputs ``data`` and ``label``; the output has the data's shape."""

    inputs = ("data", "label")
    no_grad_inputs = ("label",)
    is_loss = True

    @staticmethod
    def match_label(label: tuple | None, options: list[tuple], data: tuple) -> tuple:
        """The label's shape: the first acceptable shape when unknown, else the one it fits."""
        if label is None:
            return options[0]
        match = next((o for o in options if compatible(o, label)), None)
        if match is None:
            raise ShapeError(f"label has shape {tuple(label)} but data {data} needs one of "
                             f"{', '.join(map(str, dict.fromkeys(options)))}")
        return merge_shape(label, match)

    def infer_type(self, in_types, out_types):
        data = in_types[0] or out_types[0]
        return [data, in_types[1] or data], [data], []


class ClassHead(LabelledLoss):
    """A loss head over class scores: data has a batch and a class axis at least, and the
    label one of the shapes :meth:`_label_shapes` accepts for it."""

    def _label_shapes(self, data: tuple) -> list[tuple]:
        """The label shapes ``data`` takes, the one to infer first."""
        raise NotImplementedError

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        label = in_shapes[1]
        if data is not None:
            if len(data) < 2:
                raise ShapeError(f"data must have a batch and a class axis, got {data}")
            label = self.match_label(label, self._label_shapes(data), data)
        return [data, label], [data], []
