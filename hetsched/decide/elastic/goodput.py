"""Pollux's goodput model (docs/rules.md#goodput): a throughput model fitted from the configurations a job has run,
times the statistical efficiency of a batch size from the gradient noise scale, maximised over batch sizes.

Parameters, in order: alpha_c, beta_c (per-sample compute), alpha_n, beta_n (all-reduce across nodes),
alpha_r, beta_r (all-reduce within a node), gamma (how compute and communication overlap).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, minimize

from hetsched.compiled.jit import compiled

TINY = 1e-8
N_BATCH_SIZES = 50
MEMO_MAX = 100_000          # entries of each memo below (cleared when full)


def accum_time(params: np.ndarray, atomic_bsz):
    return params[0] + params[1] * atomic_bsz


def network_time(params: np.ndarray, nodes, replicas):
    """The slowest link's all-reduce time: across nodes if the job spans several, within one if it has several
    replicas there, else (one GPU) practically nothing."""
    nodes, replicas = np.asarray(nodes), np.asarray(replicas)
    across, within = nodes > 1, replicas > 1
    alpha = np.select([across, within], [params[2], params[4]], TINY)
    beta = np.select([across, within], [params[3], params[5]], TINY)
    return alpha + beta * np.maximum(replicas - 2, TINY)


def log_step_time(params: np.ndarray, accum, network):
    gamma = params[6]
    return np.logaddexp(gamma * np.log(accum), gamma * np.log(network)) / gamma


def throughput(params: np.ndarray, nodes, replicas, atomic_bsz, accum_steps):
    """Samples per second of a configuration (accum_steps extra micro-batches before each all-reduce)."""
    accum = accum_time(params, atomic_bsz)
    step = np.exp(log_step_time(params, accum, network_time(params, nodes, replicas)))
    return replicas * atomic_bsz * (accum_steps + 1) / (accum_steps * accum + step)


def efficiency(grad_sqr: float, grad_var: float, batch_size, init_batch_size: int):
    """Progress per sample at `batch_size` relative to `init_batch_size` (the gradient noise scale's gain / scale)."""
    scale = np.asarray(batch_size) / init_batch_size
    denom = grad_var / scale + grad_sqr
    gain = np.where(denom > 0, (grad_var + grad_sqr) / np.where(denom > 0, denom, 1.0), 1.0)
    return gain / scale


def split_batch(local_bsz, replicas, max_atomic: int, init_batch_size: int):
    """(atomic batch, accumulation steps) for a per-GPU batch: accumulate when it exceeds what fits, and at least
    once on one GPU above the initial batch size (one micro-batch cannot estimate the gradient statistics)."""
    local_bsz = np.asarray(local_bsz, dtype=float)
    steps = np.ceil(local_bsz / max_atomic - TINY) - 1
    steps = np.where((np.asarray(replicas) == 1) & (local_bsz > init_batch_size + TINY), np.maximum(steps, 1), steps)
    steps = steps.astype(np.int64)
    return np.ceil(local_bsz / (steps + 1) - TINY).astype(np.int64), steps


#: Answers by their inputs: jobs of one application at one epoch, with one fitted model (see `_FITS`), ask the
#: same question (helios-1 under Sia: 9,793 distinct of 19,704). Read-only arrays, so no caller changes one.
_BEST: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def best_goodput(params, grad_sqr, grad_var, init_batch_size, max_batch_size, nodes, replicas, atomic_range):
    """For each (nodes, replicas): the goodput (progress per second at the initial batch size) maximised over 50
    geometrically spaced total batch sizes, with the atomic batch and accumulation steps that reach it (read-only
    arrays). A configuration whose atomic batch falls outside `atomic_range` has goodput 0."""
    params = np.ascontiguousarray(params, dtype=float)
    nodes = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
    replicas = np.atleast_1d(np.asarray(replicas, dtype=np.int64))
    lo, hi = atomic_range
    key = (params.shape, params.tobytes(), float(grad_sqr), float(grad_var), float(init_batch_size),
           float(max_batch_size), nodes.tobytes(), replicas.tobytes(), np.asarray(lo, float).tobytes(),
           np.asarray(hi, float).tobytes())
    return _memo(_BEST, key, lambda: _read_only(
        _best_goodput(params, grad_sqr, grad_var, init_batch_size, max_batch_size, nodes, replicas, lo, hi)))


def _read_only(arrays: tuple) -> tuple:
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _memo(store: dict, key: tuple, compute):
    """`store[key]`, computed once (the store is emptied when it holds MEMO_MAX answers)."""
    found = store.get(key)
    if found is None:
        if len(store) >= MEMO_MAX:
            store.clear()
        found = store[key] = compute()
    return found


def _best_goodput(params, grad_sqr, grad_var, init_batch_size, max_batch_size, nodes, replicas, lo, hi):
    smallest = np.maximum(init_batch_size, lo * replicas)
    batch = np.geomspace(smallest, np.maximum(smallest, max_batch_size), N_BATCH_SIZES)   # (50, configs)
    atomic, steps = split_batch(batch / replicas, replicas, hi, init_batch_size)
    total = replicas * atomic * (steps + 1)
    good = throughput(params, nodes, replicas, atomic, steps) * efficiency(grad_sqr, grad_var, total,
                                                                          init_batch_size)
    good = np.where((lo <= atomic) & (atomic <= hi), good, 0.0)
    best = np.argmax(good, axis=0)
    cols = np.arange(good.shape[1])
    return good[best, cols], atomic[best, cols], steps[best, cols]


@compiled
def _objective(params, atomic, log_accum, log_step, across, within, spare):
    """The fit's loss (RMSLE of compute and step times, plus Pollux's two priors) and its gradient, one loop over
    the samples (across/within: 1.0 where the slowest link is between nodes / within a node)."""
    ac, bc, an, bn, ar, br, gamma = params[0], params[1], params[2], params[3], params[4], params[5], params[6]
    n = atomic.shape[0]
    s1 = s2 = 0.0
    e1 = np.empty(n)
    e2 = np.empty(n)
    sa = np.empty(n)
    acc = np.empty(n)
    net = np.empty(n)
    lac = np.empty(n)
    lnet = np.empty(n)
    pred = np.empty(n)
    for i in range(n):
        acc[i] = ac + bc * atomic[i]
        if across[i] > 0:
            net[i] = an + bn * spare[i]
        elif within[i] > 0:
            net[i] = ar + br * spare[i]
        else:
            net[i] = TINY + TINY * spare[i]
        lac[i] = np.log(acc[i])
        lnet[i] = np.log(net[i])
        hi = max(gamma * lac[i], gamma * lnet[i])
        lse = hi + np.log(np.exp(gamma * lac[i] - hi) + np.exp(gamma * lnet[i] - hi))
        pred[i] = lse / gamma
        sa[i] = np.exp(gamma * lac[i] - lse)
        e1[i] = lac[i] - log_accum[i]
        e2[i] = pred[i] - log_step[i]
        s1 += e1[i] * e1[i]
        s2 += e2[i] * e2[i]
    r1, r2 = np.sqrt(s1 / n), np.sqrt(s2 / n)
    loss = r1 + r2 + 1e-3 * (gamma - 1) ** 2 + 1e-2 * ((bn / an) ** 2 + (br / ar) ** 2)
    grad = np.zeros(7)
    for i in range(n):
        w1 = e1[i] / (max(r1, 1e-300) * n)
        w2 = e2[i] / (max(r2, 1e-300) * n)
        d_acc = w1 / acc[i] + w2 * sa[i] / acc[i]
        d_net = w2 * (1.0 - sa[i]) / net[i]
        grad[0] += d_acc
        grad[1] += d_acc * atomic[i]
        grad[2] += d_net * across[i]
        grad[3] += d_net * across[i] * spare[i]
        grad[4] += d_net * within[i]
        grad[5] += d_net * within[i] * spare[i]
        grad[6] += w2 * ((sa[i] * lac[i] + (1.0 - sa[i]) * lnet[i]) - pred[i]) / gamma
    grad[2] -= 2e-2 * bn * bn / an ** 3
    grad[3] += 2e-2 * bn / an ** 2
    grad[4] -= 2e-2 * br * br / ar ** 3
    grad[5] += 2e-2 * br / ar ** 2
    grad[6] += 2e-3 * (gamma - 1)
    return loss, grad


#: Fits by their samples: jobs of one application that ran the same configurations of a type measured the same
#: times (the traces are the truth), so most refits repeat one (helios-1 under Sia: 1,098 distinct of 3,847).
#: The fit is deterministic, so a repeat returns the first one's parameters: the same numbers, without L-BFGS-B.
_FITS: dict[tuple, np.ndarray] = {}


def fit_params(nodes, replicas, atomic_bsz, step_s, sync_s) -> np.ndarray:
    """Fit the throughput model to measured (nodes, replicas, atomic batch) -> (step, sync) samples with L-BFGS-B,
    fixing the parameters the samples cannot inform (docs/rules.md#goodput)."""
    samples = [np.ascontiguousarray(a, dtype=float) for a in (nodes, replicas, atomic_bsz, step_s, sync_s)]
    key = (len(samples[0]), *(a.tobytes() for a in samples))
    return _memo(_FITS, key, lambda: _fit(*samples)).copy()


def _fit(nodes, replicas, atomic_bsz, step_s, sync_s) -> np.ndarray:
    nodes, replicas = np.asarray(nodes, dtype=float), np.asarray(replicas, dtype=float)
    atomic = np.asarray(atomic_bsz, dtype=float)
    step_s = np.asarray(step_s, dtype=float)
    accum_s = step_s - np.asarray(sync_s, dtype=float)
    start = np.array([1e-1, 1e-2] * 3 + [1.0 + 1e-3])
    lower = np.array([TINY] * 6 + [1.0])
    upper = np.array([np.inf] * 6 + [10.0])
    if len(np.unique(atomic)) == 1:                        # one batch size seen: compute time split evenly
        start[0] = lower[0] = upper[0] = np.mean(accum_s) / 2
    fixed = []
    if not np.any(nodes > 1):
        fixed += [2, 3]
    if not np.any((nodes == 1) & (replicas > 1)):
        fixed += [4, 5]
    if not np.any(replicas > 2):
        fixed += [3, 5]
    for i in fixed:
        start[i] = upper[i] = lower[i]
    across = (nodes > 1).astype(float)
    within = ((nodes <= 1) & (replicas > 1)).astype(float)
    spare = np.maximum(replicas - 2, TINY)
    args = (atomic, np.log(accum_s), np.log(step_s), across, within, spare)
    result = minimize(_objective, start, args=args, jac=True, method="L-BFGS-B", bounds=Bounds(lower, upper),
                      tol=1e-5)
    params = result.x.copy()
    if not np.any(nodes > 1):                              # prior: a node's link is no faster than a GPU's
        params[2] = max(params[2], params[4] * 1.1)
        params[3] = max(params[3], params[5] * 1.1)
    return params
