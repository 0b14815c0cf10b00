"""Gavel's allocation policies: one file per family, open-source solvers only. They register their names here; the
registry above them builds them (`hetsched.core.registry.make_policy`, `policy_names`)."""

from hetsched.decide.gavel.base import Allocation, Policy, PolicyView, register_policy
from hetsched.decide.gavel.view import view_from_jobs


__all__ = ["Allocation", "Policy", "PolicyView", "register_policy", "view_from_jobs"]
