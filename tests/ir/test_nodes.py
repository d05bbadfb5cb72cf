import numpy as np
import pytest

import partita as P
from partita.ir import Call, Constant, Function, Tuple, TupleGetItem, Var, const, var
from partita.ir.types import TensorType, TupleType
from partita.ops import get_op


def test_nodes_are_immutable():
    x = var("x", (1, 4), "int8")
    call = get_op("nn.relu")(x)
    with pytest.raises(AttributeError):
        call.args = ()
    with pytest.raises(AttributeError):
        x.name_hint = "y"
    fn = Function([x], call)
    with pytest.raises(TypeError):
        fn.attrs["Composite"] = "x"
    assert fn.with_attr("Composite", "npu.relu").attrs["Composite"] == "npu.relu"
    assert "Composite" not in fn.attrs


def test_constant_is_read_only_copy():
    arr = np.arange(4, dtype=np.int8)
    c = Constant(arr)
    arr[0] = 9
    assert c.data[0] == 0
    with pytest.raises(ValueError):
        c.data[0] = 1
    assert c.checked_type == TensorType((4,), "int8")


def test_const_defaults_follow_relay():
    assert const(0.5).data.dtype == np.float32
    assert const(3).data.dtype == np.int32
    assert const(np.int64(3)).data.dtype == np.int64
    assert const(2, "int8").data.dtype == np.int8


def test_unsupported_dtype_is_a_partita_error():
    with pytest.raises(P.PartitaError, match="complex128"):
        Constant(np.zeros(2, np.complex128))
    with pytest.raises(P.PartitaError, match="unsupported dtype"):
        TensorType((1,), "float8")


def test_types_compare_by_value():
    assert TensorType((1, 2), "int8") == TensorType([1, 2], np.int8)
    assert TupleType([TensorType((1,), "int8")]) == TupleType([TensorType((1,), "int8")])
    assert str(TensorType((1, 2), "int8")) == "Tensor[(1, 2), int8]"
    assert str(TensorType((3,), "int8")) == "Tensor[(3,), int8]"
    with pytest.raises(P.PartitaError):
        TensorType((-1, 2), "int8")


def test_call_validates_arity_and_attrs_at_construction():
    x = var("x", (1, 4), "float32")
    with pytest.raises(P.ArityError, match="nn.relu.*takes 1 arguments"):
        Call(get_op("nn.relu"), [x, x])
    with pytest.raises(P.AttrError, match="unknown attribute 'bogus'"):
        get_op("qnn.quantize")(x, 0.1, 0, bogus=1)
    with pytest.raises(P.AttrError, match="out_dtype.*must be one of"):
        get_op("qnn.quantize")(x, 0.1, 0, out_dtype="float32")
    with pytest.raises(P.PartitaError, match="not an expression"):
        Call(get_op("nn.relu"), [np.zeros(3)])


def test_unknown_op_suggests_names():
    with pytest.raises(P.OpNotFoundError, match="did you mean.*qnn.quantize"):
        get_op("qnn.quantise")


def test_attr_coercion_lists_to_tuples():
    x = var("x", (1, 4), "float32")
    q = get_op("qnn.quantize")(x, 0.1, 0, axis=np.int64(1))
    assert q.attrs.axis == 1 and type(q.attrs.axis) is int
    with pytest.raises(P.AttrError, match="must be an int"):
        get_op("qnn.quantize")(x, 0.1, 0, axis=1.5)


def test_tuple_and_getitem_types():
    x = var("x", (2,), "int8")
    t = Tuple([x, x])
    g = TupleGetItem(t, 1)
    P.infer_type(g)
    assert g.checked_type == TensorType((2,), "int8")
    with pytest.raises(P.TypeInferenceError, match="out of range"):
        P.infer_type(TupleGetItem(t, 2))


def test_checked_type_before_infer_type_says_what_to_do():
    call = get_op("nn.relu")(var("x", (1,), "float32"))
    with pytest.raises(P.PartitaError, match="run InferType"):
        _ = call.checked_type


def test_var_without_type_gives_a_clear_error():
    with pytest.raises(P.TypeInferenceError, match="%x has no type annotation"):
        P.infer_type(get_op("nn.relu")(Var("x")))


def test_module_access():
    mod = P.IRModule.from_expr(get_op("nn.relu")(var("x", (1,), "float32")))
    assert "main" in mod and len(mod) == 1
    with pytest.raises(P.PartitaError, match="no function @foo"):
        mod["foo"]


def test_constant_types_are_interned_and_still_compare_by_value(monkeypatch):
    """Constants of one shape and dtype share their type object (InferType's memo finds them by
    identity); a full intern table starts again, and types made elsewhere stay equal."""
    import partita.ir.types as types

    a, b = Constant(np.zeros((2, 3), np.int8)), Constant(np.ones((2, 3), np.int8))
    assert a.type_or_none is b.type_or_none
    assert Constant(np.zeros((2, 3), np.int16)).type_or_none is not a.type_or_none
    assert TensorType((2, 3), "int8") == a.type_or_none
    monkeypatch.setattr(types, "_INTERNED_MAX", 2)
    monkeypatch.setattr(types, "_INTERNED", {})
    kept = [Constant(np.zeros(n, np.float32)).type_or_none for n in (1, 2, 3, 1)]
    assert len(types._INTERNED) <= 2
    assert kept[0] == kept[3] and kept[0].shape == (1,)


def test_infer_type_memo_by_identity_gives_each_call_its_own_result():
    """Two requantizes of different input shapes whose constant arguments share type objects:
    the identity memo must key on the data argument too."""
    q = get_op("qnn.requantize")

    def requant(shape):
        x = var("x", shape, "int32")
        return q(x, const(np.float32(0.5)), const(np.int32(0)), const(np.float32(0.25)),
                 const(np.int32(3)), out_dtype="int8")

    a, b = requant((1, 4)), requant((2, 4))
    out = Tuple([a, b, requant((1, 4))])
    P.infer_type(out)
    assert a.checked_type == TensorType((1, 4), "int8")
    assert b.checked_type == TensorType((2, 4), "int8")
