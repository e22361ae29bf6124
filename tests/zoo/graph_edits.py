"""Edits of MXNet symbol JSON that make a network's recorded run deterministic.

Shared, like ``params.py``, by the fixture generator (under MXNet) and the raymod test, so both
sides run exactly the same graph. Plain ``json``-level dicts in, new dicts out; nothing else.

- :func:`freeze_random` turns every sampling node (``_random_*``, ``_sample_*``, ``_shuffle``)
  into an input variable of the same name; the generator records the values MXNet drew there
  and both sides feed them back.
- :func:`zero_dropout` sets ``p`` of every Dropout node to 0, used for the training-mode record
  only (inference-mode Dropout is the identity anyway).
"""
from __future__ import annotations

import copy

RANDOM_PREFIXES = ("_random_", "_sample_")
RANDOM_OPS = ("_shuffle",)


def is_random_op(op: str) -> bool:
    """True for MXNet ops whose forward draws random numbers (besides Dropout)."""
    return op.startswith(RANDOM_PREFIXES) or op in RANDOM_OPS


def op_names(graph: dict) -> list[str]:
    """Every operator name the graph uses, sorted (variables excluded)."""
    return sorted({n["op"] for n in graph["nodes"] if n["op"] != "null"})


def freeze_random(graph: dict) -> tuple[dict, list[str]]:
    """A copy of ``graph`` whose sampling nodes are variables; and those variables' names."""
    out = copy.deepcopy(graph)
    frozen = []
    for i, node in enumerate(out["nodes"]):
        if node["op"] != "null" and is_random_op(node["op"]):
            frozen.append(node["name"])
            out["nodes"][i] = {"op": "null", "name": node["name"], "inputs": []}
            out["arg_nodes"] = sorted(set(out.get("arg_nodes", [])) | {i})
    return out, frozen


def zero_dropout(graph: dict) -> tuple[dict, list[str]]:
    """A copy of ``graph`` with every Dropout's ``p`` set to 0; and the changed nodes' names."""
    out = copy.deepcopy(graph)
    changed = []
    for node in out["nodes"]:
        if node["op"] == "Dropout":
            attrs = node.setdefault("attrs", {})
            attrs["p"] = "0"
            changed.append(node["name"])
    return out, changed


# heads whose input is worth comparing too: a saturating or loss op squashes its input, so
# its output alone can hide a wrong input (a softmax of tiny logits is ~uniform)
SQUASHING = {"SoftmaxOutput", "Softmax", "LogisticRegressionOutput", "LinearRegressionOutput",
             "MAERegressionOutput", "SVMOutput", "softmax", "SoftmaxActivation", "log_softmax"}
SQUASHING_ACT = {"sigmoid", "tanh", "softrelu"}
PASS_THROUGH = {"Reshape", "reshape", "Flatten", "flatten", "BlockGrad", "stop_gradient",
                "MakeLoss", "make_loss", "identity", "_copy"}
MULTI_OUTPUT = {"SliceChannel", "split"}


DETECTION = {"_contrib_MultiBoxDetection", "_contrib_Proposal", "_contrib_MultiProposal"}


def head_probes(graph: dict) -> list[str]:
    """Internal output names (as in ``get_internals().list_outputs()``) worth comparing
    besides the outputs: the input of every squashing head (found through reshapes and
    gradient blocks), and the inputs of detection heads (NMS output hides small errors in
    scores and boxes) plus, where such an input is a softmax, the softmax's input."""
    nodes = graph["nodes"]
    probes: list[str] = []

    def trace(nid):
        while nodes[nid]["op"] in PASS_THROUGH and nodes[nid]["inputs"]:
            nid = nodes[nid]["inputs"][0][0]
        return nid

    def squashing(node):
        act = (node.get("attrs") or {}).get("act_type")
        return node["op"] in SQUASHING or (node["op"] == "Activation" and act in SQUASHING_ACT)

    def add(entry):
        src, k = entry[:2]
        if nodes[src]["op"] == "null":
            return
        name = nodes[src]["name"]
        probe = f"{name}_output{k}" if nodes[src]["op"] in MULTI_OUTPUT else f"{name}_output"
        if probe not in probes:
            probes.append(probe)

    for head in graph["heads"]:
        node = nodes[trace(head[0])]
        if squashing(node):
            add(node["inputs"][0])
        elif node["op"] in DETECTION:
            for entry in node["inputs"]:
                add(entry)
                inner = nodes[trace(entry[0])]
                if squashing(inner):
                    add(inner["inputs"][0])
    return probes
