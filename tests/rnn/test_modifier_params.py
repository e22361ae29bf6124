"""Stacks of modifier cells keep the wrapped cells' weights, as in MXNet 1.9.1."""
import numpy as np

import raymod as rm

ALL = sorted(f"l{k}_{g}_{t}" for k in range(3) for g in ("i2h", "h2h") for t in ("weight", "bias"))


def _stack():
    cell = rm.rnn.SequentialRNNCell()
    cell.add(rm.rnn.LSTMCell(4, prefix="l0_"))
    cell.add(rm.rnn.ResidualCell(rm.rnn.LSTMCell(4, prefix="l1_")))
    cell.add(rm.rnn.ZoneoutCell(rm.rnn.GRUCell(4, prefix="l2_"), 0.5, 0.5))
    return cell


def test_sequential_of_modifier_cells_holds_every_inner_weight():
    cell = _stack()
    assert sorted(cell.params._params) == ALL
    assert [s.name for s in cell.begin_state()] == [
        "l0_begin_state_0", "l0_begin_state_1", "l1_begin_state_0", "l1_begin_state_1",
        "l2_begin_state_0"]
    outputs, _ = cell.unroll(2, rm.sym.Variable("x"), merge_outputs=True)
    assert sorted(outputs.list_arguments()) == sorted(ALL + ["x"])


def test_unpack_and_pack_weights_through_modifier_cells():
    cell = _stack()
    rows = {"l0": 16, "l1": 16, "l2": 12}
    args = {n: np.arange(rows[n[:2]] * (4 if n.endswith("weight") else 1), dtype=np.float32)
            .reshape((rows[n[:2]], 4) if n.endswith("weight") else (rows[n[:2]],))
            for n in ALL}
    unpacked = cell.unpack_weights(args)
    assert "l1_i2h_f_weight" in unpacked and "l2_h2h_z_bias" in unpacked
    packed = cell.pack_weights(unpacked)
    assert sorted(packed) == ALL
    for name in ALL:
        np.testing.assert_array_equal(packed[name], args[name])


def test_sequential_with_its_own_params_shares_them_with_a_wrapped_cell():
    params = rm.rnn.RNNParams("s_")
    cell = rm.rnn.SequentialRNNCell(params=params)
    inner = rm.rnn.RNNCell(3, prefix="r_")
    cell.add(rm.rnn.ResidualCell(inner))
    assert sorted(params._params) == ["r_h2h_bias", "r_h2h_weight", "r_i2h_bias",
                                      "r_i2h_weight"]
    assert inner.params._params["r_i2h_weight"] is params._params["r_i2h_weight"]


def test_bidirectional_of_modifier_cells_holds_both_weights():
    cell = rm.rnn.BidirectionalCell(rm.rnn.ResidualCell(rm.rnn.GRUCell(2, prefix="a_")),
                                    rm.rnn.ZoneoutCell(rm.rnn.GRUCell(2, prefix="b_"), 0.1))
    assert sorted(cell.params._params) == sorted(
        f"{p}_{g}_{t}" for p in "ab" for g in ("i2h", "h2h") for t in ("weight", "bias"))
