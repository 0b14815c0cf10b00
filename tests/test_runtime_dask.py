"""hetsched workers started from a notebook cell on the hosts of a running Dask cluster (`dask scheduler` + two
`dask worker` processes on loopback), jobs run on them, and they stop when the launcher does."""

from __future__ import annotations

import json
import os
import time

import pytest
from machine import scaled
from runtime_helpers import CLIENT, RESNET, WORKER, scheduler, stub, submit

from hetsched.errors import HetschedError
from hetsched.runtime import dask_workers
from hetsched.runtime.dask_workers import DaskWorkers
from hetsched.runtime.stubs import pb2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


START_CELL = """import json
from hetsched.runtime.dask_workers import DaskWorkers
types = iter(["v100", "k80"])
workers = DaskWorkers({dask!r}, {scheduler!r}, {token!r}, gpus=lambda address, info: (next(types), 1),
                      work_dir={work!r}, per_host=False, emulate=True)
print(json.dumps({{"types": sorted(p.gpu_type for p in workers.placements), "pids": list(workers.pids.values())}}))"""


def test_workers_start_from_a_notebook_cell_on_each_dask_worker_run_jobs_and_stop(tmp_path, dask_cli):
    """As a researcher does it: one notebook cell starts the workers on the Dask cluster, jobs run, another cell
    stops them (a real Jupyter kernel, executed by nbclient)."""
    import nbformat
    from nbclient import NotebookClient

    with scheduler(tmp_path / "state") as (_, address):
        client = stub(address, CLIENT)
        start = START_CELL.format(dask=dask_cli, scheduler=address, token=WORKER, work=str(tmp_path / "work"))
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(start),
                                             nbformat.v4.new_code_cell("print(workers.stop())")])
        kernel = NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}})
        with kernel.setup_kernel():
            kernel.execute_cell(nb.cells[0], 0)
            started = json.loads(nb.cells[0].outputs[-1]["text"])
            assert started["types"] == ["k80", "v100"]
            deadline = time.monotonic() + scaled(60)
            while client.GetStatus(pb2.StatusRequest(), timeout=10).workers < 2:
                assert time.monotonic() < deadline, (tmp_path / "work" / "dask-0" / "worker.log").read_text()
                time.sleep(0.2)
            for i in range(2):
                submit(client, job_id=i, job_type=RESNET, total_steps=200, command="emulated")
            while set(client.GetStatus(pb2.StatusRequest(), timeout=10).counts) != {"completed"}:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            token = (tmp_path / "work" / "dask-0" / "worker.token")
            assert token.read_text() == WORKER and token.stat().st_mode & 0o077 == 0
            kernel.execute_cell(nb.cells[1], 1)
        assert not any(_alive(pid) for pid in started["pids"])


def test_a_host_without_the_project_and_a_worker_without_gpus_are_one_line_errors(tmp_path, dask_cli,
                                                                                   monkeypatch):
    with pytest.raises(HetschedError, match="no GPU type and count"):
        DaskWorkers(dask_cli, "127.0.0.1:1", WORKER, gpus={}, work_dir=str(tmp_path))
    monkeypatch.setattr(dask_workers, "_probe",
                        lambda: {"hetsched": False, "python": "/opt/py/bin/python", "hostname": "gpu-7"})
    with pytest.raises(HetschedError, match="not installed.*gpu-7"):
        DaskWorkers(dask_cli, "127.0.0.1:1", WORKER, gpus={"*": ("v100", 4)}, work_dir=str(tmp_path))
