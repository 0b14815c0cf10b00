"""Each of compiled/_rounds.c's round kernels against its reference loop in compiled/kernels.py, on randomized states
drawn by hypothesis, bit for bit, inputs it writes included. The C loops are tested on their own, with or without
numba (`test_these_tests_run_without_numba` runs this file with numba made unimportable). Bad input is a clear error
from C, never a second, unchecked kernel (there is none: numba's copies of these loops, which did no bounds checks
and crashed the process on an out-of-range entry that C refused, are gone)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hetsched.compiled import kernels, round_kernels

C = round_kernels._rounds
pytestmark = pytest.mark.skipif(C is None, reason="the project was built without its C kernels")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(name: str):
    """The kernel's reference loop (compiled/kernels.py)."""
    return getattr(kernels, name)


def same(a, b) -> None:
    """Bit-identical results: arrays (NaN where NaN), tuples of them, numbers."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == np.asarray(b).dtype and a.shape == np.asarray(b).shape
        np.testing.assert_array_equal(a, b)
        if a.dtype.kind == "f":                       # signed zeros too (a NaN's sign means nothing)
            numbers = ~np.isnan(a)
            assert np.array_equal(np.signbit(a[numbers]), np.signbit(np.asarray(b)[numbers]))
    else:
        assert (a == b) or (a != a and b != b), (a, b)


def both(name: str, *args):
    """Run C and the reference on copies of `args`; check results and every written input agree."""
    c_args, ref_args = copy.deepcopy(args), copy.deepcopy(args)
    with np.errstate(invalid="ignore", over="ignore"):          # inf x 0 in the drawn inputs: NaN, as in C
        got, want = getattr(C, name)(*c_args), reference(name)(*ref_args)
    same(got, want)
    for x, y in zip(c_args, ref_args):
        if isinstance(x, np.ndarray):
            same(x, y)
    return got


@st.composite
def plans(draw, max_entries=8, max_types=3):
    """A round's plan over a table of entries: members (k x 2, single jobs and pairs, each job in one planned entry
    at most), the planned entries and their GPU types, steps, rates and times."""
    n = draw(st.integers(1, max_types))
    num_entries = draw(st.integers(1, max_entries))
    slots = draw(st.permutations(range(2 * num_entries)))
    pair = draw(st.lists(st.booleans(), min_size=num_entries, max_size=num_entries))
    members = np.array([[slots[2 * e], slots[2 * e + 1] if pair[e] else -1] for e in range(num_entries)], np.int64)
    entry = np.array(draw(st.permutations(range(num_entries)))[:draw(st.integers(0, num_entries))], np.int64)
    gpu_type = np.array([draw(st.integers(0, n - 1)) for _ in entry], np.int64)
    floats = st.floats(1e-3, 1e4, allow_nan=False, allow_infinity=False)
    k, num_slots = len(entry), 2 * num_entries
    return dict(n=n, members=members, entry=entry, gpu_type=gpu_type, num_slots=num_slots,
                etput=np.array(draw(st.lists(floats, min_size=num_entries * n * 2, max_size=num_entries * n * 2)))
                .reshape(num_entries, n, 2),
                remaining=np.array(draw(st.lists(st.floats(0, 1e6), min_size=num_slots, max_size=num_slots))),
                steps=np.floor(np.array(draw(st.lists(floats, min_size=2 * k, max_size=2 * k))).reshape(k, 2)),
                exec_time=np.array(draw(st.lists(st.floats(0, 720), min_size=k, max_size=k))),
                now=draw(st.floats(0, 1e7)), round_s=draw(st.sampled_from([0.0, 60.0, 120.0, 360.0, 2880.0])))


@SETTINGS
@given(plans())
def test_run_tasks(p):
    both("run_tasks", p["entry"], p["gpu_type"], p["members"], p["etput"], p["remaining"], p["now"], p["round_s"])


@SETTINGS
@given(plans(), st.floats(0, 1e4))
def test_credit_tasks(p, received):
    t = np.full((len(p["members"]), p["n"]), received)
    both("credit_tasks", p["entry"], p["gpu_type"], p["members"], p["steps"], p["exec_time"], t,
         np.full(p["n"], received * len(p["members"])), p["remaining"])


@SETTINGS
@given(plans(), st.booleans(), st.data())
def test_account_tasks(p, priced, data):
    scale = np.array([float(data.draw(st.sampled_from([1, 2, 4, 8]))) for _ in p["entry"]])
    prices = np.array(data.draw(st.lists(st.floats(0, 10), min_size=p["n"], max_size=p["n"])))
    acc = np.zeros((p["num_slots"], 3 + p["n"]))
    acc[:, 0] = np.nan
    both("account_tasks", p["entry"], p["gpu_type"], p["members"], p["steps"], p["exec_time"], scale, prices,
         priced, acc)


@SETTINGS
@given(plans(), st.data())
def test_mark_started(p, data):
    acc = np.zeros((p["num_slots"], 3 + p["n"]))
    started = data.draw(st.lists(st.booleans(), min_size=p["num_slots"], max_size=p["num_slots"]))
    acc[:, 0] = np.where(started, 5.0, np.nan)
    both("mark_started", p["entry"], p["members"], acc, p["now"])


@SETTINGS
@given(plans())
def test_single_rows(p):
    singles = np.flatnonzero(p["members"][:, 1] < 0)
    slots = p["members"][singles, 0] if len(singles) else np.zeros(0, np.int64)
    both("single_rows", p["members"], np.ascontiguousarray(slots), p["num_slots"])


@SETTINGS
@given(st.integers(1, 12), st.integers(1, 7), st.data())
def test_proportional_rates(m, n, data):
    values = st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan])
    throughput = np.array(data.draw(st.lists(values, min_size=m * n, max_size=m * n))).reshape(m, n)
    row = np.array(data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    both("proportional_rates", throughput, row)


@SETTINGS
@given(st.lists(st.integers(-5, 5) | st.integers(-2**62, 2**62), max_size=40))
def test_codes_of(values):
    both("codes_of", np.array(values, np.int64))


@SETTINGS
@given(st.lists(st.tuples(st.floats(0, 3600), st.sampled_from([1.0, 2.0, 4.0, 8.0])), max_size=40))
def test_gpu_seconds(rows):
    both("gpu_seconds", np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.integers(0, 2**31), st.integers(4, 24), st.sampled_from(["max_min_fairness_perf", "fifo_perf", "gandiva",
                                                                    "finish_time_fairness_perf"]),
       st.sampled_from(["1:1:1", "2:1:0", "4:0:2"]), st.integers(0, 6))
def test_quiet_rounds_on_a_running_simulation(seed, num_jobs, policy, cluster, which):
    """quiet_rounds' state (round_kernels.QuietRounds) as the simulator passes it, captured at a drawn call of a
    drawn run (jobs, seed, policy and cluster drawn), then given to C and to the reference: the same clock, rounds,
    completions, busy GPU-seconds, and the same scheduler and result arrays written."""
    from hetsched import ClusterSpec
    from hetsched.sim import simulator
    from hetsched.traces import GavelGenerator

    captured, original = [], round_kernels.quiet_rounds

    def capture(state):
        if len(captured) == which:
            captured.append(copy.deepcopy(tuple(state)))
            raise _Captured
        captured.append(None)
        return original(state)
    jobs = GavelGenerator(seed=seed % 1000, mean_interarrival_s=600.0).jobs(num_jobs)
    round_kernels.quiet_rounds = capture
    try:
        simulator.simulate(jobs, ClusterSpec.parse(cluster), policy, seed=seed, record_timeline=False)
    except _Captured:
        pass
    finally:
        round_kernels.quiet_rounds = original
    assume(len(captured) > which)                     # this run had that many quiet-round calls
    both("quiet_rounds", *captured[which])


class _Captured(Exception):
    pass


def test_bad_input_is_an_error_never_a_second_kernel():
    """Another dtype, a strided view, an entry out of range: TypeError or IndexError from C before it writes,
    raised as it is by the kernel the core calls (it used to go to numba's, which does no bounds checks)."""
    with pytest.raises(TypeError):
        round_kernels.codes_of(np.array([3, 1, 3, 2], np.int32))
    with pytest.raises(TypeError):
        round_kernels.codes_of(np.arange(8, dtype=np.int64)[::2])
    members = np.array([[0, -1], [1, -1]], np.int64)
    acc = np.full((2, 4), np.nan)
    if round_kernels.ENABLED:
        with pytest.raises(IndexError):                    # entry 5 of 2
            round_kernels.mark_started(np.array([5], np.int64), members, acc, 1.0)
        assert np.isnan(acc).all()


def test_an_out_of_range_entry_does_not_crash_the_process():
    """The crash that was (exit 139): the core's kernel given an entry out of range, in a process of its own."""
    code = ("import numpy as np\nfrom hetsched.compiled import round_kernels as k\n"
            "members = np.array([[0, -1], [1, -1]], np.int64)\n"
            "for call in (lambda: k.mark_started(np.array([10**9], np.int64), members, np.zeros((2, 4)), 1.0),\n"
            "             lambda: k.run_tasks(np.array([-7], np.int64), np.array([0], np.int64), members,\n"
            "                                 np.ones((2, 1, 2)), np.ones(2), 0.0, 60.0)):\n"
            "    try:\n        call()\n    except IndexError as exc:\n        print('refused:', exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr)
    if round_kernels.ENABLED:
        assert out.stdout.count("refused:") == 2, out.stdout


def test_these_tests_run_without_numba():
    """This file, with numba made unimportable: the C kernels and their references need no numba."""
    here = Path(__file__)
    code = ("import sys; sys.modules['numba'] = None; import pytest; "
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'no:randomly', {str(here)!r}, "
            "'-k', 'not without_numba and not quiet_rounds', '-x']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=here.parent.parent)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout.splitlines()[-1], out.stdout[-500:]
