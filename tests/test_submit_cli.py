"""`hetsched submit` when the scheduler is busy, restarting, or its answer is lost: no job is stored twice, and a
trace that stops midway says which rows are stored and how to resume (`--skip`)."""

from __future__ import annotations

import re
import threading
import time

import grpc
import pytest
from runtime_helpers import CLIENT, WORKER, scheduler, stub

from hetsched.cli.main import main
from hetsched.model.jobs import Job
from hetsched.runtime import client
from hetsched.runtime.auth import Credentials
from hetsched.runtime.launch import submit_request
from hetsched.runtime.server import SchedulerServer
from hetsched.runtime.stubs import pb2
from hetsched.traces.formats import write_trace

RESNET = "ResNet-18 (batch size 32)"
CODES = grpc.StatusCode


class Refused(grpc.RpcError):
    def __init__(self, code):
        self._code = code

    def code(self):
        return self._code

    def details(self):
        return f"{self._code.name.lower()} (fake)"


class FakeScheduler:
    """SubmitJob that raises the given codes in turn, then stores; `stored` are the requests it stored."""

    def __init__(self, codes=(), fail_at=None):
        self.codes, self.fail_at, self.calls, self.stored = list(codes), fail_at, [], []

    def SubmitJob(self, request, timeout, wait_for_ready=False):
        self.calls.append((request.job_id, wait_for_ready))
        if self.fail_at is not None and len(self.stored) == self.fail_at:
            self.fail_at = None
            raise Refused(CODES.DEADLINE_EXCEEDED)
        if self.codes:
            raise Refused(self.codes.pop(0))
        self.stored.append(request)
        return pb2.SubmitJobResponse(job_id=request.job_id if request.job_id >= 0 else len(self.stored) - 1)


def _request(job_id=-1):
    return submit_request(Job(0, 0.0, RESNET, 1, 100), job_id)


def test_a_busy_scheduler_is_ridden_out_and_a_lost_answer_is_retried_only_under_the_jobs_own_id():
    busy = FakeScheduler([CODES.RESOURCE_EXHAUSTED, CODES.RESOURCE_EXHAUSTED])
    assert client._submit_one(busy, _request(), 30) == 0 and len(busy.calls) == 3 and len(busy.stored) == 1
    for code in (CODES.DEADLINE_EXCEEDED, CODES.UNAVAILABLE):          # an assigned id: a retry could store twice
        lost = FakeScheduler([code])
        with pytest.raises(grpc.RpcError):
            client._submit_one(lost, _request(), 30)
        assert len(lost.calls) == 1
    own = FakeScheduler([CODES.DEADLINE_EXCEEDED, CODES.ALREADY_EXISTS])    # the lost attempt was stored
    assert client._submit_one(own, _request(7), 30) == 7 and len(own.calls) == 2
    taken = FakeScheduler([CODES.ALREADY_EXISTS])                            # a real duplicate stays an error
    with pytest.raises(grpc.RpcError) as err:
        client._submit_one(taken, _request(7), 30)
    assert err.value.code() == CODES.ALREADY_EXISTS
    still_busy = FakeScheduler([CODES.RESOURCE_EXHAUSTED] * 1000)            # bounded by --timeout
    start = time.monotonic()
    with pytest.raises(grpc.RpcError):
        client._submit_one(still_busy, _request(), 0.5)
    assert time.monotonic() - start < 5


def test_a_trace_that_stops_midway_names_the_stored_rows_and_resumes_with_skip(tmp_path, monkeypatch, capsys):
    trace = tmp_path / "trace.csv"
    write_trace([Job(i, 0.0, RESNET, 1, 100 * (i + 1)) for i in range(5)], trace)
    fake = FakeScheduler(fail_at=2)
    monkeypatch.setattr(client, "_stub", lambda args: fake)
    assert main(["submit", str(trace)]) == 2
    err = capsys.readouterr().err
    assert "DEADLINE_EXCEEDED" in err and "(trace row 2): rows 0-1 are stored, row 2 may be too" in err
    assert "--skip 2 or --skip 3" in err
    assert [wait for _, wait in fake.calls] == [False, True, True]     # after the first answer: wait for a restart
    assert main(["submit", str(trace), "--skip", "3"]) == 0
    assert [r.total_steps for r in fake.stored] == [100, 200, 400, 500]
    refused = FakeScheduler([CODES.INVALID_ARGUMENT])
    monkeypatch.setattr(client, "_stub", lambda args: refused)
    assert main(["submit", str(trace), "--skip", "4"]) == 2
    assert "(trace row 4): no row of this call is stored, row 4 is not; submit the rest with --skip 4" in \
        capsys.readouterr().err
    assert main(["submit", "--job-type", RESNET, "--steps", "10", "--skip", "1"]) == 2
    assert "--skip" in capsys.readouterr().err
    assert main(["submit", str(trace), "--timeout", "0"]) == 2
    assert "--timeout 0.0: seconds > 0" in capsys.readouterr().err
    assert main(["submit", str(trace), "--skip", "5"]) == 2
    assert "has 5 rows, so none is left to submit" in capsys.readouterr().err


def test_a_submission_waits_for_a_restarting_scheduler_and_a_wrong_address_fails_at_once(tmp_path):
    with scheduler(tmp_path, round_s=30.0) as (server, address):
        port = server.port
        talk = stub(address, CLIENT)
        assert client._submit_one(talk, _request(), 30) == 0
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:               # nothing listens, and nothing answered before
        client._submit_one(talk, _request(), 30)
    assert err.value.code() == CODES.UNAVAILABLE and time.monotonic() - start < 10
    again = SchedulerServer(str(tmp_path), Credentials(CLIENT, WORKER), round_s=30.0, port=port)
    starter = threading.Timer(1.0, again.start)
    starter.start()
    try:
        assert client._submit_one(talk, _request(), 30, restarting=True) == 1
        jobs = talk.GetStatus(pb2.StatusRequest(), timeout=10).jobs
        assert [j.job_id for j in jobs] == [0, 1]
    finally:
        starter.join(10)
        again.stop()


def test_one_job_options_beside_a_trace_are_refused(tmp_path, monkeypatch, capsys):
    """`submit trace.csv --priority 5` stored the trace's jobs at their own priority, without a word."""
    trace = tmp_path / "trace.csv"
    write_trace([Job(i, 0.0, RESNET, 1, 100) for i in range(2)], trace)
    fake = FakeScheduler()
    monkeypatch.setattr(client, "_stub", lambda args: fake)
    assert main(["submit", str(trace), "--priority", "5", "--entity", "teamA"]) == 2
    assert f"--priority, --entity describe one job, and {trace} gives its jobs" in capsys.readouterr().err
    assert fake.stored == []
    assert main(["submit", str(trace)]) == 0 and len(fake.stored) == 2


def test_tokens_that_grpc_cannot_send_and_a_server_name_without_tls_are_refused(tmp_path, monkeypatch, capsys):
    """A token file with two lines ended in 'INTERNAL: Invalid metadata', an empty one in UNAUTHENTICATED or
    'both a client and a worker token are required' (no file named), and --tls-server-name without --tls-ca was
    dropped."""
    from hetsched.errors import HetschedError
    from hetsched.runtime.auth import channel, read_secret
    from hetsched.runtime.main import scheduler_credentials
    token = tmp_path / "token"
    for text, message in (("", "is empty"), ("\n", "is empty"), ("abc\ndef\n", "has '\\n'"), ("a b", "has ' '")):
        token.write_text(text)
        with pytest.raises(HetschedError, match=re.escape(message)):
            read_secret(token)
    token.write_text("abc\n")
    assert read_secret(token) == "abc"
    with pytest.raises(HetschedError, match="without a CA certificate"):
        channel("127.0.0.1:50551", CLIENT, server_name="localhost")
    monkeypatch.setenv("HETSCHED_CLIENT_TOKEN", "a\tb")
    assert main(["status", "--scheduler", "127.0.0.1:1"]) == 2
    assert "$HETSCHED_CLIENT_TOKEN: a token is one line" in capsys.readouterr().err
    args = type("Args", (), {"state_dir": str(tmp_path / "state"), "client_token_file": None,
                             "worker_token_file": None})
    with pytest.raises(HetschedError, match="HETSCHED_CLIENT_TOKEN"):
        scheduler_credentials(args)


def test_status_refuses_listing_options_with_metrics_and_counts_below_one(monkeypatch, capsys):
    """`status --metrics --state queued` printed every figure as if --state had not been given; `--limit -1`
    listed no job."""
    calls = []
    monkeypatch.setattr(client, "_stub", lambda args: calls.append(args))
    assert main(["status", "--metrics", "--state", "queued", "--limit", "3"]) == 2
    assert "--metrics prints the scheduler's figures, not jobs to choose from: drop --state, --limit" in \
        capsys.readouterr().err
    for flag in ("--limit", "--page-size"):
        with pytest.raises(SystemExit):
            main(["status", flag, "-1"])
        assert f"argument {flag}: expected a whole number >= 1, got '-1'" in capsys.readouterr().err


def test_one_job_carries_its_pins_and_slo_and_a_trace_its_own(tmp_path, monkeypatch, capsys):
    """The request had no field for a job's pinned GPU types or SLO (docs/rules.md#runtime-jobs)."""
    fake = FakeScheduler()
    monkeypatch.setattr(client, "_stub", lambda args: fake)
    assert main(["submit", "--job-type", RESNET, "--steps", "100", "--pinned-gpu-types", "v100|p100", "--slo", "2",
                 "--duration", "3000"]) == 0
    trace = tmp_path / "trace.csv"
    write_trace([Job(0, 0.0, RESNET, 1, 100, pinned_gpu_types="k80", slo_factor=1.2, duration_s=900.0)], trace)
    assert main(["submit", str(trace)]) == 0
    assert main(["submit", str(trace), "--pinned-gpu-types", "v100"]) == 2
    assert "--pinned-gpu-types describe one job" in capsys.readouterr().err
    assert [(r.pinned_gpu_types, r.slo_factor, r.duration_s) for r in fake.stored] == [("v100|p100", 2.0, 3000.0),
                                                                                       ("k80", 1.2, 900.0)]


class Timeouts(FakeScheduler):
    def SubmitJob(self, request, timeout, wait_for_ready=False):
        self.timeouts = [*getattr(self, "timeouts", []), timeout]
        return super().SubmitJob(request, timeout, wait_for_ready)


def test_submit_refuses_what_is_not_a_trace_and_streams_what_is(tmp_path, monkeypatch, capsys):
    """Issue 72, Low: a trace symlinked to /dev/zero ended in a MemoryError traceback; a 200 MB trace grew the
    client to 1.7 GB and submitted nothing in 60 s; an empty trace exited 0 silently; `--timeout inf` failed at
    once. Now a device is refused, a trace is read a chunk at a time (rows go in before the rest is read: a bad
    row 25 with chunks of 10 comes after 20 submitted), an empty one is an error, and inf waits without end."""
    from hetsched.traces import stream

    fake = Timeouts()
    monkeypatch.setattr(client, "_stub", lambda args: fake)
    zero = tmp_path / "zero.trace"
    zero.symlink_to("/dev/zero")
    assert main(["submit", str(zero)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {zero}: is a device, FIFO or socket, not a trace file"
    empty = tmp_path / "empty.trace"
    empty.write_text("")
    assert main(["submit", str(empty)]) == 2
    assert "holds no jobs" in capsys.readouterr().err
    trace = tmp_path / "long.trace"
    write_trace([Job(i, 0.0, RESNET, 1, 100 + i) for i in range(40)], trace)
    lines = trace.read_text().splitlines()
    lines[25] = lines[25].replace("\t125\t", "\tmany\t")
    trace.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(stream, "CHUNK_ROWS", 10)
    monkeypatch.setattr(stream.stream_trace, "__defaults__", (None, 10))
    assert main(["submit", str(trace), "--timeout", "inf"]) == 2
    err = capsys.readouterr().err
    assert f"{trace}:26: field 'total_steps'" in err and "rows 0-19 are stored" in err and "--skip 20" in err, err
    assert len(fake.stored) == 20 and set(fake.timeouts) == {None}


@pytest.mark.parametrize("fmt", ["gavel", "shockwave", "synergy", "csv"])
def test_a_streamed_trace_reads_as_the_whole_file_does(tmp_path, fmt):
    from hetsched.traces.formats import read_trace
    from hetsched.traces.stream import stream_trace

    path = tmp_path / {"gavel": "t.trace", "shockwave": "t.trace", "synergy": "t", "csv": "t.csv"}[fmt]
    jobs = [Job(i, 10.0 * i, RESNET if fmt != "synergy" else "alexnet", 1, 100 + i,
                command=f'say "hello,\n{i}"' if fmt == "csv" else "") for i in range(23)]
    write_trace(jobs, path, fmt, lossy=True)
    whole = read_trace(path, fmt)
    for rows in (1, 5, 7, 100):
        assert list(stream_trace(path, fmt, rows=rows)) == whole
