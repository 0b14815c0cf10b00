"""What a policy returns when its solver fails: a documented, always-feasible allocation."""

from __future__ import annotations

import logging

from hetsched.decide.gavel.base import Allocation, Policy, PolicyView
from hetsched.decide.gavel.shares import isolated_fractions

log = logging.getLogger(__name__)


def fallback_allocation(policy: Policy, view: PolicyView, status: str) -> Allocation:
    """The isolated allocation (1/m of every GPU type), logged as a warning; never raises."""
    log.warning("policy %s: solver returned %r for %d jobs; falling back to the isolated allocation",
                policy.name, status, view.num_jobs)
    return Allocation(view.job_ids, view.gpu_types, isolated_fractions(view))
