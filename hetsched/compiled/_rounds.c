/* The round kernels of Gavel's and Shockwave's micro-task rounds in C: the one compiled implementation of each
 * (compiled/round_kernels.py), so that a process need not load numba.
 *
 * Loading numba's cached kernels costs a process about 0.4 CPU-s once (numba's registries, SciPy's BLAS it
 * imports and that library's worker threads): a fifth of the artifact's speed benchmark. These loops are the
 * reference loops of compiled/kernels.py line for line, with the same floating-point operations in the same order (IEEE
 * doubles, no contraction into fused multiply-adds: setup.py compiles with -ffp-contract=off), so every result is
 * bit for bit theirs and the numpy path's (tests/test_round_kernels.py, tests/test_kernels.py). Arrays must be
 * C-contiguous with the kernels' dtypes (float64, int64, bool) and consistent sizes and indices; anything else
 * raises TypeError or IndexError before any array is written. Built optionally (setup.py): without a C compiler
 * the project runs the numpy path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_arrays.h"

static PyObject *np_empty;          /* numpy.empty */
static PyObject *dt_f8, *dt_i8;     /* numpy.float64, numpy.int64 */

/* A new numpy array (1-d, or 2-d when n1 > 0) and its data pointer. */
static PyObject *new_array(Py_ssize_t n0, Py_ssize_t n1, PyObject *dtype, void **data) {
    PyObject *shape = n1 > 0 ? Py_BuildValue("(nn)", n0, n1) : Py_BuildValue("(n)", n0);
    if (shape == NULL) return NULL;
    PyObject *out = PyObject_CallFunctionObjArgs(np_empty, shape, dtype, NULL);
    Py_DECREF(shape);
    if (out == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) {
        Py_DECREF(out);
        return NULL;
    }
    *data = view.buf;              /* numpy keeps the memory while `out` lives */
    PyBuffer_Release(&view);
    return out;
}

static int as_double(PyObject *o, double *v) {
    *v = PyFloat_AsDouble(o);
    return (*v == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* ---- numpy's float order (core/ranking.py) --------------------------------------------------------------- */

static int after(double x, double y) { return x > y || (x != x && y == y); }

static int compare(double x, double y) { return after(y, x) ? -1 : (after(x, y) ? 1 : 0); }

typedef struct { const double *k3, *k2, *k1; } Keys;

/* Row i ranks before row j: keys compared in turn (k3 first), then the row (np.lexsort's order). */
static int precedes(const Keys *k, int64_t i, int64_t j) {
    int c = compare(k->k3[i], k->k3[j]);
    if (!c) c = compare(k->k2[i], k->k2[j]);
    if (!c) c = compare(k->k1[i], k->k1[j]);
    return c ? c < 0 : i < j;
}

/* A stable bottom-up merge sort of idx[0..n) (buf: room for n) under `before(ctx, i, j)`: row i goes first. */
typedef int (*Before)(const void *ctx, int64_t i, int64_t j);

static void merge_sort(Before before, const void *ctx, int64_t *idx, int64_t *buf, Py_ssize_t n) {
    for (Py_ssize_t width = 1; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            Py_ssize_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) buf[o++] = before(ctx, idx[b], idx[a]) ? idx[b++] : idx[a++];
            while (a < mid) buf[o++] = idx[a++];
            while (b < hi) buf[o++] = idx[b++];
        }
        memcpy(idx, buf, (size_t)n * sizeof(int64_t));
    }
}

/* The walk's ranking: `precedes` is a strict total order, so this sort gives np.lexsort's (numba's merge sort and
 * heap give it too). */
static int ranks_before(const void *keys, int64_t i, int64_t j) { return precedes(keys, i, j); }

/* codes_of's order: by value, ties kept in position order by the stable sort (numpy's mergesort). */
static int value_before(const void *values, int64_t i, int64_t j) {
    return ((const int64_t *)values)[i] < ((const int64_t *)values)[j];
}

/* A new int64 array holding src[0..n). */
static PyObject *int64_array(const int64_t *src, Py_ssize_t n) {
    void *data;
    PyObject *out = new_array(n, 0, dt_i8, &data);
    if (out) memcpy(data, src, (size_t)n * sizeof(int64_t));
    return out;
}

/* ---- select_walk (kernels.py) ---------------------------------------------------------------------------- */

typedef struct {
    Arr t, S, alloc, deficit, in_alloc, ok, members, escale, scale, capacity;
    int need_priority;
} WalkState;

/* Entries and GPU types that run this round into out_e/out_w (room for n each); returns how many, or -1. */
static Py_ssize_t walk(const WalkState *s, const int64_t *order, Py_ssize_t num_order, int64_t *out_e,
                       int64_t *out_w) {
    Py_ssize_t n = s->alloc.n0, m = s->alloc.n1, num_slots = s->scale.n0;
    const double *t = D(s->t), *S = D(s->S), *alloc = D(s->alloc), *deficit = D(s->deficit);
    const char *in_alloc = B(s->in_alloc), *ok = B(s->ok);
    const int64_t *members = Q(s->members), *escale = Q(s->escale), *scale = Q(s->scale);
    size_t nn = n > 0 ? (size_t)n : 1;
    double *pr = PyMem_Malloc(nn * (size_t)(m > 0 ? m : 1) * sizeof(double));
    double *free_ = PyMem_Malloc((size_t)(s->capacity.n0 > 0 ? s->capacity.n0 : 1) * sizeof(double));
    char *taken = PyMem_Calloc(num_slots > 0 ? (size_t)num_slots : 1, 1);
    int64_t *cand = PyMem_Malloc(nn * sizeof(int64_t)), *ranked = PyMem_Malloc(nn * sizeof(int64_t));
    int64_t *buf = PyMem_Malloc(nn * sizeof(int64_t));
    double *k3 = PyMem_Malloc(nn * sizeof(double)), *k2 = PyMem_Malloc(nn * sizeof(double));
    double *k1 = PyMem_Malloc(nn * sizeof(double));
    Py_ssize_t k = -1;
    if (!pr || !free_ || !taken || !cand || !ranked || !buf || !k3 || !k2 || !k1) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t e = 0; e < n; e++)
        for (Py_ssize_t w = 0; w < m; w++) {
            double a = alloc[e * m + w];
            double fraction = t[e * m + w] / S[w];
            double p = fraction == 0 ? a * 1e9 : a / fraction;
            if (a == 0 || !ok[e * m + w] || !in_alloc[e]) p = 0.0;
            pr[e * m + w] = p;
        }
    memcpy(free_, D(s->capacity), (size_t)s->capacity.n0 * sizeof(double));
    k = 0;
    for (Py_ssize_t i = 0; i < num_order; i++) {
        int64_t w = order[i];
        if (w < 0 || w >= m) {
            PyErr_SetString(PyExc_IndexError, "a GPU type outside the allocation's columns");
            k = -1;
            goto done;
        }
        double f = free_[w];
        if (f <= 0) continue;
        Py_ssize_t c = 0;
        for (Py_ssize_t e = 0; e < n; e++) {
            int64_t a = members[2 * e], b = members[2 * e + 1];
            if (!ok[e * m + w] || (s->need_priority && !(pr[e * m + w] > 0)) || taken[a] || escale[e] > f) continue;
            if (b >= 0 && (taken[b] || scale[b] != escale[e])) continue;
            cand[c++] = e;
        }
        for (Py_ssize_t j = 0; j < c; j++) {
            k3[j] = -pr[cand[j] * m + w];
            k2[j] = -deficit[cand[j] * m + w];
            k1[j] = -alloc[cand[j] * m + w];
            ranked[j] = j;
        }
        Keys keys = {k3, k2, k1};
        merge_sort(ranks_before, &keys, ranked, buf, c);
        for (Py_ssize_t r = 0; r < c; r++) {
            if (f <= 0) break;
            int64_t e = cand[ranked[r]];
            int64_t a = members[2 * e], b = members[2 * e + 1];
            if (taken[a] || escale[e] > f || (b >= 0 && taken[b])) continue;
            taken[a] = 1;
            if (b >= 0) taken[b] = 1;
            out_e[k] = e;
            out_w[k] = w;
            k++;
            f -= escale[e];
        }
        free_[w] = f;
    }
done:
    PyMem_Free(pr); PyMem_Free(free_); PyMem_Free(taken); PyMem_Free(cand); PyMem_Free(ranked); PyMem_Free(buf);
    PyMem_Free(k3); PyMem_Free(k2); PyMem_Free(k1);
    return k;
}

/* The members' slots must index the per-slot arrays: checked once per call, so that the loops need not. */
static int check_members(const Arr *members, Py_ssize_t num_slots) {
    const int64_t *mem = Q(*members);
    if (members->n1 != 2) {
        PyErr_SetString(PyExc_TypeError, "members must have two columns");
        return -1;
    }
    for (Py_ssize_t i = 0; i < 2 * members->n0; i++)
        if (mem[i] >= num_slots || mem[i] < -1) {
            PyErr_SetString(PyExc_IndexError, "a member slot outside the slot arrays");
            return -1;
        }
    return 0;
}

/* The planned entries index the members' rows, and their members the per-slot arrays of `limit` rows. */
static int check_entries(const Arr *entry, const Arr *members, Py_ssize_t limit) {
    const int64_t *e = Q(*entry), *mem = Q(*members);
    if (members->n1 != 2) {
        PyErr_SetString(PyExc_TypeError, "members must have two columns");
        return -1;
    }
    for (Py_ssize_t i = 0; i < entry->n0; i++) {
        if (e[i] < 0 || e[i] >= members->n0 || mem[2 * e[i]] >= limit || mem[2 * e[i] + 1] >= limit
            || mem[2 * e[i]] < -1 || mem[2 * e[i] + 1] < -1) {
            PyErr_SetString(PyExc_IndexError, "a planned entry or its members out of range");
            return -1;
        }
    }
    return 0;
}

/* `credit`: t and S are written too (quiet_rounds credits the rounds it runs). */
static int get_walk(PyObject **o, WalkState *s, int credit) {
    /* t, S, alloc, deficit, in_alloc, ok, need_priority, members, escale, scale, capacity */
    if (get(o[0], &s->t, 'd', 2, credit) || get(o[1], &s->S, 'd', 1, credit) || get(o[2], &s->alloc, 'd', 2, 0)
        || get(o[3], &s->deficit, 'd', 2, 0) || get(o[4], &s->in_alloc, '?', 1, 0) || get(o[5], &s->ok, '?', 2, 0))
        return -1;
    s->need_priority = PyObject_IsTrue(o[6]);
    if (s->need_priority < 0) return -1;
    if (get(o[7], &s->members, 'q', 2, 0) || get(o[8], &s->escale, 'q', 1, 0) || get(o[9], &s->scale, 'q', 1, 0)
        || get(o[10], &s->capacity, 'd', 1, 0))
        return -1;
    Py_ssize_t n = s->alloc.n0, m = s->alloc.n1;
    if (s->t.n0 < n || s->t.n1 != m || s->S.n0 < m || s->deficit.n0 < n || s->deficit.n1 != m || s->in_alloc.n0 < n
        || s->ok.n0 < n || s->ok.n1 != m || s->members.n0 < n || s->escale.n0 < n || s->capacity.n0 < m) {
        PyErr_SetString(PyExc_TypeError, "select_walk: arrays of inconsistent sizes");
        return -1;
    }
    return check_members(&s->members, s->scale.n0);
}

static void release_walk(WalkState *s) {
    Arr *arrs[] = {&s->t, &s->S, &s->alloc, &s->deficit, &s->in_alloc, &s->ok, &s->members, &s->escale, &s->scale,
                   &s->capacity};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) release(arrs[i], 1);
}

static PyObject *select_walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("select_walk", nargs, 12)) return NULL;
    WalkState s;
    memset(&s, 0, sizeof s);
    Arr order = {0};
    PyObject *result = NULL, *e = NULL, *w = NULL;
    if (get_walk((PyObject **)args, &s, 0) || get(args[11], &order, 'q', 1, 0)) goto out;
    Py_ssize_t n = s.alloc.n0;
    int64_t *oe = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int64_t *ow = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    Py_ssize_t k = (oe && ow) ? walk(&s, Q(order), order.n0, oe, ow) : (PyErr_NoMemory(), -1);
    if (k >= 0) {
        e = int64_array(oe, k);
        w = e ? int64_array(ow, k) : NULL;
        if (w) result = PyTuple_Pack(2, e, w);
    }
    PyMem_Free(oe);
    PyMem_Free(ow);
out:
    Py_XDECREF(e);
    Py_XDECREF(w);
    release_walk(&s);
    release(&order, 1);
    return result;
}

/* ---- the micro-task stages ------------------------------------------------------------------------------- */

/* run_tasks: steps min(floor(rate x round), remaining) and finish now + steps / rate per member; ends. */
static void run_tasks_c(const int64_t *entry, const int64_t *gpu_type, Py_ssize_t k, const int64_t *members,
                        const double *etput, Py_ssize_t m, const double *remaining, double now, double round_s,
                        double *steps, double *finish, double *ends) {
    double span = 0.0 > round_s ? 0.0 : round_s;            /* numba's max(round_s, 0.0) */
    for (Py_ssize_t i = 0; i < k; i++) {
        steps[2 * i] = steps[2 * i + 1] = 0.0;
        finish[2 * i] = finish[2 * i + 1] = -INFINITY;
        for (int col = 0; col < 2; col++) {
            int64_t slot = members[2 * entry[i] + col];
            if (slot >= 0) {
                double r = etput[(entry[i] * m + gpu_type[i]) * 2 + col];
                double a = floor(r * span), b = remaining[slot];
                double st = b < a ? b : a;                    /* numba's min(a, b) */
                steps[2 * i + col] = st;
                finish[2 * i + col] = now + st / r;
            }
        }
        double f0 = finish[2 * i], f1 = finish[2 * i + 1];
        ends[i] = (f0 >= f1 || f0 != f0) ? f0 : f1;
    }
}

static double latest(const double *ends, Py_ssize_t k) {
    double m = ends[0];
    for (Py_ssize_t i = 1; i < k; i++) {
        double v = ends[i];
        if (v > m || v != v) m = v;
        if (m != m) break;
    }
    return m;
}

static void mark_started_c(const int64_t *entry, Py_ssize_t k, const int64_t *members, double *acc,
                           Py_ssize_t acc_cols, double now) {
    for (Py_ssize_t i = 0; i < k; i++)
        for (int col = 0; col < 2; col++) {
            int64_t slot = members[2 * entry[i] + col];
            if (slot >= 0 && isnan(acc[slot * acc_cols])) acc[slot * acc_cols] = now;
        }
}

/* Python's random: the next 32-bit MT19937 output from 624 words and a position (kernels.py `_mt_next`). */
static int64_t mt_next(int64_t *mt) {
    const int n = 624;
    if (mt[n] >= n) {
        for (int k = 0; k < n; k++) {
            int64_t y = (mt[k] & 0x80000000LL) | (mt[(k + 1) % n] & 0x7fffffffLL);
            mt[k] = mt[(k + 397) % n] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfLL : 0);
        }
        mt[n] = 0;
    }
    int64_t y = mt[mt[n]];
    mt[n] += 1;
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680LL;
    y ^= (y << 15) & 0xefc60000LL;
    return y ^ (y >> 18);
}

/* random.Random.shuffle of a copy of `order` into `out` (kernels.py `shuffled`). */
static void shuffled_c(const int64_t *order, Py_ssize_t len, int64_t *mt, int64_t *out) {
    memcpy(out, order, (size_t)len * sizeof(int64_t));
    for (Py_ssize_t i = len - 1; i > 0; i--) {
        int bits = 0;
        for (int64_t v = i + 1; v; v >>= 1) bits++;
        int64_t j = mt_next(mt) >> (32 - bits);
        while (j > i) j = mt_next(mt) >> (32 - bits);
        int64_t tmp = out[i];
        out[i] = out[j];
        out[j] = tmp;
    }
}

/* gpu_seconds: a round's busy GPU-seconds, exec_time x GPUs summed left to right. */
static double gpu_seconds_c(const double *exec_time, const double *scale, Py_ssize_t k) {
    double total = 0.0;
    for (Py_ssize_t i = 0; i < k; i++) total += exec_time[i] * scale[i];
    return total;
}

/* account_tasks: the result's per-job steps, GPU-seconds per type and (priced) cost; a pair's paid once. */
static void account_tasks_c(const int64_t *entry, const int64_t *gpu_type, Py_ssize_t k, const int64_t *members,
                            const double *steps, const double *exec_time, const double *scale, const double *prices,
                            int priced, double *acc, Py_ssize_t acc_cols) {
    for (Py_ssize_t i = 0; i < k; i++) {
        int64_t w = gpu_type[i];
        int pair = members[2 * entry[i] + 1] >= 0;
        for (int col = 0; col < 2; col++) {
            int64_t slot = members[2 * entry[i] + col];
            if (slot < 0) continue;
            double *row = acc + slot * acc_cols;
            row[1] += steps[2 * i + col];
            row[3 + w] += exec_time[i] * scale[i];
            if (priced) row[2] += prices[w] * exec_time[i] / 3600.0 * scale[i] / (pair ? 2.0 : 1.0);
        }
    }
}

/* credit_tasks: time received per entry and type, per-type totals in plan order, remaining steps; the slots of
 * the jobs that completed go to `done` (room for 2k), and their number is returned. */
static Py_ssize_t credit_tasks_c(const int64_t *entry, const int64_t *gpu_type, Py_ssize_t k, const int64_t *members,
                                 const double *steps, const double *exec_time, double *t, Py_ssize_t m, double *S,
                                 double *remaining, int64_t *done) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        t[entry[i] * m + gpu_type[i]] += exec_time[i];
        S[gpu_type[i]] += exec_time[i];
    }
    for (Py_ssize_t i = 0; i < k; i++)                /* a job is a member of one planned entry at most */
        for (int col = 0; col < 2; col++) {
            int64_t slot = members[2 * entry[i] + col];
            if (slot >= 0) {
                remaining[slot] -= steps[2 * i + col];
                if (remaining[slot] <= 0) done[n++] = slot;
            }
        }
    return n;
}

/* ---- quiet_rounds (kernels.py) --------------------------------------------------------------------------- */

static PyObject *quiet_rounds(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("quiet_rounds", nargs, 31)) return NULL;
    enum { ENTRY, GPU_TYPE, STEPS, FINISH, ENDS, ETPUT, REMAINING, ORDER, MT, ACC, PRICES, NARR };
    Arr a[NARR];
    memset(a, 0, sizeof a);
    WalkState s;
    memset(&s, 0, sizeof s);
    PyObject *result = NULL;
    int64_t *ent = NULL, *typ = NULL, *we = NULL, *ww = NULL, *done = NULL, *order_buf = NULL, *saved = NULL;
    double *steps = NULL, *finish = NULL, *ends = NULL, *exec_time = NULL, *scl = NULL;
    double round_start, round_s, next_arrival, last_reset, min_reset, busy;
    long long budget = PyLong_AsLongLong(args[6]);
    if (budget == -1 && PyErr_Occurred()) goto out;
    if (as_double(args[5], &round_start) || as_double(args[25], &round_s) || as_double(args[26], &next_arrival)
        || as_double(args[28], &last_reset) || as_double(args[29], &min_reset) || as_double(args[30], &busy))
        goto out;
    int priced = PyObject_IsTrue(args[24]), need_update = PyObject_IsTrue(args[27]);
    if (priced < 0 || need_update < 0) goto out;
    if (get(args[0], &a[ENTRY], 'q', 1, 0) || get(args[1], &a[GPU_TYPE], 'q', 1, 0)
        || get(args[2], &a[STEPS], 'd', 2, 0) || get(args[3], &a[FINISH], 'd', 2, 0)
        || get(args[4], &a[ENDS], 'd', 1, 0) || get(args[8], &a[ETPUT], 'd', 3, 0) || get(args[11], &a[REMAINING], 'd', 1, 1))
        goto out;
    PyObject *walk_args[11] = {args[12], args[13], args[14], args[15], args[16], args[17], args[18], args[7],
                               args[9], args[10], args[19]};
    if (get_walk(walk_args, &s, 1) || get(args[20], &a[ORDER], 'q', 1, 0) || get(args[21], &a[MT], 'q', 1, 1)
        || get(args[22], &a[ACC], 'd', 2, 1) || get(args[23], &a[PRICES], 'd', 1, 0))
        goto out;
    Py_ssize_t n = s.alloc.n0, m = s.alloc.n1, k = a[ENTRY].n0;
    Py_ssize_t acc_cols = a[ACC].n1, len_mt = a[MT].n0, num_order = a[ORDER].n0;
    Py_ssize_t used_slots = 0;                     /* one more than the largest slot of an entry's member */
    for (Py_ssize_t i = 0; i < 2 * n; i++)
        if (Q(s.members)[i] + 1 > used_slots) used_slots = Q(s.members)[i] + 1;
    if (k == 0 || a[GPU_TYPE].n0 != k || a[STEPS].n0 != k || a[STEPS].n1 != 2 || a[FINISH].n0 != k
        || a[FINISH].n1 != 2 || a[ENDS].n0 != k || a[ETPUT].n0 < n || a[ETPUT].n1 != m || a[ETPUT].n2 != 2
        || a[REMAINING].n0 < used_slots || a[ACC].n0 < used_slots || acc_cols < 3 + m || (priced && a[PRICES].n0 < m)
        || (len_mt != 0 && (len_mt != 625 || Q(a[MT])[624] < 0 || Q(a[MT])[624] > 624))) {
        PyErr_SetString(PyExc_TypeError, "quiet_rounds: arrays of inconsistent sizes");
        goto out;
    }
    for (Py_ssize_t i = 0; i < k; i++)
        if (Q(a[ENTRY])[i] < 0 || Q(a[ENTRY])[i] >= n || Q(a[GPU_TYPE])[i] < 0 || Q(a[GPU_TYPE])[i] >= m) {
            PyErr_SetString(PyExc_IndexError, "quiet_rounds: a planned entry or type out of range");
            goto out;
        }
    size_t cap = (size_t)(n > k ? n : k) + 1;
    ent = PyMem_Malloc(cap * sizeof(int64_t)); typ = PyMem_Malloc(cap * sizeof(int64_t));
    we = PyMem_Malloc(cap * sizeof(int64_t)); ww = PyMem_Malloc(cap * sizeof(int64_t));
    done = PyMem_Malloc(2 * cap * sizeof(int64_t));
    order_buf = PyMem_Malloc((size_t)(num_order + 1) * sizeof(int64_t));
    saved = PyMem_Malloc((size_t)(len_mt + 1) * sizeof(int64_t));
    steps = PyMem_Malloc(2 * cap * sizeof(double)); finish = PyMem_Malloc(2 * cap * sizeof(double));
    ends = PyMem_Malloc(cap * sizeof(double)); exec_time = PyMem_Malloc(cap * sizeof(double));
    scl = PyMem_Malloc(cap * sizeof(double));
    if (!ent || !typ || !we || !ww || !done || !order_buf || !saved || !steps || !finish || !ends || !exec_time || !scl) {
        PyErr_NoMemory();
        goto out;
    }
    memcpy(ent, Q(a[ENTRY]), (size_t)k * sizeof(int64_t));
    memcpy(typ, Q(a[GPU_TYPE]), (size_t)k * sizeof(int64_t));
    memcpy(steps, D(a[STEPS]), (size_t)(2 * k) * sizeof(double));
    memcpy(finish, D(a[FINISH]), (size_t)(2 * k) * sizeof(double));
    memcpy(ends, D(a[ENDS]), (size_t)k * sizeof(double));
    const int64_t *members = Q(s.members), *escale = Q(s.escale);
    const char *in_alloc = B(s.in_alloc);
    const double *etput = D(a[ETPUT]), *prices = D(a[PRICES]);
    double *t = D(s.t), *S = D(s.S), *remaining = D(a[REMAINING]), *acc = D(a[ACC]);
    int64_t *mt = Q(a[MT]);
    long long rounds = 0;
    Py_ssize_t num_done = 0;
    double now;
    while (1) {
        now = latest(ends, k);
        for (Py_ssize_t i = 0; i < k; i++) {
            exec_time[i] = ends[i] - round_start;
            scl[i] = (double)escale[ent[i]];
        }
        busy += gpu_seconds_c(exec_time, scl, k);
        account_tasks_c(ent, typ, k, members, steps, exec_time, scl, prices, priced, acc, acc_cols);
        num_done = credit_tasks_c(ent, typ, k, members, steps, exec_time, t, m, S, remaining, done);
        if (num_done || rounds == budget || next_arrival <= now
            || (need_update && (now - last_reset >= min_reset || last_reset == 0)))
            break;
        if (len_mt) memcpy(saved, mt, (size_t)len_mt * sizeof(int64_t));
        const int64_t *order = Q(a[ORDER]);
        if (len_mt) {
            shuffled_c(order, num_order, mt, order_buf);
            order = order_buf;
        }
        Py_ssize_t c = walk(&s, order, num_order, we, ww);
        if (c < 0) goto out;
        Py_ssize_t kept = 0;
        for (Py_ssize_t i = 0; i < c; i++)
            if (in_alloc[we[i]]) {
                ent[kept] = we[i];
                typ[kept] = ww[i];
                kept++;
            }
        if (!kept) {
            if (len_mt) memcpy(mt, saved, (size_t)len_mt * sizeof(int64_t));
            break;
        }
        k = kept;
        mark_started_c(ent, k, members, acc, acc_cols, now);
        run_tasks_c(ent, typ, k, members, etput, m, remaining, now, round_s, steps, finish, ends);
        round_start = now;
        rounds += 1;
    }
    {
        void *pd, *pf;
        PyObject *done_arr = new_array(num_done, 0, dt_i8, &pd);
        PyObject *finish_arr = done_arr ? new_array(num_done, 0, dt_f8, &pf) : NULL;
        if (finish_arr) {
            int64_t *dd = pd;
            double *ff = pf;
            for (Py_ssize_t j = 0; j < num_done; j++) {       /* the member's own finish (first match, row-major) */
                dd[j] = done[j];
                for (Py_ssize_t i = 0; i < k; i++) {
                    if (members[2 * ent[i]] == done[j]) { ff[j] = finish[2 * i]; break; }
                    if (members[2 * ent[i] + 1] == done[j]) { ff[j] = finish[2 * i + 1]; break; }
                }
            }
            result = Py_BuildValue("ddLOOd", now, round_start, rounds, done_arr, finish_arr, busy);
        }
        Py_XDECREF(done_arr);
        Py_XDECREF(finish_arr);
    }
out:
    PyMem_Free(ent); PyMem_Free(typ); PyMem_Free(we); PyMem_Free(ww); PyMem_Free(done); PyMem_Free(order_buf);
    PyMem_Free(saved); PyMem_Free(steps); PyMem_Free(finish); PyMem_Free(ends); PyMem_Free(exec_time);
    PyMem_Free(scl);
    release(a, NARR);
    release_walk(&s);
    return result;
}

/* The planned entries' GPU types index `cols` columns: one more than the largest type, or -1 if one is negative. */
static Py_ssize_t types_end(const Arr *gpu_type, Py_ssize_t k) {
    Py_ssize_t end = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (Q(*gpu_type)[i] < 0) return -1;
        if (Q(*gpu_type)[i] + 1 > end) end = Q(*gpu_type)[i] + 1;
    }
    return end;
}

static PyObject *gpu_seconds(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("gpu_seconds", nargs, 2)) return NULL;
    Arr a[2];
    memset(a, 0, sizeof a);
    PyObject *result = NULL;
    if (get(args[0], &a[0], 'd', 1, 0) || get(args[1], &a[1], 'd', 1, 0)) goto out;
    if (a[1].n0 < a[0].n0) {
        PyErr_SetString(PyExc_IndexError, "gpu_seconds: fewer GPU counts than times");
        goto out;
    }
    result = PyFloat_FromDouble(gpu_seconds_c(D(a[0]), D(a[1]), a[0].n0));
out:
    release(a, 2);
    return result;
}

static PyObject *account_tasks(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("account_tasks", nargs, 9)) return NULL;
    /* entry, gpu_type, members, steps, exec_time, scale, prices, priced, acc */
    Arr a[8];
    memset(a, 0, sizeof a);
    PyObject *result = NULL;
    int priced = PyObject_IsTrue(args[7]);
    if (priced < 0 || get(args[0], &a[0], 'q', 1, 0) || get(args[1], &a[1], 'q', 1, 0)
        || get(args[2], &a[2], 'q', 2, 0) || get(args[3], &a[3], 'd', 2, 0) || get(args[4], &a[4], 'd', 1, 0)
        || get(args[5], &a[5], 'd', 1, 0) || get(args[6], &a[6], 'd', 1, 0) || get(args[8], &a[7], 'd', 2, 1)
        || check_entries(&a[0], &a[2], a[7].n0))
        goto out;
    Py_ssize_t k = a[0].n0, end = types_end(&a[1], k);
    if (a[1].n0 != k || a[3].n0 < k || a[3].n1 != 2 || a[4].n0 < k || a[5].n0 < k || end < 0
        || a[7].n1 < 3 + end || (priced && a[6].n0 < end)) {
        PyErr_SetString(PyExc_IndexError, "account_tasks: arrays of inconsistent sizes");
        goto out;
    }
    account_tasks_c(Q(a[0]), Q(a[1]), k, Q(a[2]), D(a[3]), D(a[4]), D(a[5]), D(a[6]), priced, D(a[7]), a[7].n1);
    result = Py_NewRef(Py_None);
out:
    release(a, 8);
    return result;
}

static PyObject *credit_tasks(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("credit_tasks", nargs, 8)) return NULL;
    /* entry, gpu_type, members, steps, exec_time, t, S, remaining */
    Arr a[8];
    memset(a, 0, sizeof a);
    PyObject *result = NULL;
    int64_t *done = NULL;
    if (get(args[0], &a[0], 'q', 1, 0) || get(args[1], &a[1], 'q', 1, 0) || get(args[2], &a[2], 'q', 2, 0)
        || get(args[3], &a[3], 'd', 2, 0) || get(args[4], &a[4], 'd', 1, 0) || get(args[5], &a[5], 'd', 2, 1)
        || get(args[6], &a[6], 'd', 1, 1) || get(args[7], &a[7], 'd', 1, 1) || check_entries(&a[0], &a[2], a[7].n0))
        goto out;
    Py_ssize_t k = a[0].n0, end = types_end(&a[1], k);
    int64_t top = -1;                                   /* the largest planned entry, a row of t */
    for (Py_ssize_t i = 0; i < k; i++) top = Q(a[0])[i] > top ? Q(a[0])[i] : top;
    if (a[1].n0 != k || a[3].n0 < k || a[3].n1 != 2 || a[4].n0 < k || end < 0 || a[5].n1 < end
        || a[5].n0 <= top || a[6].n0 < end) {
        PyErr_SetString(PyExc_IndexError, "credit_tasks: arrays of inconsistent sizes");
        goto out;
    }
    done = PyMem_Malloc((size_t)(2 * k + 1) * sizeof(int64_t));
    if (!done) { PyErr_NoMemory(); goto out; }
    Py_ssize_t num = credit_tasks_c(Q(a[0]), Q(a[1]), k, Q(a[2]), D(a[3]), D(a[4]), D(a[5]), a[5].n1, D(a[6]),
                                    D(a[7]), done);
    result = int64_array(done, num);
out:
    PyMem_Free(done);
    release(a, 8);
    return result;
}

/* ---- the smaller kernels --------------------------------------------------------------------------------- */

static PyObject *run_tasks(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("run_tasks", nargs, 7)) return NULL;
    Arr a[5];
    memset(a, 0, sizeof a);
    PyObject *st = NULL, *fi = NULL, *en = NULL, *result = NULL;
    double now, round_s;
    if (get(args[0], &a[0], 'q', 1, 0) || get(args[1], &a[1], 'q', 1, 0) || get(args[2], &a[2], 'q', 2, 0)
        || get(args[3], &a[3], 'd', 3, 0) || get(args[4], &a[4], 'd', 1, 0) || as_double(args[5], &now)
        || as_double(args[6], &round_s) || check_entries(&a[0], &a[2], a[4].n0))
        goto out;
    Py_ssize_t k = a[0].n0, m = a[3].n1;
    if (a[1].n0 != k || a[3].n0 < a[2].n0 || a[3].n2 != 2) {
        PyErr_SetString(PyExc_TypeError, "run_tasks: arrays of inconsistent sizes");
        goto out;
    }
    for (Py_ssize_t i = 0; i < k; i++)
        if (Q(a[1])[i] < 0 || Q(a[1])[i] >= m) {
            PyErr_SetString(PyExc_IndexError, "run_tasks: a GPU type out of range");
            goto out;
        }
    void *ps, *pf, *pe;
    st = new_array(k, 2, dt_f8, &ps);
    fi = st ? new_array(k, 2, dt_f8, &pf) : NULL;
    en = fi ? new_array(k, 0, dt_f8, &pe) : NULL;
    if (!en) goto out;
    run_tasks_c(Q(a[0]), Q(a[1]), k, Q(a[2]), D(a[3]), m, D(a[4]), now, round_s, ps, pf, pe);
    result = PyTuple_Pack(3, st, fi, en);
out:
    Py_XDECREF(st); Py_XDECREF(fi); Py_XDECREF(en);
    release(a, 5);
    return result;
}

static PyObject *mark_started(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("mark_started", nargs, 4)) return NULL;
    Arr a[3];
    memset(a, 0, sizeof a);
    PyObject *result = NULL;
    double now;
    if (get(args[0], &a[0], 'q', 1, 0) || get(args[1], &a[1], 'q', 2, 0) || get(args[2], &a[2], 'd', 2, 1)
        || as_double(args[3], &now) || check_entries(&a[0], &a[1], a[2].n0))
        goto out;
    if (a[2].n1 < 1) {
        PyErr_SetString(PyExc_TypeError, "mark_started: no start column");
        goto out;
    }
    mark_started_c(Q(a[0]), a[0].n0, Q(a[1]), D(a[2]), a[2].n1, now);
    result = Py_NewRef(Py_None);
out:
    release(a, 3);
    return result;
}

/* codes_of: np.unique(values, return_inverse=True) of int64 values: positions sorted by value, one pass. */
static PyObject *codes_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("codes_of", nargs, 1)) return NULL;
    Arr v = {0};
    PyObject *distinct = NULL, *code = NULL, *result = NULL, *cut = NULL;
    int64_t *order = NULL, *buf = NULL;
    if (get(args[0], &v, 'q', 1, 0)) goto out;
    Py_ssize_t n = v.n0;
    order = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    buf = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!order || !buf) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < n; i++) order[i] = i;
    merge_sort(value_before, Q(v), order, buf, n);
    void *pd, *pc;
    distinct = new_array(n, 0, dt_i8, &pd);
    code = distinct ? new_array(n, 0, dt_i8, &pc) : NULL;
    if (!code) goto out;
    int64_t *d = pd, *c = pc, *vals = Q(v);
    Py_ssize_t k = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t x = vals[order[i]];
        if (k < 0 || x != d[k]) d[++k] = x;
        c[order[i]] = k;
    }
    cut = PySequence_GetSlice(distinct, 0, k + 1);
    if (cut) result = PyTuple_Pack(2, cut, code);
out:
    PyMem_Free(order);
    PyMem_Free(buf);
    Py_XDECREF(distinct); Py_XDECREF(code); Py_XDECREF(cut);
    release(&v, 1);
    return result;
}

static PyObject *las_program(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("las_program", nargs, 7)) return NULL;
    /* throughput, priority_weight, scale_factor, prop, capacity, template, x_cols */
    Arr a[7];
    memset(a, 0, sizeof a);
    PyObject *data = NULL, *h = NULL, *c = NULL, *result = NULL;
    if (get(args[0], &a[0], 'd', 2, 0) || get(args[1], &a[1], 'd', 1, 0) || get(args[2], &a[2], 'q', 1, 0)
        || get(args[3], &a[3], 'd', 1, 0) || get(args[4], &a[4], 'd', 1, 0) || get(args[5], &a[5], 'd', 1, 0)
        || get(args[6], &a[6], 'q', 1, 0))
        goto out;
    Py_ssize_t m = a[0].n0, n = a[0].n1, len = a[5].n0;
    if (a[1].n0 < m || a[2].n0 < m || a[3].n0 < m || a[4].n0 < n || a[6].n0 < m * n) {
        PyErr_SetString(PyExc_TypeError, "las_program: arrays of inconsistent sizes");
        goto out;
    }
    for (Py_ssize_t i = 0; i < m * n; i++)
        if (Q(a[6])[i] < 0 || Q(a[6])[i] + 2 >= len) {
            PyErr_SetString(PyExc_IndexError, "las_program: a column outside the template");
            goto out;
        }
    void *pd, *ph, *pc;
    data = new_array(len, 0, dt_f8, &pd);
    h = data ? new_array(2 * m + m * n + n, 0, dt_f8, &ph) : NULL;
    c = h ? new_array(m * n + 1, 0, dt_f8, &pc) : NULL;
    if (!c) goto out;
    double *dd = pd, *hh = ph, *cc = pc;
    const double *tput = D(a[0]), *weight = D(a[1]), *prop = D(a[3]), *capacity = D(a[4]);
    const int64_t *scale = Q(a[2]), *x_cols = Q(a[6]);
    memcpy(dd, D(a[5]), (size_t)len * sizeof(double));
    for (Py_ssize_t i = 0; i < m; i++) {
        double p = prop[i];
        double w = (1.0 / weight[i]) * (p > 0 ? 1.0 / p : 0.0);
        double s = (double)scale[i];
        for (Py_ssize_t j = 0; j < n; j++) {
            int64_t col = x_cols[j * m + i];
            dd[col] = -((tput[i * n + j] * w) * s);
            dd[col + 2] = s;
        }
    }
    memset(hh, 0, (size_t)(2 * m + m * n + n) * sizeof(double));
    for (Py_ssize_t j = 0; j < n; j++) hh[m + m * n + j] = capacity[j];
    for (Py_ssize_t i = m + m * n + n; i < 2 * m + m * n + n; i++) hh[i] = 1.0;
    memset(cc, 0, (size_t)(m * n + 1) * sizeof(double));
    cc[0] = 1.0;
    result = PyTuple_Pack(3, data, h, c);
out:
    Py_XDECREF(data); Py_XDECREF(h); Py_XDECREF(c);
    release(a, 7);
    return result;
}

static PyObject *single_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("single_rows", nargs, 3)) return NULL;
    Arr a[2];
    memset(a, 0, sizeof a);
    PyObject *out_arr = NULL;
    int64_t *row_of_slot = NULL;
    Py_ssize_t num_slots = PyLong_AsSsize_t(args[2]);
    if ((num_slots == -1 && PyErr_Occurred()) || get(args[0], &a[0], 'q', 2, 0) || get(args[1], &a[1], 'q', 1, 0)
        || check_members(&a[0], num_slots))
        goto out;
    row_of_slot = PyMem_Malloc((size_t)(num_slots > 0 ? num_slots : 1) * sizeof(int64_t));
    if (!row_of_slot) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < num_slots; i++) row_of_slot[i] = -1;
    const int64_t *members = Q(a[0]), *slots = Q(a[1]);
    for (Py_ssize_t r = 0; r < a[0].n0; r++)
        if (members[2 * r + 1] < 0)                 /* numba's negative index counts from the end */
            row_of_slot[members[2 * r] < 0 ? members[2 * r] + num_slots : members[2 * r]] = r;
    for (Py_ssize_t i = 0; i < a[1].n0; i++)
        if (slots[i] < 0 || slots[i] >= num_slots) {
            PyErr_SetString(PyExc_IndexError, "single_rows: a slot out of range");
            goto out;
        }
    void *po;
    out_arr = new_array(a[1].n0, 0, dt_i8, &po);
    if (out_arr)
        for (Py_ssize_t i = 0; i < a[1].n0; i++) ((int64_t *)po)[i] = row_of_slot[slots[i]];
out:
    PyMem_Free(row_of_slot);
    release(a, 2);
    return out_arr;
}

static PyObject *proportional_rates(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("proportional_rates", nargs, 2)) return NULL;
    Arr a[2];
    memset(a, 0, sizeof a);
    PyObject *out_arr = NULL;
    if (get(args[0], &a[0], 'd', 2, 0) || get(args[1], &a[1], 'd', 1, 0)) goto out;
    Py_ssize_t m = a[0].n0, n = a[0].n1;
    if (n < 1 || a[1].n0 < n) {
        PyErr_SetString(PyExc_TypeError, "proportional_rates: arrays of inconsistent sizes");
        goto out;
    }
    void *po;
    out_arr = new_array(m, 0, dt_f8, &po);
    if (out_arr) {
        const double *tput = D(a[0]), *row = D(a[1]);
        double *o = po;
        for (Py_ssize_t i = 0; i < m; i++) {
            double acc = tput[i * n] * row[0];
            for (Py_ssize_t j = 1; j < n; j++) acc = acc + tput[i * n + j] * row[j];
            o[i] = acc;
        }
    }
out:
    release(a, 2);
    return out_arr;
}

static PyMethodDef methods[] = {
    {"select_walk", (PyCFunction)(void (*)(void))select_walk, METH_FASTCALL, "kernels.select_walk in C"},
    {"quiet_rounds", (PyCFunction)(void (*)(void))quiet_rounds, METH_FASTCALL, "kernels.quiet_rounds in C"},
    {"run_tasks", (PyCFunction)(void (*)(void))run_tasks, METH_FASTCALL, "kernels.run_tasks in C"},
    {"gpu_seconds", (PyCFunction)(void (*)(void))gpu_seconds, METH_FASTCALL, "kernels.gpu_seconds in C"},
    {"account_tasks", (PyCFunction)(void (*)(void))account_tasks, METH_FASTCALL, "kernels.account_tasks in C"},
    {"credit_tasks", (PyCFunction)(void (*)(void))credit_tasks, METH_FASTCALL, "kernels.credit_tasks in C"},
    {"mark_started", (PyCFunction)(void (*)(void))mark_started, METH_FASTCALL, "kernels.mark_started in C"},
    {"codes_of", (PyCFunction)(void (*)(void))codes_of, METH_FASTCALL, "kernels.codes_of in C (int64 values)"},
    {"las_program", (PyCFunction)(void (*)(void))las_program, METH_FASTCALL, "kernels.las_program in C"},
    {"single_rows", (PyCFunction)(void (*)(void))single_rows, METH_FASTCALL, "kernels.single_rows in C"},
    {"proportional_rates", (PyCFunction)(void (*)(void))proportional_rates, METH_FASTCALL,
     "kernels.proportional_rates in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rounds", "Gavel's round kernels in C (kernels.py).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rounds(void) {
    PyObject *np = PyImport_ImportModule("numpy");
    if (np == NULL) return NULL;
    np_empty = PyObject_GetAttrString(np, "empty");
    dt_f8 = PyObject_GetAttrString(np, "float64");
    dt_i8 = PyObject_GetAttrString(np, "int64");
    Py_DECREF(np);
    if (!np_empty || !dt_f8 || !dt_i8) return NULL;
    return PyModule_Create(&module);
}
