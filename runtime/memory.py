"""What the core learns that a scheduler restart would lose, stored and given back (docs/rules.md#runtime-restart):
the decide stage's history of each job (LAS's attained service and the starvation guard's last run; Shockwave's
fair-share finish estimates and calibration) and its own state (the planner's round count and clock origin), the
rates that measurements moved (per job, for the job type and batch size measured) and the pairs' co-location
efficiencies. A stored value that does not parse costs only itself, with a warning."""

from __future__ import annotations

import json
import logging

from .store import JobRow

log = logging.getLogger(__name__)


class RestartMemory:
    """Mixin of `RuntimeState` (its `core` and `store`)."""

    def _init_memory(self) -> None:
        self.rates_moved: set[int] = set()               # jobs whose measured rates moved since the last round
        self.pairs_moved = False                         # and whether a pair's efficiency did

    def _remember(self, credited: list[int]) -> None:
        """At a round's end: the decide stage's history of the jobs whose past moved and its own state (none for a
        stage whose decisions read none), the rates measurements moved, and the pairs' measured efficiencies."""
        core = self.core
        if core.decide is not None:
            rows = [(json.dumps(h), j) for j, h in core.decide.histories(credited)]
            state = core.decide.state()
            if rows or state is not None:
                self.store.set_histories(rows, None if state is None else ("decide_state", json.dumps(state)))
        if self.rates_moved:
            moved = core.measurements
            self.store.set_rates([(json.dumps(dict(zip(("job_type", "rates"), moved.measured_rates(j)))), j)
                                  for j in sorted(self.rates_moved) if j in core.jobs])
            self.rates_moved.clear()
        if self.pairs_moved:
            self.store.set_meta("pair_efficiencies", json.dumps(core.measurements.pair_efficiencies()))
            self.pairs_moved = False

    def _restore_core(self) -> None:
        """A new core: the decide stage's state and the pairs' efficiencies from before a restart."""
        kept = self.store.meta("decide_state")
        if kept and self.core.decide is not None:
            try:
                self.core.decide.restore_state(json.loads(kept))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("the stored decide state %r is unreadable (%s); it starts afresh", kept[:80], exc)
        kept = self.store.meta("pair_efficiencies")
        try:
            self.core.measurements.restore_pair_efficiencies(
                [(str(a), int(s), str(b), str(g), float(e)) for a, s, b, g, e in json.loads(kept or "[]")])
        except (ValueError, TypeError) as exc:
            log.warning("stored pair efficiencies are unreadable (%s); pairs start at the table's", exc)

    def _restore(self, row: JobRow) -> None:
        """A job joining the core after a restart: its history and measured rates (after its batch size is
        resumed, so rates measured at that size apply)."""
        if self.core.decide is not None:
            try:
                history = row.decide_history()
                if history is not None:
                    self.core.decide.restore(row.job_id, history)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("job %d: its stored history %r is unreadable (%s); it starts without", row.job_id,
                            row.history[:80], exc)
        if row.rates:
            try:
                kept = json.loads(row.rates)
                job_type, rates = kept["job_type"], {str(k): float(v) for k, v in kept["rates"].items()}
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("job %d: stored rates %r are unreadable (%s); it starts at the table's", row.job_id,
                            row.rates[:80], exc)
                return
            self.core.measurements.restore_rates(row.job_id, job_type, rates)
