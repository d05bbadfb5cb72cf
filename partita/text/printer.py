"""Placeholder until the printer lands."""


def print_expr(expr):
    return repr(expr)


def print_module(mod):
    return repr(mod)


def astext(mod):
    return print_module(mod), []
