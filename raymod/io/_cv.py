"""Which library decodes, encodes, resizes and warps images: OpenCV when ``cv2`` imports
(``pip install 'raymod[image]'`` brings ``opencv-python-headless``), Pillow otherwise.

OpenCV is what MXNet's own pipeline calls (``cv::imdecode``, ``cv::resize``,
``cv::warpAffine``, ``cv::cvtColor``), and it releases the GIL inside each call, so
``preprocess_threads`` threads decode in parallel. Pillow is the fallback: the same steps,
with numpy where Pillow has no equivalent. Each step in ``recordio.py`` and
``io/image_aug.py`` asks :func:`opencv` once and takes one branch or the other; random
draws never depend on the backend, so one seed gives the same crops, flips and shifts under
both (the pixels agree within the bounds ``tests/io/test_image_backends.py`` states).

``RAYMOD_IMAGE_BACKEND=opencv|pillow`` forces one (read when the first image is handled, or
at :func:`use`). Choosing OpenCV sets its own thread pool to one thread
(``cv2.setNumThreads(1)``, process-wide): the parallelism is ``preprocess_threads``', and a
second pool per call would only fight it for the cores.
"""
from __future__ import annotations

import os
from typing import Any

ENV = "RAYMOD_IMAGE_BACKEND"
BACKENDS = ("opencv", "pillow")

_backend: str | None = None
_cv2: Any = None


def _import_cv2() -> Any:
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def use(name: str | None = None) -> str:
    """Switch to backend ``name`` (``'opencv'`` or ``'pillow'``); None: the one
    ``RAYMOD_IMAGE_BACKEND`` names, else OpenCV when ``cv2`` imports, else Pillow. Returns
    the backend now in use."""
    global _backend, _cv2
    if name is None:
        name = os.environ.get(ENV, "").strip().lower() or None
        if name is not None and name not in BACKENDS:
            raise ValueError(f"{ENV} must be one of {BACKENDS}; got {name!r}")
    elif name not in BACKENDS:
        raise ValueError(f"the image backend must be one of {BACKENDS}; got {name!r}")
    cv2 = _import_cv2() if name != "pillow" else None
    if name == "opencv" and cv2 is None:
        raise ImportError("the opencv image backend needs cv2: pip install 'raymod[image]' "
                          "(or pip install opencv-python-headless)")
    if cv2 is not None:
        cv2.setNumThreads(1)
    _cv2, _backend = cv2, ("opencv" if cv2 is not None else "pillow")
    return _backend


def backend() -> str:
    """The backend in use: ``'opencv'`` or ``'pillow'`` (chosen on first call)."""
    return _backend if _backend is not None else use()


def opencv() -> Any:
    """The ``cv2`` module when OpenCV is the backend, else None."""
    if _backend is None:
        use()
    return _cv2
