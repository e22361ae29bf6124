"""Hand-written numpy versions of the benchmark networks: the baseline the executor is held to.

Each step is forward + backward + plain SGD, written as one would by hand (im2col convolution,
reshape max-pooling), in float32.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def _softmax_grad(z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(labels)), labels] -= 1
    return p


class MLP:
    """784-128-64-10 relu MLP with a softmax loss."""

    def __init__(self, rng: np.random.Generator, lr: float = 0.1, batch: int = 100):
        dims = [784, 128, 64, 10]
        self.w = [rng.uniform(-0.07, 0.07, (o, i)).astype(np.float32) for i, o in zip(dims, dims[1:])]
        self.b = [np.zeros(o, np.float32) for o in dims[1:]]
        self.scale = np.float32(lr / batch)

    def step(self, x: np.ndarray, y: np.ndarray) -> None:
        acts, h = [x], x
        for k, (w, b) in enumerate(zip(self.w, self.b)):
            h = h @ w.T + b
            if k < 2:
                h = np.maximum(h, 0)
            acts.append(h)
        g = _softmax_grad(h, y)
        for k in (2, 1, 0):
            gw, gb = g.T @ acts[k], g.sum(axis=0)
            if k:
                g = (g @ self.w[k]) * (acts[k] > 0)
            self.w[k] -= self.scale * gw
            self.b[k] -= self.scale * gb


def _conv(x, w, b):
    n, c, hh, ww = x.shape
    f, _, kh, kw = w.shape
    cols = sliding_window_view(x, (kh, kw), axis=(2, 3))  # n, c, oh, ow, kh, kw
    oh, ow = cols.shape[2], cols.shape[3]
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    out = cols @ w.reshape(f, -1).T + b
    return out.reshape(n, oh, ow, f).transpose(0, 3, 1, 2), cols


def _conv_back(g, x_shape, w, cols):
    n, c, hh, ww = x_shape
    f, _, kh, kw = w.shape
    oh, ow = g.shape[2], g.shape[3]
    g2 = g.transpose(0, 2, 3, 1).reshape(-1, f)
    gw = (g2.T @ cols).reshape(w.shape)
    gcols = (g2 @ w.reshape(f, -1)).reshape(n, oh, ow, c, kh, kw)
    gx = np.zeros(x_shape, np.float32)
    for i in range(kh):
        for j in range(kw):
            gx[:, :, i:i + oh, j:j + ow] += gcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return gx, gw, g2.sum(axis=0)


def _pool(x):
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = win.max(axis=(3, 5))
    mask = win == out[:, :, :, None, :, None]
    return out, mask


def _pool_back(g, mask):
    n, c, h2, _, w2, _ = mask.shape
    return (mask * g[:, :, :, None, :, None]).reshape(n, c, h2 * 2, w2 * 2)


class LeNet:
    """conv20-tanh-pool-conv50-tanh-pool-fc500-tanh-fc10 with a softmax loss, 1x28x28 input."""

    def __init__(self, rng: np.random.Generator, lr: float = 0.1, batch: int = 64):
        u = lambda *s: rng.uniform(-0.07, 0.07, s).astype(np.float32)  # noqa: E731
        self.p = {"c1w": u(20, 1, 5, 5), "c1b": np.zeros(20, np.float32),
                  "c2w": u(50, 20, 5, 5), "c2b": np.zeros(50, np.float32),
                  "f1w": u(500, 800), "f1b": np.zeros(500, np.float32),
                  "f2w": u(10, 500), "f2b": np.zeros(10, np.float32)}
        self.scale = np.float32(lr / batch)

    def step(self, x: np.ndarray, y: np.ndarray) -> None:
        p = self.p
        c1, cols1 = _conv(x, p["c1w"], p["c1b"])
        t1 = np.tanh(c1)
        p1, m1 = _pool(t1)
        c2, cols2 = _conv(p1, p["c2w"], p["c2b"])
        t2 = np.tanh(c2)
        p2, m2 = _pool(t2)
        flat = p2.reshape(len(x), -1)
        f1 = np.tanh(flat @ p["f1w"].T + p["f1b"])
        z = f1 @ p["f2w"].T + p["f2b"]
        g = _softmax_grad(z, y)
        grads = {"f2w": g.T @ f1, "f2b": g.sum(0)}
        g = (g @ p["f2w"]) * (1 - f1 * f1)
        grads["f1w"], grads["f1b"] = g.T @ flat, g.sum(0)
        g = (g @ p["f1w"]).reshape(p2.shape)
        g = _pool_back(g, m2) * (1 - t2 * t2)
        g, grads["c2w"], grads["c2b"] = _conv_back(g, p1.shape, p["c2w"], cols2)
        g = _pool_back(g, m1) * (1 - t1 * t1)
        _, grads["c1w"], grads["c1b"] = _conv_back(g, x.shape, p["c1w"], cols1)
        for k, v in grads.items():
            p[k] -= self.scale * v
