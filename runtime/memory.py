"""What the core learns that a scheduler restart would lose, stored and given back (docs/rules.md#runtime-restart):
an ordering's history of each job (LAS's attained service, the starvation guard's last run), the rates that
measurements moved (per job, for the job type and batch size measured) and the pairs' co-location efficiencies.
A stored value that does not parse costs only itself, with a warning."""

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
        """At a round's end: the decide stage's history of the jobs just credited (none for a stage whose decisions
        read none), the rates measurements moved, and the pairs' measured efficiencies."""
        core = self.core
        if core.decide is not None:
            rows = [(*h, j) for j in credited if (h := core.decide.history(j)) is not None]
            if rows:
                self.store.set_histories(rows)
        if self.rates_moved:
            self.store.set_rates([(json.dumps(dict(zip(("job_type", "rates"), core.measured_rates(j)))), j)
                                  for j in sorted(self.rates_moved) if j in core.jobs])
            self.rates_moved.clear()
        if self.pairs_moved:
            self.store.set_meta("pair_efficiencies", json.dumps(core.pair_efficiencies()))
            self.pairs_moved = False

    def _restore_pairs(self) -> None:
        """A new core: the pairs' efficiencies measured before a restart."""
        kept = self.store.meta("pair_efficiencies")
        try:
            self.core.restore_pair_efficiencies(
                [(str(a), int(s), str(b), str(g), float(e)) for a, s, b, g, e in json.loads(kept or "[]")])
        except (ValueError, TypeError) as exc:
            log.warning("stored pair efficiencies are unreadable (%s); pairs start at the table's", exc)

    def _restore(self, row: JobRow) -> None:
        """A job joining the core after a restart: its history and measured rates (after its batch size is
        resumed, so rates measured at that size apply)."""
        if self.core.decide is not None and (row.attained_s, row.last_run_s) != (0.0, -1.0):
            self.core.decide.restore(row.job_id, row.attained_s, row.last_run_s)
        if row.rates:
            try:
                kept = json.loads(row.rates)
                job_type, rates = kept["job_type"], {str(k): float(v) for k, v in kept["rates"].items()}
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("job %d: stored rates %r are unreadable (%s); it starts at the table's", row.job_id,
                            row.rates[:80], exc)
                return
            self.core.restore_rates(row.job_id, job_type, rates)
