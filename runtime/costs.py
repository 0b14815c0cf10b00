"""The runtime's fixed costs, measured (docs/rules.md#lease-start): what a new lease loses before its first step.

- lease start: from the round's plan that issued a new lease to the lease's first step (waiting for the job's
  older processes to exit, the hand-out at the next heartbeat, launch, start-up, checkpoint restore);
- restart: a resumed lease's wall time from its hand-out to its first step (launch, start-up, restore).

`hetsched calibrate` writes the lease start as the simulator's `lease_start_s`, so the simulator predicts this
runtime, not only the papers' rules.
"""

from __future__ import annotations

from collections import deque

KEPT = 1000          # the most recent of each, averaged in GetStatus


class FixedCosts:
    """Mixin of `RuntimeState` (its `events`)."""

    def _init_costs(self) -> None:
        self.restart_costs: deque[float] = deque(maxlen=KEPT)
        self.restart_count = 0
        self.start_latencies: deque[float] = deque(maxlen=KEPT)
        self.lease_start_count = 0

    def first_steps(self, lease, now: float, seconds: float) -> None:
        """A lease's first report with steps run (`seconds`: the time they took): its start latency, and for a
        resumed lease one restart cost."""
        lease.stepped = True
        began = now - seconds
        self.start_latencies.append(max(0.0, began - lease.issued_at))
        self.lease_start_count += 1
        if lease.resumed and lease.started_at is not None:
            cost = max(0.0, began - lease.started_at)
            self.restart_costs.append(cost)
            self.restart_count += 1
            if self.events.on:
                self.events.add(f"restart job={lease.job_id} lease={lease.lease_id} cost_s={cost:.2f}")

    def mean_restart_s(self) -> float:
        return _mean(self.restart_costs)

    def mean_lease_start_s(self) -> float:
        return _mean(self.start_latencies)


def _mean(values) -> float:
    return sum(values) / len(values) if values else 0.0
