"""What the Shockwave planner knows about a job (docs/rules.md#predictor, docs/rules.md#calibration): its oracle
epoch profile, the Dirichlet predictor of its remaining time, and its momentum-averaged fair-share finish time."""

from __future__ import annotations

import math

import numpy as np

from hetsched.rates.adaptation.profile import EpochProfile
from hetsched.rates.adaptation.schedules import iterations_per_epoch

PROFILE_SAMPLES_TOLERANCE = 0.4     # re-calibrate the profile when measured and predicted samples differ by more


PSEUDO_EPOCHS = 100


def pseudo_profile(job, steps_per_s: float) -> tuple[EpochProfile, float]:
    """A static job whose model has no dataset size (A3C, CycleGAN, ...): its steps cut into equal pseudo-epochs."""
    epochs = max(1, min(PSEUDO_EPOCHS, int(math.ceil(job.total_steps))))
    per_epoch = float(job.total_steps) / epochs
    rate = steps_per_s if steps_per_s > 0 else 1.0
    return EpochProfile(job.job_type, job.scale_factor, np.zeros(epochs, np.int64),
                        np.full(epochs, per_epoch / rate)), per_epoch


class PlannerJob:
    """One job's profile as prefix sums, so every query is O(distinct batch sizes)."""

    __slots__ = ("job_id", "submit_s", "gpus", "epochs", "durations", "prefix", "batch_sizes", "modes",
                 "mode_counts", "mode_mean", "share_rounds", "share_values", "num_shares", "remaining_memo", "model",
                 "samples", "last_round", "amp", "fixed_epoch_steps")

    def __init__(self, job_id: int, submit_s: float, profile: EpochProfile, fixed_epoch_steps: float = 0.0):
        self.job_id = job_id
        self.fixed_epoch_steps = fixed_epoch_steps     # > 0: a job without a dataset model (pseudo-epochs)
        self.submit_s = float(submit_s)
        self.gpus = int(profile.scale_factor)
        self.model = profile.model
        self.epochs = profile.epochs
        # The planner's epoch durations are whole seconds, at least 1 (JobMetaData).
        self.durations = np.maximum(1.0, np.round(profile.durations))
        self.prefix = np.concatenate([[0.0], np.cumsum(self.durations)])
        self.batch_sizes = profile.batch_sizes
        self.modes, code = np.unique(profile.batch_sizes, return_inverse=True)
        onehot = np.zeros((len(self.modes), self.epochs + 1))
        onehot[code, np.arange(1, self.epochs + 1)] = 1.0
        self.mode_counts = np.cumsum(onehot, axis=1)          # [b, e]: epochs < e with batch size b
        self.mode_mean = np.array([self.durations[code == b].mean() for b in range(len(self.modes))])
        # (round, fair-share finish-time estimate) pairs in growable arrays: a job that lives through thousands
        # of arrivals collects thousands of estimates, and FT-bar is re-read at every re-solve.
        self.share_rounds = np.zeros(8, np.int64)              # one spare slot for the current round
        self.share_values = np.zeros(8)
        self.num_shares = 0
        self.remaining_memo = (-1, 0.0, 0.0)                   # (p, amp, remaining_s): p moves once an epoch
        self.samples = 0.0               # measured samples, as if running since global round 0
        #                                  (docs/rules.md#calibration)
        self.last_round = 0
        self.amp = 1.0

    # ---- progress ----------------------------------------------------------------------------------
    def epoch_progress(self, steps_done: float, batch_size: int) -> int:
        """Completed epochs, counted at the current batch size (docs/rules.md#planner)."""
        per_epoch = self.fixed_epoch_steps or iterations_per_epoch(self.model, batch_size)
        return min(self.epochs, int(steps_done // per_epoch))

    def mean_epoch_s(self, p: int) -> float:
        """d-bar: mean profiled epoch time over epochs 0..p (converts planned seconds into epochs)."""
        q = min(p, self.epochs - 1) + 1
        return self.amp * self.prefix[q] / q

    def elapsed_s(self, p: int) -> float:
        return self.amp * self.prefix[min(p, self.epochs)]

    def remaining_s(self, p: int) -> float:
        """The Dirichlet-posterior remaining time (docs/rules.md#predictor): which batch sizes are known, not when
        they come."""
        E = self.epochs
        if E - p <= 0:
            return 1.0
        memo = self.remaining_memo
        if memo[0] == p and memo[1] == self.amp:
            return memo[2]
        seen = self.mode_counts[:, min(p + 1, E)]              # epochs 0..p, as the artifact counts them
        alpha = E / len(self.modes) + seen
        expected = E * alpha / alpha.sum()
        expected = expected - np.minimum(seen, np.floor(expected))
        inflated = max(int(expected.sum() + 1), E - p)
        value = float((expected * self.amp * self.mode_mean).sum() * (E - p) / inflated)
        self.remaining_memo = (p, self.amp, value)
        return value

    # ---- fair share --------------------------------------------------------------------------------
    def add_share_estimate(self, round_ptr: int, p: int, share: float, origin: float = 0.0) -> None:
        """Its fair-share finish time on the planner's clock (times since `origin`)."""
        self.record_share(round_ptr, (self.submit_s - origin) + (self.elapsed_s(p) + self.remaining_s(p)) / share)

    def record_share(self, round_ptr: int, estimate: float) -> None:
        k = self.num_shares
        if k + 1 >= len(self.share_rounds):
            self.share_rounds = np.concatenate([self.share_rounds, np.zeros(k + 1, np.int64)])
            self.share_values = np.concatenate([self.share_values, np.zeros(k + 1)])
        self.share_rounds[k] = round_ptr
        self.share_values[k] = estimate
        self.num_shares = k + 1

    def fair_finish_s(self, round_ptr: int, momentum: float) -> float:
        """FT-bar: estimates weighted by how many rounds each was in force, plus extra weight on the last."""
        k = self.num_shares
        self.share_rounds[k] = round_ptr                       # the spare slot: the current round closes the last
        weights = np.diff(self.share_rounds[:k + 1]).astype(float)
        values = self.share_values[:k]
        last = values[-1]
        if weights.sum() <= 0:
            return float(last)
        return float(momentum * (weights @ values) / weights.sum() + (1 - momentum) * last)

    # ---- a runtime restart -------------------------------------------------------------------------
    def history(self) -> dict:
        """What a restarted planner needs to go on as before (docs/rules.md#runtime-restart). FT-bar weighs each
        estimate by the rounds it was in force, so all but the last fold into one entry at the first estimate's
        round worth their weighted mean over the rounds up to the last estimate (equal up to rounding)."""
        k = self.num_shares
        rounds, values = self.share_rounds[:k], self.share_values[:k]
        shares = []
        if k:
            span = int(rounds[-1] - rounds[0])
            if span > 0:                                 # (all in one round: only the last one weighs)
                closed = float(np.diff(rounds).astype(float) @ values[:-1])
                shares.append([int(rounds[0]), closed / span])
            shares.append([int(rounds[-1]), float(values[-1])])
        return {"shares": shares, "samples": self.samples, "last_round": self.last_round, "amp": self.amp}

    def history_mark(self) -> tuple:
        """Changes whenever `history` does: an estimate added, a measurement, a new calibration factor."""
        return self.num_shares, self.last_round, self.amp

    def restore(self, history: dict) -> None:
        shares = [(int(r), float(v)) for r, v in history["shares"]]
        samples, last_round, amp = float(history["samples"]), int(history["last_round"]), float(history["amp"])
        self.share_rounds = np.zeros(max(8, len(shares) + 1), np.int64)
        self.share_values = np.zeros(len(self.share_rounds))
        for i, (r, v) in enumerate(shares):
            self.share_rounds[i], self.share_values[i] = r, v
        self.num_shares = len(shares)
        self.samples, self.last_round, self.amp = samples, last_round, amp
        self.remaining_memo = (-1, 0.0, 0.0)

    # ---- calibration -------------------------------------------------------------------------------
    def measured(self, round_index: int, rate: float, batch_size: int, round_s: float) -> None:
        """A micro-task in round `round_index` ran at `rate` steps/s: it stands for every round since the last."""
        self.samples += rate * batch_size * round_s * (round_index - self.last_round)
        self.last_round = round_index

    def calibrate(self, round_s: float, dataset_size: int) -> None:
        """Rescale the epoch times when the measured samples differ from the profile's prediction for the same
        window by more than 40 % (docs/rules.md#calibration). Like the artifact, the window runs from global round 0,
        not from the job's arrival. Past the profile's last epoch the prediction continues at that epoch's rate:
        docs/rules.md#calibration states that in simulation the calibration fires only when the runtime batch size
        diverges from the profile's, and a prediction that stopped at the profile's end would fire for every job
        that arrives later than its own isolated duration (2,085 of 5,338 calibrations on the canonical trace fired
        that way; now only the 7 adaptive jobs whose batch sizes diverge fire)."""
        window = round_s * self.last_round
        if self.samples <= 0 or window <= 0:
            return
        e = int(np.searchsorted(self.prefix, window, side="right")) - 1      # whole profiled epochs in the window
        partial = (window - self.prefix[e]) / self.durations[min(e, self.epochs - 1)]
        ratio = dataset_size * (e + partial) / self.samples
        self.amp = ratio if abs(ratio - 1.0) > PROFILE_SAMPLES_TOLERANCE else 1.0
