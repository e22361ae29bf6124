"""``raymod export CHECKPOINT --onnx FILE``: a saved model as an ONNX file."""
from __future__ import annotations

import argparse
import os
import re

from .errors import CLIError, one_line

__all__ = ["_cmd_export", "input_shape"]

_PARAMS = re.compile(r"^(?P<prefix>.+)-(?P<epoch>\d+)\.params$")


def input_shape(text: str) -> tuple[str | None, tuple[int, ...]]:
    """``NAME=D1,D2,...`` or ``D1,D2,...`` (argparse type of ``--shape``)."""
    name, _, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,... or D1,D2,..., got "
                                         f"{text!r}") from None
    if not shape or any(d < 1 for d in shape):
        raise argparse.ArgumentTypeError(f"dimensions must be ints >= 1, got {text!r}")
    return (name or None), shape


def _newest_epoch(prefix: str) -> int:
    folder, base = os.path.split(os.path.abspath(prefix))
    pattern = re.compile(re.escape(base) + r"-(\d+)\.params$")
    epochs = sorted(int(m.group(1)) for n in (os.listdir(folder) if os.path.isdir(folder)
                                               else []) for m in [pattern.match(n)] if m)
    if not epochs:
        raise CLIError(f"no checkpoint at {prefix} (looked for {prefix}-NNNN.params)")
    return epochs[-1]


def _cmd_export(args: argparse.Namespace) -> int:
    try:
        from .. import onnx as rm_onnx
    except ImportError as err:
        raise CLIError(f"{one_line(err)} (pip install 'raymod[onnx]')") from None
    from ..checkpoint import load_checkpoint

    prefix, epoch = args.checkpoint, args.epoch
    m = _PARAMS.match(prefix)
    if m:
        prefix, epoch = m["prefix"], int(m["epoch"])
    if epoch is None:
        epoch = _newest_epoch(prefix)
    try:
        sym, arg_params, aux_params = load_checkpoint(prefix, epoch)
    except (OSError, ValueError) as err:
        raise CLIError(f"cannot load checkpoint {prefix} epoch {epoch}: {one_line(err)}") \
            from None
    inputs = rm_onnx.data_inputs(sym, arg_params)
    shapes = dict(args.shape or [])
    if None in shapes:
        if len(args.shape) != 1 or len(inputs) != 1:
            raise CLIError(f"give each input's shape as NAME=D1,D2,...; inputs: "
                           f"{', '.join(inputs)}", 2)
        shapes = {inputs[0]: shapes[None]}
    missing = [n for n in inputs if n not in shapes]
    unknown = [n for n in shapes if n not in inputs]
    if missing or unknown:
        raise CLIError(f"--shape needed for input(s) {', '.join(missing) or '-'}; unknown "
                       f"input(s) {', '.join(unknown) or '-'}; inputs: {', '.join(inputs)}", 2)
    try:
        rm_onnx.export_model(sym, [arg_params, aux_params], [shapes[n] for n in inputs],
                             onnx_file_path=args.onnx, dynamic=args.dynamic)
    except (rm_onnx.UnsupportedOperatorError, ValueError, TypeError, OSError) as err:
        raise CLIError(one_line(err)) from None
    declared = _declared_inputs(args.onnx) if args.dynamic else {}

    def shown(name: str) -> str:  # --dynamic: the batch dimension is the symbol N (or 2*N)
        dims = declared.get(name) or [str(d) for d in shapes[name]]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    print(f"wrote {args.onnx} (opset {rm_onnx.OPSET}) from {prefix} epoch {epoch}: inputs "
          + ", ".join(f"{n}{shown(n)}" for n in inputs))
    return 0


def _declared_inputs(path: str) -> dict[str, list[str]]:
    """The input dims the written ONNX file declares (symbolic ones by name), by input."""
    import onnx

    graph = onnx.load(path).graph
    return {i.name: [d.dim_param or str(d.dim_value) for d in i.type.tensor_type.shape.dim]
            for i in graph.input}
