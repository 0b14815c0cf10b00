"""Train one job type under the scheduler's leases (or standalone). Synthetic data unless --data-dir has data.pt.

    python -m workloads.train --model ResNet-18 --batch-size 64 --num-steps 500

The only scheduler-specific lines are the LeaseIterator around the data and the two checkpoint hooks.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch

from hetsched.runtime import LeaseIterator
from workloads.models import build


def batches(make, batch_size: int, data_dir: str | None, seed: int, dataset_batches: int = 64,
            cache_bytes: float = 0.0):
    """Endless batches: slices of data_dir/data.pt {"inputs", "targets"} when present, else a synthetic dataset
    of `dataset_batches` batches, each made (the CPU work of loading and decoding) unless it is cached. Batches
    are cached in order until `cache_bytes` (the lease's memory share) is used: a larger share re-serves more
    of each epoch from memory, as Synergy's profiles model it."""
    path = Path(data_dir) / "data.pt" if data_dir else None
    if path is not None and path.exists():
        data = torch.load(path)
        n = len(data["inputs"])
        i = 0
        while True:
            idx = torch.arange(i, i + batch_size) % n
            i += batch_size
            yield data["inputs"][idx], data["targets"][idx]
    cache: dict[int, tuple] = {}
    used = 0
    for i in itertools.count():
        k = i % dataset_batches
        batch = cache.get(k)
        if batch is None:
            batch = make(batch_size, torch.Generator().manual_seed(seed * 1_000_003 + k))
            size = sum(t.element_size() * t.nelement() for t in batch)
            if used + size <= cache_bytes:
                cache[k] = batch
                used += size
        yield batch


def share_from_env() -> tuple[int, float]:
    """The lease's CPU cores (threads for this process; 1 without a share) and memory budget in bytes."""
    cores = int(os.environ.get("HETSCHED_CPU_CORES", "1"))
    return max(1, cores), float(os.environ.get("HETSCHED_MEM_GB", "0")) * 1024**3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--global-batch", type=int, default=0,
                        help="an elastic job's total batch: each rank of its lease takes an equal share of it")
    parser.add_argument("--num-steps", type=int, default=int(os.environ.get("HETSCHED_TOTAL_STEPS", 100)))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--max-batch", type=int, default=8, help="cap on the batch size (CPU-sized runs)")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("HETSCHED_CHECKPOINT_DIR"),
                        help="where to keep model.pt (default: the worker's per-job dir; none standalone)")
    parser.add_argument("--fail", action="store_true", help="crash on purpose (tests)")
    args = parser.parse_args(argv)
    if args.fail:
        print("failing on purpose", file=sys.stderr)
        return 3
    torch.manual_seed(0)
    threads, cache_bytes = share_from_env()
    torch.set_num_threads(threads)
    model, make, loss_fn = build(args.model, args.width)
    optim = torch.optim.SGD(model.parameters(), lr=0.01)
    ckpt = Path(args.checkpoint_dir) / "model.pt" if args.checkpoint_dir else None

    def save(steps: int) -> None:
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "optim": optim.state_dict(), "steps": steps}, tmp)
        os.replace(tmp, ckpt)                    # atomic: a kill never leaves a torn checkpoint
        print(f"checkpoint at step {steps}", flush=True)

    def restore() -> int:
        if ckpt is None or not ckpt.exists():
            return 0
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        print(f"restored weights from step {state['steps']}", flush=True)
        return int(state["steps"])

    rank = int(os.environ.get("HETSCHED_RANK", "0"))
    world = int(os.environ.get("HETSCHED_WORLD_SIZE", "1"))
    if args.global_batch:      # an elastic job: the lease's world size (it changes between leases) splits the batch
        args.batch_size = -(-args.global_batch // world)

    def rebatch(batch_size: int):
        """Batches at `batch_size`, scaled as the first one is to the CPU (--max-batch caps the first)."""
        cpu = max(1, round(min(args.batch_size, args.max_batch) * batch_size / args.batch_size))
        return batches(make, cpu, args.data_dir, seed=rank, cache_bytes=cache_bytes)
    it = LeaseIterator(rebatch(args.batch_size), total_steps=args.num_steps, save=save if ckpt else None,
                       restore=restore, checkpoint_every=20, batch_size=args.batch_size, rebatch=rebatch)
    print(f"resuming from step {it.steps}; {threads} threads on {len(os.sched_getaffinity(0))} cores, "
          f"data cache {cache_bytes / 1024**3:g} GB; batch {args.batch_size} on each of {world} ranks", flush=True)
    net = model
    if it.world_size > 1:
        net = distributed(model, it)
        print(f"rank {it.rank} of {it.world_size}: DDP over gloo", flush=True)
    for inputs, targets in it:
        optim.zero_grad()
        loss = loss_fn(net(inputs), targets)
        loss.backward()
        optim.step()
    print(f"steps {it.steps} of {it.total_steps}; {'done' if it.done else 'lease ended'}", flush=True)
    if it.world_size > 1:
        torch.distributed.destroy_process_group()
    return 0


def distributed(model, it: LeaseIterator, timeout_s: float = 60.0):
    """Join the job's process group (gloo: CPUs, or GPUs without NCCL) through the scheduler's rendezvous: rank
    0 serves a TCPStore on a free port and posts its address. Returns the DDP-wrapped model; every rank stops at
    the same step (the iterator's `sync` is an all-reduce of the stop flag)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    wait = timedelta(seconds=timeout_s)
    if it.rank == 0:
        host = os.environ.get("HETSCHED_HOST", "127.0.0.1")
        store = dist.TCPStore(host, 0, it.world_size, is_master=True, timeout=wait, wait_for_workers=False)
        it.rendezvous(f"{host}:{store.port}", timeout_s)
    else:
        host, port = it.rendezvous("", timeout_s).rsplit(":", 1)
        store = dist.TCPStore(host, int(port), it.world_size, is_master=False, timeout=wait)
    dist.init_process_group("gloo", store=store, rank=it.rank, world_size=it.world_size, timeout=wait)
    start = torch.tensor([it.steps])
    dist.broadcast(start, 0)           # every rank resumes at rank 0's step (DDP broadcasts rank 0's weights)
    it.resume_at(int(start.item()))

    def sync(stop: bool) -> bool:
        flag = torch.tensor([1 if stop else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())
    it.sync = sync
    return DistributedDataParallel(model)


if __name__ == "__main__":
    sys.exit(main())
