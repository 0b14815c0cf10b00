"""Static-trace experiments: makespan vs number of jobs, and the cluster-composition sweep."""

from __future__ import annotations

from hetsched.experiments.sweep import RunConfig

# (cluster, paper-equivalent job counts, seeds, scale) per preset; actual jobs = paper count x scale.
MAKESPAN = {
    "paper": ("36:36:36", (100, 200, 300, 400, 500, 600, 700), (0, 1, 2), 1.0),
    "quick": ("12:12:12", (100, 300, 500, 700), (0,), 1 / 3),
    "tiny": ("8:8:8", (50, 100), (0,), 2 / 9),        # 8-GPU jobs need 8 GPUs of a type
}


def makespan_configs(preset: str, policies: list[str], seeds=None) -> list[RunConfig]:
    cluster, counts, default_seeds, scale = MAKESPAN[preset]
    return [RunConfig(policy=p, cluster=cluster, seed=s, num_jobs=max(2, round(n * scale)), multi_gpu=True,
                      labels=(("paper_num_jobs", n), ("preset", preset)))
            for p in policies for n in counts for s in (seeds or default_seeds)]


# 100 GPUs split between V100 and K80 (no P100), static multi-GPU traces.
COMPOSITION = {
    "paper": ((0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), (0, 1, 2), 100),
    "quick": ((0.1, 0.3, 0.5, 0.7, 0.9, 1.0), (0,), 60),
    "tiny": ((0.2, 1.0), (0,), 10),
}


def composition_configs(preset: str, policies: list[str], seeds=None) -> list[RunConfig]:
    fractions, default_seeds, num_jobs = COMPOSITION[preset]
    out = []
    for fraction in fractions:
        v100 = round(100 * fraction)
        for p in policies:
            for s in seeds or default_seeds:
                out.append(RunConfig(policy=p, cluster=f"{v100}:0:{100 - v100}", seed=s, num_jobs=num_jobs,
                                     multi_gpu=True, labels=(("v100_fraction", fraction), ("preset", preset))))
    return out
