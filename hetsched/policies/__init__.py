"""Scheduling policies: one registry, one file per family, open-source solvers only."""

from hetsched.policies.base import Allocation, Policy, PolicyView, register_policy
from hetsched.policies.view import view_from_jobs


def __getattr__(name: str):
    """`make_policy` and `policy_names` live in the registry, above every policy it registers."""
    if name in ("make_policy", "policy_names"):
        from hetsched.core import registry
        return getattr(registry, name)
    raise AttributeError(name)


__all__ = ["Allocation", "Policy", "PolicyView", "make_policy", "policy_names", "register_policy",
           "view_from_jobs"]
