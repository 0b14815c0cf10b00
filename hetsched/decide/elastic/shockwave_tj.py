"""Shockwave with TunedJobs (Sia's Table 4; docs/rules.md#shockwave-tj): the trace's rigid jobs, each at its tuned
GPU count and batch size on one GPU type, run by the core's Shockwave planner under Shockwave's own round rules.

The planner predicts a job's remaining time from an epoch profile; Sia's applications have no Gavel job-type
profile, so each job is a core job of `STEPS` steps at the constant rate that finishes it, alone and uninterrupted,
when the measured traces do (its batch fixed, its statistical efficiency epoch by epoch, R77), and the planner
cuts those steps into equal pseudo-epochs, as for any job without a dataset model.
"""

from __future__ import annotations

import pandas as pd

from hetsched.decide.elastic.cluster import ElasticCluster, place
from hetsched.decide.elastic.jobs import RIGID, ElasticJob
from hetsched.errors import HetschedError

STEPS = 1000.0               # a core job's steps: shares of its application's work
NAME = "shockwave+tj"


def alone_s(job: ElasticJob, gpu_type: str, cluster: ElasticCluster) -> float:
    """Seconds the rigid job runs alone on its GPU count of `gpu_type`, placed as R81 places it, from a start
    with no restore (the round rules charge their own preemption penalty)."""
    twin = ElasticJob(job.name, job.app, 0.0, job.target_replicas, job.target_batch, RIGID)
    twin.reallocate(place(cluster, {}, {twin.name: (gpu_type, twin.target_replicas)})[twin.name])
    twin.rescale_left = 0.0
    twin.step(float("inf"), 0.0)
    return float(twin.completion_s)


def core_stream(jobs: list[ElasticJob], cluster: ElasticCluster):
    """(core jobs, throughput table): one job type per (application, batch, GPU count), its steps per second on the
    cluster's one GPU type the rate that finishes `STEPS` in the job's time alone."""
    from hetsched.io.throughput_json import COLUMNS, normalise_frame
    from hetsched.model.jobs import Job
    from hetsched.model.throughputs import ThroughputTable

    if len(cluster.types) != 1:
        raise HetschedError(f"{NAME} runs on one GPU type (Sia's Table 4: 16x4@t4); {cluster} has "
                            f"{', '.join(cluster.types)}")
    gpu_type = next(iter(cluster.types))
    rates, stream = {}, []
    for i, job in enumerate(sorted(jobs, key=lambda j: j.submit_s)):
        if job.target_replicas > cluster.gpus(gpu_type):
            raise HetschedError(f"{NAME}: job {job.name} needs {job.target_replicas} GPUs; the cluster has "
                                f"{cluster.gpus(gpu_type)}")
        job_type = f"{job.app.name}/{job.target_batch}"
        key = (job_type, job.target_replicas)
        if key not in rates:
            rates[key] = STEPS / alone_s(job, gpu_type, cluster)
        stream.append(Job(i, job.submit_s, job_type, job.target_replicas, STEPS))
    rows = [(gpu_type, "consolidated", t, k, None, rate, None) for (t, k), rate in rates.items()]
    table = ThroughputTable.from_frame(normalise_frame(pd.DataFrame(rows, columns=list(COLUMNS))), "tuned jobs")
    return stream, table
