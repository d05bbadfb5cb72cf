"""Placement report rows come in the source model's operator order, whatever the dataflow order."""

from __future__ import annotations

from partita.partition import partition_for, placement_report

import partita as P


def test_rows_follow_source_indices_not_dataflow_order():
    # the right branch (ops #1, #2) is visited before the left one (#0) by a dataflow walk
    mod = P.parse(
        """
def @main(%x: Tensor[(4), float32]) {
  %0 = tanh(%x) /* span=TANH:1:b1 */;
  %1 = exp(%0) /* span=EXP:2:b2 */;
  %2 = sigmoid(%x) /* span=LOGISTIC:0:a */;
  add(%1, %2) /* span=ADD:3:out */
}
"""
    )
    rows = placement_report(partition_for(mod, "llvm")).rows
    assert [r.index for r in rows] == [0, 1, 2, 3]
    assert [r.op for r in rows] == ["LOGISTIC", "TANH", "EXP", "ADD"]
