"""The measured applications of Sia's simulator (docs/rules.md#elastic-apps): per GPU type, the step and sync times
of every profiled placement and per-GPU batch size; per batch size and epoch, the gradient statistics.

`Application.step_time` is the simulated truth a policy's fitted model can be wrong about: the measured placement
interpolated over the batch size, else a linear interpolation over (nodes, replicas, batch) of every measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import pandas as pd


# Per application (docs/rules.md#elastic-apps): epochs to finish, checkpoint-restore delay (s), the calibration
# slowdown of simulated goodput, and the restart penalty Sia's decide assumes (s).
MAX_EPOCHS = {"cifar10": 100, "imagenet": 90, "deepspeech2": 80, "yolov3": 50, "ncf": 10, "bert": 2, "gpt_pmp": 2}
RESCALE_S = {"cifar10": 50, "deepspeech2": 25, "bert": 120, "yolov3": 80, "imagenet": 250, "ncf": 15}
SLOWDOWN = {"cifar10": 1.8, "ncf": 1.5, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2}
RESTART_PENALTY_S = {"deepspeech2": 25, "imagenet": 250, "cifar10": 30, "bert": 120, "yolov3": 45}
DEFAULT_RESCALE_S = DEFAULT_PENALTY_S = 30
MAX_LOCAL_BSZ = {("deepspeech2", "rtx"): 57}          # the artifact's memory cap on the RTX 2080Ti
MAX_INTERP_NODES = 16


@dataclass
class TypeProfile:
    """One application's measurements on one GPU type."""

    placements: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]   # placement -> (bsz, step_s, sync_s)
    points: np.ndarray          # (k, 3): nodes, replicas, local batch (placements and scalability, averaged)
    values: np.ndarray          # (k, 2): step_s, sync_s
    min_local_bsz: int
    max_local_bsz: int
    one_gpu_rate: float         # samples/s of the largest one-GPU batch (docs/rules.md#bootstrap)
    _interp: object = None
    _nearest: object = None
    extrapolated: int = 0       # lookups beyond every measured batch at that scale
    cache: dict = field(default_factory=dict)

    def step_time(self, placement: tuple[int, ...], local_bsz: int) -> tuple[float, float]:
        key = (placement, local_bsz)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        name = "".join(map(str, sorted(placement)))
        if name in self.placements:
            bsz, step, sync = self.placements[name]
            hit = float(np.interp(local_bsz, bsz, step)), float(np.interp(local_bsz, bsz, sync))
        else:
            if self._interp is None:
                from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator
                self._interp = LinearNDInterpolator(self.points, self.values)
                self._nearest = NearestNDInterpolator(self.points, self.values)
            nodes, replicas = min(len(placement), MAX_INTERP_NODES), sum(placement)
            step, sync = self._interp([nodes, replicas, local_bsz])[0]
            if np.isnan(step):                  # beyond the batches measured at this scale (docs/rules.md#elastic-apps)
                self.extrapolated += 1
                near = self.points[np.argmin(np.abs(self.points[:, 1] - replicas)), 1]
                sizes = self.points[self.points[:, 1] == near, 2]
                clipped = float(np.clip(local_bsz, sizes.min(), sizes.max()))
                step, sync = self._interp([nodes, replicas, clipped])[0]
                if np.isnan(step):
                    step, sync = self._nearest([nodes, replicas, clipped])[0]
                step = sync + (step - sync) * local_bsz / clipped
            hit = float(step), float(sync)
        self.cache[key] = hit
        return hit


@dataclass
class Application:
    name: str
    types: dict[str, TypeProfile]
    batch_sizes: np.ndarray       # validation batch sizes, ascending
    grad_sqr: np.ndarray          # (epochs, batch sizes)
    grad_var: np.ndarray
    epoch_progress: np.ndarray    # progress (steps at the initial batch) at the end of each epoch

    @property
    def init_batch_size(self) -> int:
        return int(self.batch_sizes[0])

    @property
    def max_batch_size(self) -> int:
        return int(self.batch_sizes[-1])

    @property
    def max_epochs(self) -> int:
        return MAX_EPOCHS.get(self.name, len(self.epoch_progress))

    @property
    def rescale_s(self) -> float:
        return RESCALE_S.get(self.name, DEFAULT_RESCALE_S)

    @property
    def restart_penalty_s(self) -> float:
        return RESTART_PENALTY_S.get(self.name, DEFAULT_PENALTY_S)

    @property
    def calibration(self) -> float:
        return 1.0 / SLOWDOWN.get(self.name, 1.0)

    @cached_property
    def target_progress(self) -> float:
        return float(self.epoch_progress[self.max_epochs - 1])

    def progress_at(self, epoch: int) -> float:
        return 0.0 if epoch <= 0 else float(self.epoch_progress[epoch - 1])

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        row = min(epoch, len(self.epoch_progress) - 1)
        return (float(np.interp(batch_size, self.batch_sizes, self.grad_sqr[row])),
                float(np.interp(batch_size, self.batch_sizes, self.grad_var[row])))


def _type_profile(app: str, gpu_type: str, rows: pd.DataFrame) -> TypeProfile:
    placed = rows[rows["source"] == "placements"]
    placements = {name: (g["local_bsz"].to_numpy(float), g["step_s"].to_numpy(), g["sync_s"].to_numpy())
                  for name, g in placed.sort_values("local_bsz", kind="stable").groupby("placement", sort=False)}
    mean = (rows[rows["num_nodes"] <= MAX_INTERP_NODES]
            .groupby(["num_nodes", "num_replicas", "local_bsz"], sort=True)[["step_s", "sync_s"]].mean().reset_index())
    one = placed[placed["placement"] == "1"]
    biggest = one["local_bsz"].max()
    rate = float(biggest / one.loc[one["local_bsz"] == biggest, "step_s"].max())
    return TypeProfile(placements, mean[["num_nodes", "num_replicas", "local_bsz"]].to_numpy(float),
                       mean[["step_s", "sync_s"]].to_numpy(), int(placed["local_bsz"].min()),
                       MAX_LOCAL_BSZ.get((app, gpu_type), int(placed["local_bsz"].max())), rate)


@lru_cache(maxsize=4)
def load_applications(folder: str | None = None) -> dict[str, Application]:
    """Every application of `data/sia/` (step_times.parquet, gradient_stats.parquet)."""
    from hetsched.model.throughputs import data_dir

    root = Path(folder) if folder else data_dir() / "sia"
    steps = pd.read_parquet(root / "step_times.parquet")
    stats = pd.read_parquet(root / "gradient_stats.parquet")
    apps = {}
    for name, rows in stats.groupby("app", sort=True):
        wide = rows.pivot(index="epoch", columns="batch_size")
        sizes = wide["progress"].columns.to_numpy()
        types = {t: _type_profile(name, t, g) for t, g in steps[steps["app"] == name].groupby("gpu_type")}
        apps[name] = Application(name, types, sizes, wide["grad_sqr"].to_numpy(), wide["grad_var"].to_numpy(),
                                 wide["progress"].min(axis=1).to_numpy())
    return apps
