"""Your-own-cluster notebooks (run through notebooks/_build.py): logic in hetsched.experiments.own_cluster."""

from __future__ import annotations

from _build import SETUP, notebook

OWN = SETUP + "\nfrom hetsched.experiments import own_cluster as O\nfrom hetsched.ui.plots import grouped_bars"


def build_own() -> None:
    notebook("own_cluster_profile", "# This machine as a GPU type\n\n`hetsched profile` trains the project's "
             "PyTorch workloads on this machine's CPU (warm-up, then timed steps) and writes a throughput table "
             "in the project's schema; merged with the Gavel table it becomes a fourth GPU type, `cpu`, beside "
             "v100/p100/k80. The same stream then runs on a cluster with and without it. On a CUDA machine, "
             "`hetsched profile --device cuda --gpu-type a100` measures a real GPU the same way.",
             'gpu_type = "cpu"\njobs_per_hour = None      # None: the preset\'s\nnum_jobs = None',
             [("code", OWN),
              ("code", """profiled, merged = O.profile_this_machine(out, preset, gpu_type)
table = O.restricted(merged, gpu_type)          # job types measured on every type, so a stream can run anywhere
ratio = O.ratios(profiled, merged, gpu_type)
ratio.round(3)"""),
              ("md", "Steps/s per job type on each type, and this machine relative to each GPU. The workloads "
                     "are toy-sized models on synthetic data, while the Gavel columns were measured with the full "
                     "models, so the absolute ratios say how this CPU runs *our* workloads, not how it would run "
                     "the papers' models. This CPU column is merged as measured (`mixed_workloads=True`), to show "
                     "how a new type joins the cluster model. For columns in the table's units, profile your GPUs "
                     "with the same tool, one of them a type the table has, and merge relative to it "
                     "(`hetsched convert throughputs ... --relative-to v100`, docs/rules.md#relative-speed)."),
              ("code", """num = num_jobs or {"tiny": 12, "quick": 60, "paper": 300}[preset]
rate = jobs_per_hour or {"tiny": 6.0, "quick": 4.0, "paper": 4.0}[preset]
clusters = {"4:4:4": "v100=4,p100=4,k80=4", f"4:4:4 + 4 {gpu_type}": f"v100=4,p100=4,k80=4,{gpu_type}=4"}
results = O.with_new_type(table, clusters, ["max_min_fairness", "max_min_fairness_perf", "max_sum_throughput_perf"],
                          num, rate)
results["label"] = results["policy"]
results.to_csv(out / "results.csv", index=False)
chart = grouped_bars(results, "cluster", "avg_jct_h", "policy", f"Average JCT with and without {gpu_type}",
                     "average JCT (h)")
publish(chart, out, preset, results, jobs=num, jobs_per_hour=rate, throughputs=f"gavel_simulation + {gpu_type}")
results[["cluster", "policy", "avg_jct_h", "makespan_h", "utilization"]].round(3)"""),
              ("md", "**What this shows.** A profiled column joins the cluster model like any measured GPU type, "
                     "and each policy uses it by its own objective. This machine runs the toy workloads many times "
                     "faster than the Gavel table's GPUs run the full models (table above), so the new type "
                     "dominates. The heterogeneity-aware objectives (Gavel's max-min fairness, MST's total "
                     "throughput) both weigh a job's rate against its equal-share rate and spread its time over "
                     "the types, while under the agnostic policy the jobs that land on the fast type simply "
                     "finish: with one type an order of magnitude faster, compare the average JCTs in the table. "
                     "Profile GPUs with the same tool, and merge relative to a type the table has, for columns "
                     "that are comparable.")],
             repoint=False)

    notebook("openb_replay", "# A production trace on its production cluster: Alibaba openb\n\nThe openb pod "
             "list (8,152 tasks; about a third pinned to GPU models) replayed on the openb node list (1,213 GPU "
             "servers, seven GPU models, their CPUs and memory) under Gavel's heterogeneity-agnostic and -aware "
             "policies, and Gavel's with Synergy's CPU/memory-aware TUNE placement on the servers' real CPUs "
             "and memory (`max_min_fairness_perf+tune`). Job types are "
             "drawn from the Gavel table by the importer's seeded rule; GPU models the table lacks are mapped "
             "explicitly (`gpu_map`, stated in the figure).",
             """openb_dir = None           # folder with openb_node_list_gpu_node.csv and openb_pod_list_*.csv (None: ../shared)
pods = "openb_pod_list_gpuspec33.csv"
gpu_map = None              # None: hetsched.experiments.own_cluster.OPENB_GPU_MAP
node_fraction = None        # sample of the servers (contention); None: the preset's
policies = ["max_min_fairness", "max_min_fairness_perf", "finish_time_fairness_perf", "max_min_fairness_perf+tune"]""",
             [("code", OWN + "\nfrom hetsched import ClusterSpec\nfrom hetsched.ui.plots import cdf"),
              ("code", """folder = Path(openb_dir) if openb_dir else O.shared_data_dir() / "alibaba_openb"
gpu_map = gpu_map or O.OPENB_GPU_MAP
fraction = node_fraction or {"tiny": 0.01, "quick": 0.05, "paper": 1.0}[preset]
cluster = O.sample_servers(ClusterSpec.load(str(folder / "openb_node_list_gpu_node.csv")), fraction)
# tiny (tests): 300 tasks of at most 3 days (the weeks-long tail sets the number of rounds)
filters = O.Filters(max_jobs=300, max_duration_s=72 * 3600) if preset == "tiny" else None
summary_rows, jobs, facts = O.replay(folder / pods, "openb", cluster, policies, gpu_map, filters=filters)
results = summary_rows.assign(cluster=str(cluster), node_fraction=fraction)
results.to_csv(out / "results.csv", index=False)
jobs.to_csv(out / "jobs.csv", index=False)
print(facts["conversion"])
print(f"{facts['runnable']} of {facts['jobs']} jobs can run on the sampled cluster; {facts['pinned']} are pinned")
chart = cdf(jobs.assign(jct_h=jobs["jct_s"] / 3600), "jct_h", "policy", "openb tasks: JCT", "JCT (h)")
publish(chart, out, preset, results, cluster=str(cluster), gpu_map=gpu_map)
results[["policy", "num_jobs", "avg_jct_h", "jct_p99_h", "makespan_h", "utilization"]].round(3)"""),
              ("md", "**What this shows.** Production tasks are long-tailed: most run minutes, a few run for "
                     "weeks, and those dominate the makespan. Pinned tasks can only use their "
                     "GPU models, so contention concentrates on the scarce models. The quick preset samples 5 % of "
                     "the servers so that the policies have something to decide; the paper preset replays the "
                     "whole cluster."),
              ("code", """from hetsched.model.profiles import profiles_ratio_for
requests = O.pod_requests(folder / pods, cluster)
requests.to_csv(out / "pod_requests.csv", index=False)
ratios = {t: profiles_ratio_for(ClusterSpec.from_servers([s for s in cluster.servers if s.gpu_type == t]))
          for t in cluster.gpu_types}
print(f"TUNE's profiles on each GPU model's servers: CPU:GPU ratio {ratios} (docs/rules.md#profiles)")
requests.round(2)"""),
              ("md", "**What the pods ask for.** Synergy's TUNE pays off when jobs want more CPU or memory per GPU "
                     "than their servers' GPU-proportional share: its profiles assume 3-6 cores per GPU. The whole "
                     "openb node list gives a GPU 17.2 cores and 79 GB; its 7,064 GPU pods ask for a median of 9.8 "
                     "cores and 31 GB per GPU, and 4.8 % of them for more cores than that share, 1.8 % for more "
                     "memory (the table above is for the sampled servers). TUNE has little to hand out here. Its "
                     "profiles are those of the share that every GPU of a model holds, the smallest of its "
                     "servers' cores per GPU, derived from Synergy's grids where the artifact stored none "
                     "(docs/rules.md#profiles, #unlike-servers); on the quick preset's servers "
                     "`max_min_fairness_perf+tune` shortens the average JCT by 3.4 % against its parent, where "
                     "the 3-core profiles it used before 2026-11-28 credited it 10.2 %, most of it for cores "
                     "these servers already give every GPU.")], repoint=False)
