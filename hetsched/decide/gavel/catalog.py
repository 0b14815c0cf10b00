"""Every policy by name: Gavel's names, and the families they come from (one file per family)."""

from __future__ import annotations

from hetsched.decide.gavel.allox import AlloX
from hetsched.decide.gavel.base import register_policy
from hetsched.decide.gavel.fifo import FIFO
from hetsched.decide.gavel.ftf import FinishTimeFairness
from hetsched.decide.gavel.gandiva import Gandiva
from hetsched.decide.gavel.las import MaxMinFairness
from hetsched.decide.gavel.makespan import MinTotalDuration
from hetsched.decide.gavel.shares import GandivaFair, Isolated, Proportional
from hetsched.decide.gavel.throughput_sum import MaxSumThroughput
from hetsched.decide.gavel.water_filling import WaterFilling

_VARIANTS = {"": dict(heterogeneity_aware=False), "_perf": {}, "_packed": dict(packing=True)}
_HOW = {"": "heterogeneity-agnostic", "_perf": "heterogeneity-aware", "_packed": "heterogeneity-aware, space sharing"}

for suffix, kw in _VARIANTS.items():
    how = _HOW[suffix]
    register_policy(f"max_min_fairness{suffix}", MaxMinFairness,
                    f"Least attained service: max-min fair normalised throughput ({how})", **kw)
    register_policy(f"max_min_fairness_water_filling{suffix}", WaterFilling,
                    f"Hierarchical max-min fairness over entities, by water filling ({how})", **kw)
    register_policy(f"finish_time_fairness{suffix}", FinishTimeFairness,
                    f"Finish-time fairness: minimise the worst JCT / isolated JCT ({how})", **kw)
    # Agnostic makespan keeps the artifacts' 5 % bisection (Shockwave's OSSP baseline depends on its point).
    register_policy(f"min_total_duration{suffix}", MinTotalDuration, f"Minimise the makespan ({how})",
                    **kw, **({"bisection": True} if suffix == "" else {}))
    # Gavel's agnostic FIFO is `gavel_fifo`: the bare word names Synergy's ordering (docs/rules.md#names).
    register_policy(f"fifo{suffix}" if suffix else "gavel_fifo", FIFO, f"First in, first out ({how})", **kw)

register_policy("max_sum_throughput_perf", MaxSumThroughput, "max total throughput")
register_policy("max_sum_throughput_normalized_by_cost_perf", MaxSumThroughput,
                "max total throughput per dollar", normalize_by_cost=True)
register_policy("max_sum_throughput_normalized_by_cost_perf_SLOs", MaxSumThroughput,
                "max throughput per dollar subject to SLOs", normalize_by_cost=True, slos=True)
register_policy("max_sum_throughput_normalized_by_cost_packed_SLOs", MaxSumThroughput,
                "max throughput per dollar subject to SLOs, with space sharing", normalize_by_cost=True,
                slos=True, packing=True)
register_policy("isolated", Isolated)
register_policy("proportional", Proportional)
register_policy("gandiva_fair", GandivaFair)
register_policy("gandiva", Gandiva)
register_policy("allox", AlloX)
register_policy("allox_alpha", AlloX, "AlloX with alpha (allox_alpha=<a>)")

from hetsched.decide.shockwave.core import ShockwavePolicy  # noqa: E402  (the planner needs base, registered above)

register_policy("shockwave", ShockwavePolicy, "Shockwave: NSW over future rounds with FTF priorities", kind="planner")
register_policy("shockwave_agnostic", ShockwavePolicy, "Shockwave planning as if every GPU type were its profile's",
                kind="planner", heterogeneity_aware=False)
