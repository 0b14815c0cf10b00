"""`PlacementStage` with first-fit placement, compiled (the loops are in `placement_kernel.py`, and in C in
`_placement.c`, which runs where the project was built with it: the same doubles, without loading numba's compiled
code, about 0.4 CPU-s once per process): the arrays that hold its state,
sized so that a run cannot overflow them, and the placement read back for the runtime's leases. Arguments the C
loop does not take are its TypeError or IndexError, never handed to numba's loop, which checks no index."""

from __future__ import annotations

import numpy as np

from hetsched.errors import SimulationError
from hetsched.place import placement_kernel
from hetsched.place.placement_kernel import BAD, DEMOTED, FREE, MECHANISMS, PLACED, PREV
from hetsched.place.pool import FAIR, ServerPool

try:
    from hetsched.place._placement import place_round as _c_place_round
except ImportError:                     # built without a C compiler: numba's loop
    _c_place_round = None

place_round = _c_place_round if _c_place_round is not None else placement_kernel.place_round


def _grown(a: np.ndarray, rows: int, cols: int | None = None) -> np.ndarray:
    """`a` with at least `rows` rows (and `cols` columns), its values kept."""
    if len(a) >= rows and (cols is None or a.shape[1] >= cols):
        return a
    shape = (max(rows, len(a)),) + (() if cols is None else (max(cols, a.shape[1]),))
    out = np.zeros(shape, a.dtype)
    out[tuple(slice(0, d) for d in a.shape)] = a
    return out


class CompiledPlacement:
    """`PlacementStage` with first-fit placement (fair, greedy, tune), compiled, with the same results."""

    def __init__(self, pool: ServerPool, mechanism: str):
        self.mechanism = MECHANISMS[mechanism]
        num, self.width = pool.num, max(pool.cap_g)
        self.cap_g = np.array(pool.cap_g, np.int64)
        self.start = np.array(pool._start, float).T.copy()
        self.fair = np.array(pool.fair, float)
        self.ints = np.zeros(8, np.int64)
        self.fg, self.fr = self.cap_g.copy(), self.start.copy()
        self.on, self.on_len = np.zeros((num, self.width), np.int64), np.zeros(num, np.int64)
        self.gpus = int(self.cap_g.sum())
        self.placed = np.zeros(self.gpus, np.int64)
        # A demotion sorts at most g servers' lists and demotes at most `width` peers on each; a run places at
        # most one GPU's worth per GPU: so at most gpus x (1 + width) demotions and gpus saved lists.
        self.demoted = np.zeros(self.gpus * (1 + self.width), np.int64)
        self.saved = np.zeros((self.gpus, self.width), np.int64)
        self.span = 0                                # the widest job seen (servers a job or peer can span)
        # (`_room` sizes these on the first run)
        self.t_i, self.t_f = np.zeros((0, 5), np.int64), np.zeros((0, 6))
        self.prev = np.zeros(64, np.int64)
        self.wk, self.wn = np.zeros((0, 0), np.int64), np.zeros((0, 0), np.int64)
        self.wlen, self.sh, self.st = np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0, np.int64)

    def reset(self) -> None:
        """The next round places from scratch."""
        self.ints[PREV] = 0

    def _room(self, slots: int, span: int, examined: int) -> None:
        """Arrays for `slots` slots, jobs of up to `span` GPUs, and `examined` positions."""
        if span > self.span:
            self.span = span
            # Per GPU placed: its own rows (<= 1 per GPU) and a self-demotion, the lists it sorts (<= 1 per GPU)
            # and their peers' rows (<= width peers a list, each spanning <= span servers).
            rows = self.gpus * (3 + self.width * span)
            self.t_i, self.t_f = _grown(self.t_i, rows, 5), _grown(self.t_f, rows, 6)
        self.wk, self.wn = _grown(self.wk, slots, self.span), _grown(self.wn, slots, self.span)
        self.wlen, self.sh, self.st = _grown(self.wlen, slots), _grown(self.sh, slots, 3), _grown(self.st, slots)
        if examined > len(self.prev):
            self.prev = _grown(self.prev, max(examined, 2 * len(self.prev)))

    def run(self, order: np.ndarray, gpus: np.ndarray, codes: np.ndarray, ids: np.ndarray, shares: np.ndarray,
            adjust: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Place the jobs of `order` (slots); returns the placed slots in placement order, whether each runs at
        the fair share, and the demoted slots. `gpus`/`codes`/`ids` by slot; `shares`/`adjust` by class."""
        ints = self.ints
        if len(ids) > len(self.wlen) or len(order) > len(self.prev):
            self._room(len(ids), 1, len(order))
        while True:
            got = place_round(order, gpus, codes, ids, shares, adjust, self.fair, self.mechanism, ints, self.fg,
                              self.fr, self.cap_g, self.start, self.on, self.on_len, self.wk, self.wn, self.wlen,
                              self.sh, self.st, self.placed, self.demoted, self.prev, self.t_i, self.t_f, self.saved)
            if got != -3:
                break
            self._room(len(ids), int(ints[BAD]), len(order))        # a wider job than before: room, then again
        if got == -1:
            self.reset()
            raise SimulationError(f"Synergy-TUNE could not place a {int(ints[BAD])}-GPU job even after demoting "
                                  f"peers (the artifact exits here)")
        if got == -2:
            self.reset()
            raise SimulationError(f"Synergy-TUNE: demoting a peer to its fair share overflows server "
                                  f"{int(ints[BAD])} (docs/rules.md#tune-demotion)")
        run = self.placed[:ints[PLACED]].copy()
        return run, self.st[run] == FAIR, self.demoted[:ints[DEMOTED]].copy()

    def spread(self, run: np.ndarray) -> np.ndarray:
        """Whether each placed job spans several servers."""
        return self.wlen[run] > 1

    def export(self, pool: ServerPool) -> ServerPool:
        """`pool` holding this round's placement (servers' free resources, jobs' servers and shares), for leases."""
        pool.reset()
        pool.fg, pool.free = self.fg.tolist(), int(self.ints[FREE])
        pool.fc, pool.fm, pool.fs = (self.fr[:, i].tolist() for i in range(3))
        pool.on = [self.on[k, :n].tolist() for k, n in enumerate(self.on_len.tolist())]
        for s in self.placed[:self.ints[PLACED]].tolist():
            n = int(self.wlen[s])
            pool.where[s] = tuple(zip(self.wk[s, :n].tolist(), self.wn[s, :n].tolist()))
            pool.share[s] = tuple(self.sh[s].tolist())
        return pool
