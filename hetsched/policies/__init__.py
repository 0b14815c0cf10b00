"""Scheduling policies: one registry, one file per family, open-source solvers only."""

from .base import Allocation, Policy, PolicyView, register_policy
from .view import view_from_jobs


def __getattr__(name: str):
    """`make_policy` and `policy_names` live in the registry, above every policy it registers."""
    if name in ("make_policy", "policy_names"):
        from .. import registry
        return getattr(registry, name)
    raise AttributeError(name)


__all__ = ["Allocation", "Policy", "PolicyView", "make_policy", "policy_names", "register_policy",
           "view_from_jobs"]
