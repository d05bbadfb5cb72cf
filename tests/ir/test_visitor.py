from partita.ir import (
    Call,
    ExprMutator,
    ExprVisitor,
    Function,
    Tuple,
    free_vars,
    post_order,
    substitute,
    var,
)
from partita.ops import get_op

relu, add = get_op("nn.relu"), get_op("add")


def test_post_order_visits_children_first_and_once():
    x = var("x", (2,), "float32")
    a = relu(x)
    b = add(a, a)
    order = post_order(b)
    assert order == [x, a, b]


def test_visitor_counts_calls():
    x = var("x", (2,), "float32")
    expr = add(relu(x), relu(x))

    class Count(ExprVisitor):
        n = 0

        def visit_call(self, call):
            self.n += 1

    v = Count()
    v.visit(expr)
    assert v.n == 3


def test_mutator_keeps_sharing_and_identity():
    x = var("x", (2,), "float32")
    a = relu(x)
    expr = add(a, a)
    assert ExprMutator().visit(expr) is expr

    class ReluToNeg(ExprMutator):
        def rewrite_call(self, call, op, args):
            if call.op.name == "nn.relu":
                return get_op("subtract")(args[0], args[0])
            return super().rewrite_call(call, op, args)

    out = ReluToNeg().visit(expr)
    assert out.op.name == "add"
    assert out.args[0] is out.args[1]  # still shared
    assert out.args[0].op.name == "subtract"


def test_mutator_keeps_span():
    from partita.ir import Span

    x = var("x", (2,), "float32")
    y = var("y", (2,), "float32")
    expr = relu(x, span=Span(3, "RELU", "out"))
    out = substitute(expr, {x: y})
    assert out.args[0] is y and out.span == Span(3, "RELU", "out")


def test_free_vars_skip_function_params():
    x, p = var("x", (2,), "float32"), var("p", (2,), "float32")
    fn = Function([p], relu(p))
    expr = Tuple([Call(fn, [x]), x])
    assert free_vars(expr) == [x]
