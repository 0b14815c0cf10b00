"""Scheduling policies: one registry, one file per family, open-source solvers only."""

from .base import Allocation, Policy, PolicyView, make_policy, policy_names, register_policy
from .view import view_from_jobs

__all__ = ["Allocation", "Policy", "PolicyView", "make_policy", "policy_names", "register_policy",
           "view_from_jobs"]
