"""CTCLoss: connectionist temporal classification loss of unsegmented label sequences."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param

# Log-probability of unreachable states; finite so that log-sum-exp never meets inf - inf.
_NEG = -1e30


def _logsumexp(xp, terms):
    """Elementwise log(sum(exp(t))) of same-shape arrays, stable for very negative values."""
    m = terms[0]
    for t in terms[1:]:
        m = xp.maximum(m, t)
    total = xp.exp(terms[0] - m)
    for t in terms[1:]:
        total = total + xp.exp(t - m)
    return m + xp.log(total)


def _shift(xp, a, k: int):
    """``a`` moved ``k`` places right along the last axis, filled with ``_NEG`` (k > 0) or
    moved ``-k`` places left (k < 0)."""
    out = xp.full_like(a, _NEG)
    if k > 0:
        out[..., k:] = a[..., :-k]
    else:
        out[..., :k] = a[..., -k:]
    return out


class CTCLoss(Op):
    """Per-sample CTC loss ``-log p(label | data)`` of activation sequences.

    ``data`` has shape ``(T, N, C)``: unnormalised activations over ``C`` symbols (a softmax is
    applied inside) for ``T`` steps of ``N`` samples. ``label`` has shape ``(N, L)``. One
    symbol is the blank: index 0 with ``blank_label='first'`` (labels are then padded with
    ``0``), index ``C - 1`` with ``blank_label='last'`` (padding ``-1``). A label sequence ends
    at its first padding value, or at ``label_lengths`` when ``use_label_lengths``; the data of a
    sample ends at ``data_lengths`` when ``use_data_lengths`` (steps beyond take no gradient).
    The output has shape ``(N,)``. MXNet's aliases are ``ctc_loss``, ``_contrib_CTCLoss`` and
    ``_contrib_ctc_loss``.

    The probabilities of all alignments are summed by the forward (alpha) and backward (beta)
    recursions in log space, vectorised over samples and label positions (a loop over time
    only). A label that no alignment of the given length can produce gives a loss of about
    ``1e30`` and a zero gradient from the recursion.

    Attributes
    ----------
    use_data_lengths : bool, default False
    use_label_lengths : bool, default False
    blank_label : {'first', 'last'}, default 'first'

    Like MXNet, the op has a second, hidden output ``output1``: the gradient of each sample's
    loss with respect to ``data``, computed by a training forward (zeros at inference).
    Backward keeps it and scales it by the head gradient of each sample, as MXNet does
    (CTCLoss is not a loss head).
    """

    name = "CTCLoss"
    aliases = ("ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss")
    params = {"use_data_lengths": Param("bool", False), "use_label_lengths": Param("bool", False),
              "blank_label": Param("str", "first", choices=("first", "last"))}
    inputs = ("data", "label", "data_lengths", "label_lengths")
    no_grad_inputs = ("label", "data_lengths", "label_lengths")
    # MXNet registers two unnamed outputs: the loss and the hidden gradient w.r.t. data
    outputs = ("output0", "output1")
    retain_outputs = (1,)

    def num_visible_outputs(self) -> int:
        return 1

    def list_arguments(self) -> list[str]:
        return (["data", "label"] + ["data_lengths"] * self.use_data_lengths
                + ["label_lengths"] * self.use_label_lengths)

    def infer_shape(self, in_shapes, out_shapes):
        names = self.list_arguments()
        shapes = dict(zip(names, in_shapes))
        data, label = shapes["data"], shapes["label"]
        if data is not None and len(data) != 3:
            raise ShapeError(f"CTCLoss: data must be 3-D (T, N, C), got shape {data}")
        if label is not None and len(label) != 2:
            raise ShapeError(f"CTCLoss: label must be 2-D (N, L), got shape {label}")
        batch = (data[1] if data is not None and data[1] else
                 label[0] if label is not None and label[0] else 0)
        for name in names:
            s = shapes[name]
            if s is None or name == "data":
                continue
            if name != "label" and len(s) != 1:
                raise ShapeError(f"CTCLoss: {name} must be a vector (N,), got shape {s}")
            if batch and s[0] and s[0] != batch:
                raise ShapeError(f"CTCLoss: {name} has batch size {s[0]}, data {data} and "
                                 f"label {label} need {batch}")
        if data is not None and label is not None and data[0] and label[1] \
                and label[1] > data[0]:
            raise ShapeError(f"CTCLoss: labels of length {label[1]} exceed the {data[0]} "
                             f"steps of data {data}")
        filled = list(in_shapes)
        if batch:
            for i, name in enumerate(names):
                if name in ("data_lengths", "label_lengths") and filled[i] is None:
                    filled[i] = (batch,)
        return filled, [(batch,) if batch else None, data], []

    def infer_type(self, in_types, out_types):
        # labels and lengths keep their own dtype (integers allowed); outputs follow data
        data = in_types[0] or out_types[0] or out_types[1]
        filled = [data] + [t if t is not None else data for t in in_types[1:]]
        return filled, [data, data], []

    def forward(self, xp, inputs, aux, is_train):
        names = self.list_arguments()
        given = dict(zip(names, inputs))
        x = given["data"]
        steps, batch, classes = x.shape
        blank = 0 if self.blank_label == "first" else classes - 1
        labels = given["label"].astype("int64")
        width = labels.shape[1]
        if self.use_label_lengths:
            label_len = given["label_lengths"].astype("int64")
        else:
            is_pad = labels == (0 if self.blank_label == "first" else -1)
            label_len = xp.where(is_pad.any(axis=1), is_pad.argmax(axis=1), width)
        if self.use_data_lengths:
            data_len = given["data_lengths"].astype("int64")
        else:
            data_len = xp.full((batch,), steps, dtype="int64")
        label_len = xp.minimum(label_len, width)

        # extended labels: blank, l1, blank, l2, ..., blank (S = 2L + 1 states)
        states = 2 * width + 1
        ext = xp.full((batch, states), blank, dtype="int64")
        ext[:, 1::2] = xp.where(labels >= 0, labels, blank)
        pos = xp.arange(states)
        valid = pos[None, :] < (2 * label_len + 1)[:, None]
        # a state may be entered from two back when it is a label differing from that one
        prev2 = xp.full_like(ext, -1)
        prev2[:, 2:] = ext[:, :-2]
        skip = (ext != blank) & (ext != prev2) & (pos[None, :] >= 2)

        shifted = x - x.max(axis=2, keepdims=True)
        logp = shifted - xp.log(xp.exp(shifted).sum(axis=2, keepdims=True))
        lp = xp.take_along_axis(logp, xp.broadcast_to(ext[None], (steps, batch, states)), axis=2)
        neg = x.dtype.type(_NEG)
        lp = xp.where(valid[None], lp, neg)

        alpha = xp.empty_like(lp)
        first = xp.where(pos[None, :] < 2, lp[0], neg)
        alpha[0] = first
        # loop over time: each step depends on the previous one
        for t in range(1, steps):
            cand = [alpha[t - 1], _shift(xp, alpha[t - 1], 1),
                    xp.where(skip, _shift(xp, alpha[t - 1], 2), neg)]
            nxt = _logsumexp(xp, cand) + lp[t]
            alpha[t] = xp.where((t < data_len)[:, None], nxt, alpha[t - 1])
        ends = xp.stack([2 * label_len, xp.maximum(2 * label_len - 1, 0)], axis=1)
        last = xp.take_along_axis(alpha[steps - 1], ends, axis=1)
        last[:, 1] = xp.where(label_len > 0, last[:, 1], neg)
        loss = -_logsumexp(xp, [last[:, 0], last[:, 1]])
        if not is_train:
            return [loss.astype(x.dtype), xp.zeros_like(x)], None

        is_end = (pos[None, :] == ends[:, :1]) | ((pos[None, :] == ends[:, 1:]) &
                                                  (label_len > 0)[:, None])
        skip_next = _shift(xp, skip.astype(x.dtype), -2) > 0
        beta = xp.empty_like(lp)
        later = xp.full((batch, states), neg, dtype=x.dtype)
        for t in range(steps - 1, -1, -1):
            cand = [later, _shift(xp, later, -1), xp.where(skip_next, _shift(xp, later, -2), neg)]
            rec = _logsumexp(xp, cand) + lp[t]
            start = xp.where(is_end, lp[t], neg)
            cur = xp.where((t == data_len - 1)[:, None], start,
                           xp.where((t < data_len - 1)[:, None], rec, neg))
            beta[t] = cur
            later = cur
        # occupation probability of each state, gathered onto the symbols
        gamma = xp.exp(alpha + beta - lp + loss[None, :, None])
        gamma = xp.where(valid[None], gamma, 0)
        onehot = (ext[:, :, None] == xp.arange(classes)[None, None, :]).astype(x.dtype)
        occupancy = xp.einsum("tns,nsc->tnc", gamma, onehot)
        grad = xp.exp(logp) - occupancy
        active = xp.arange(steps)[:, None] < data_len[None, :]
        grad = xp.where(active[:, :, None], grad, 0).astype(x.dtype)
        return [loss.astype(x.dtype), grad], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        grads = [None] * len(self.list_arguments())
        if need_grad[0]:
            grads[0] = outputs[1] * out_grads[0][None, :, None]
        return grads
