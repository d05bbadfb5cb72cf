"""partita.backends: the backend interface, the registry and the support-check helpers.

    from partita.backends import Backend, Verdict, constraint, register_backend

See docs/backends.md for declaring a backend in an outside package.
"""

from .cost import CostModel, RegionStats, count_macs, type_bytes
from .registry import (
    DEFAULT_HOST,
    ENTRY_POINT_GROUP,
    Backend,
    BackendError,
    Option,
    PatternEntry,
    backend_origin,
    describe_backends,
    find_backend,
    get_backend,
    get_pattern_table,
    host_backend,
    list_backends,
    normalize_table,
    register_backend,
    register_pattern_table,
    unregister_backend,
)
from .verdict import (
    AllOf,
    CheckError,
    Constraint,
    Verdict,
    all_of,
    as_verdict,
    constraint,
    in_range,
    requirements_of,
    run_check,
)

__all__ = [
    "AllOf",
    "Backend",
    "BackendError",
    "CheckError",
    "Constraint",
    "CostModel",
    "DEFAULT_HOST",
    "ENTRY_POINT_GROUP",
    "Option",
    "PatternEntry",
    "RegionStats",
    "Verdict",
    "all_of",
    "as_verdict",
    "constraint",
    "backend_origin",
    "count_macs",
    "describe_backends",
    "find_backend",
    "get_backend",
    "get_pattern_table",
    "host_backend",
    "in_range",
    "list_backends",
    "normalize_table",
    "register_backend",
    "register_pattern_table",
    "requirements_of",
    "run_check",
    "type_bytes",
    "unregister_backend",
]
