/* Synergy's resumable first-fit placement stage (resources/placement_kernel.py) in C, so that a Synergy run does
 * not load numba's compiled code (about 0.4 CPU-s once per process, as much as the rest of a FIFO+tune run).
 *
 * The loops are placement_kernel.py's line for line, with the same floating-point operations in the same order
 * (no fused multiply-adds: setup.py compiles with -ffp-contract=off), so every placement, share and server's
 * free resources are bit for bit numba's and the Python stage's (tests/test_placement_kernel.py runs both). The
 * arguments are checked before anything is written: dtypes, C order, shapes, and every index the arrays hold
 * (slots, classes, servers); a wrong one is a TypeError or IndexError. The per-run arrays that CompiledPlacement
 * sizes (trail, saved lists, placed and demoted jobs, a server's job list) are checked at every write: running
 * out of them is an IndexError, never a write past their end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_arrays.h"

enum { PLACE, PLACE_MORE, DEMOTE, DEMOTE_MORE, SORT, SELF };              /* trail kinds */
enum { FREE, PLACED, DEMOTED, TRAIL, SAVED, PREV, CLEAN, BAD };          /* ints[] */
enum { IDEAL = 1, FAIR = 2 };                                            /* resources/pool.py */

typedef struct {
    const int64_t *gpus, *codes, *ids, *cap_g;
    const double *shares, *fair, *start;
    const char *adjust;
    int64_t *ints, *fg, *on, *on_len, *wk, *wn, *wlen, *st, *placed, *demoted, *prev, *t_i, *saved;
    double *fr, *sh, *t_f;
    Py_ssize_t num, width, span, rows, n_placed, n_demoted, n_saved, slots, classes;
    int64_t *ks, *ns, *buf_k, *buf_n;
} Stage;

static int overflow(const char *what) {
    PyErr_Format(PyExc_IndexError, "place_round: %s is full (CompiledPlacement sized it too small)", what);
    return -1;
}

static int bad(const char *message) {
    PyErr_Format(PyExc_IndexError, "place_round: %s", message);
    return -1;
}

static double positive(double x) { return x > 0.0 ? x : 0.0; }

/* First fit (ServerPool.first_fit); how many servers the job spans (in ks/ns), 0 if it does not fit. */
static Py_ssize_t fit(Stage *p, double c, double m, double s, int64_t g, Py_ssize_t start) {
    double *fr = p->fr;
    if (g == 1) {
        for (Py_ssize_t k = start; k < p->num; k++)
            if (p->fg[k] && fr[3 * k] >= c && fr[3 * k + 1] >= m && fr[3 * k + 2] >= s) {
                p->ks[0] = k;
                p->ns[0] = 1;
                return 1;
            }
        return 0;
    }
    int64_t need = g;
    Py_ssize_t used = 0;
    for (Py_ssize_t k = 0; k < p->num; k++) {
        int64_t limit = p->fg[k] < need ? p->fg[k] : need, n = 0;
        double hc = 0.0, hm = 0.0, hs = 0.0;
        while (n < limit && fr[3 * k] - hc >= c && fr[3 * k + 1] - hm >= m && fr[3 * k + 2] - hs >= s) {
            hc += c;
            hm += m;
            hs += s;
            n++;
        }
        if (n) {
            p->ks[used] = k;
            p->ns[used] = n;
            used++;
            need -= n;
            if (!need) return used;
        }
    }
    return 0;
}

/* One undo row; its index, or -1 (IndexError set) when the trail is full. */
static Py_ssize_t record(Stage *p, int64_t kind, int64_t pos, int64_t job, int64_t k, int64_t aux, double f0,
                         double f1, double f2) {
    int64_t r = p->ints[TRAIL];
    if (r >= p->rows) return overflow("the undo trail");
    int64_t *ti = p->t_i + 5 * r;
    double *tf = p->t_f + 6 * r;
    ti[0] = kind, ti[1] = pos, ti[2] = job, ti[3] = k, ti[4] = aux;
    tf[0] = f0, tf[1] = f1, tf[2] = f2;
    p->ints[TRAIL] = r + 1;
    return r;
}

static int commit(Stage *p, int64_t s, Py_ssize_t count, double c, double m, double ss, int64_t status,
                  int64_t pos) {
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t k = p->ks[i], n = p->ns[i];
        double *fr = p->fr + 3 * k;
        if (record(p, i == 0 ? PLACE : PLACE_MORE, pos, s, k, n, fr[0], fr[1], fr[2]) < 0) return -1;
        if (p->on_len[k] >= p->width) return overflow("a server's job list");
        p->fg[k] -= n;
        fr[0] = fr[0] - c * n;
        fr[1] = fr[1] - m * n;
        fr[2] = fr[2] - ss * n;
        p->on[k * p->width + p->on_len[k]] = s;
        p->on_len[k] += 1;
        p->ints[FREE] -= n;
        p->wk[s * p->span + i] = k;
        p->wn[s * p->span + i] = n;
    }
    p->wlen[s] = count;
    p->sh[3 * s] = c, p->sh[3 * s + 1] = m, p->sh[3 * s + 2] = ss;
    p->st[s] = status;
    if (p->ints[PLACED] >= p->n_placed) return overflow("the placed jobs");
    p->placed[p->ints[PLACED]] = s;
    p->ints[PLACED] += 1;
    return 0;
}

/* Undo every change made while placing the jobs at `position` and after; -1 (IndexError) on a trail row that
 * names no server, slot or saved list (the state was not the kernel's). */
static int undo_to(Stage *p, int64_t position) {
    int64_t freed = 0, r = p->ints[TRAIL];
    while (r > 0 && p->t_i[5 * (r - 1) + 1] >= position) {
        r--;
        const int64_t *ti = p->t_i + 5 * r;
        const double *tf = p->t_f + 6 * r;
        int64_t kind = ti[0], job = ti[2], k = ti[3], aux = ti[4];
        if ((kind != SELF && (k < 0 || k >= p->num)) || (kind != SORT && (job < 0 || job >= p->slots))
            || (kind == SORT && (p->ints[SAVED] < 1 || aux < 0 || aux > p->width))
            || ((kind == PLACE || kind == PLACE_MORE) && p->on_len[k] < 1))
            return bad("the undo trail names no server, slot or saved list");
        if (kind == PLACE || kind == PLACE_MORE) {
            p->fg[k] += aux;
            p->fr[3 * k] = tf[0], p->fr[3 * k + 1] = tf[1], p->fr[3 * k + 2] = tf[2];
            p->on_len[k] -= 1;
            freed += aux;
            if (kind == PLACE) {
                p->ints[PLACED] -= 1;
                p->st[job] = 0;
            }
        } else if (kind == DEMOTE || kind == DEMOTE_MORE) {
            p->fr[3 * k] = tf[0], p->fr[3 * k + 1] = tf[1], p->fr[3 * k + 2] = tf[2];
            if (kind == DEMOTE) {
                p->sh[3 * job] = tf[3], p->sh[3 * job + 1] = tf[4], p->sh[3 * job + 2] = tf[5];
                p->st[job] = aux & 3;
                if (aux >> 2) p->ints[DEMOTED] -= 1;
            }
        } else if (kind == SORT) {
            p->ints[SAVED] -= 1;
            memcpy(p->on + k * p->width, p->saved + p->ints[SAVED] * p->width, (size_t)aux * sizeof(int64_t));
        } else {
            p->ints[DEMOTED] -= 1;
        }
    }
    p->ints[TRAIL] = r;
    p->ints[FREE] += freed;
    return 0;
}

/* ServerPool.underutilized: the first server with g free GPUs for g > 1, else the servers with the fewest free GPUs
 * (>= 1; ties to the lowest id) covering g, into buf_k/buf_n. Free GPUs are at most `width`: one pass per value
 * gives numpy's stable argsort order. */
static Py_ssize_t underutilized(Stage *p, int64_t g) {
    if (g > 1)
        for (Py_ssize_t k = 0; k < p->num; k++)
            if (p->fg[k] >= g) {
                p->buf_k[0] = k;
                p->buf_n[0] = g;
                return 1;
            }
    Py_ssize_t count = 0;
    for (int64_t v = 1; v <= p->width && g > 0; v++)
        for (Py_ssize_t k = 0; k < p->num && g > 0; k++) {
            if (p->fg[k] != v) continue;
            p->buf_k[count] = k;
            p->buf_n[count] = g >= v ? v : g;
            g -= p->buf_n[count];
            count++;
        }
    return count;
}

/* (servers spanned, -CPUs per GPU, -GB per GPU) of x sorts before y's. */
static int sort_key_before(const Stage *p, int64_t x, int64_t y) {
    if (p->wlen[x] != p->wlen[y]) return p->wlen[x] < p->wlen[y];
    if (-p->sh[3 * x] != -p->sh[3 * y]) return -p->sh[3 * x] < -p->sh[3 * y];
    return -p->sh[3 * x + 1] < -p->sh[3 * y + 1];
}

static int64_t gpus_on(const Stage *p, int64_t job, int64_t k) {
    for (int64_t i = 0; i < p->wlen[job]; i++)
        if (p->wk[job * p->span + i] == k) return p->wn[job * p->span + i];
    return 0;
}

/* TUNE's peer demotion; 1 done, 0 a demotion overflowed a server (ints[BAD]), -1 an error. */
static int demote_peers(Stage *p, int64_t pos, double c, double m, double ss, int64_t g) {
    const double *fair = p->fair;
    Py_ssize_t spans = underutilized(p, g);
    for (Py_ssize_t t = 0; t < spans; t++) {
        int64_t k = p->buf_k[t], n = p->buf_n[t];
        double ratio = (double)n / (double)g, *fr = p->fr + 3 * k;
        double need0 = positive(c * g * ratio - fr[0]);
        double need1 = positive(m * g * ratio - fr[1]);
        double need2 = positive(ss * g * ratio - fr[2]);
        if (!(need0 != 0 || need1 != 0 || need2 != 0)) continue;
        int64_t size = p->on_len[k], *on = p->on + k * p->width;
        if (p->ints[SAVED] >= p->n_saved) return overflow("the saved job lists");
        memcpy(p->saved + p->ints[SAVED] * p->width, on, (size_t)size * sizeof(int64_t));
        p->ints[SAVED] += 1;
        if (record(p, SORT, pos, -1, k, size, 0.0, 0.0, 0.0) < 0) return -1;
        for (int64_t i = 1; i < size; i++) {                 /* stable insertion sort, as list.sort */
            int64_t x = on[i], j = i - 1;
            while (j >= 0 && sort_key_before(p, x, on[j])) {
                on[j + 1] = on[j];
                j--;
            }
            on[j + 1] = x;
        }
        int64_t chosen = 0;
        for (int64_t i = 0; i < size; i++) {                 /* peers until their excess covers the need */
            int64_t q_job = on[i];
            chosen++;
            int64_t q = gpus_on(p, q_job, k);
            const double *s = p->sh + 3 * q_job;
            double d0 = positive(need0 - positive(s[0] * q - fair[0] * q));
            double d1 = positive(need1 - positive(s[1] * q - fair[1] * q));
            double d2 = positive(need2 - positive(s[2] * q - fair[2] * q));
            if (d0 == 0 && d1 == 0 && d2 == 0) break;
            need0 = d0, need1 = d1, need2 = d2;
        }
        for (int64_t i = 0; i < chosen; i++) {
            int64_t peer = on[i], code = p->codes[peer];
            if (code < 0 || code >= p->classes) return bad("a placed job's class is out of range");
            double c1, m1, s1;
            if (p->adjust[code]) c1 = fair[0], m1 = fair[1], s1 = fair[2];
            else c1 = p->shares[3 * code], m1 = p->shares[3 * code + 1], s1 = p->shares[3 * code + 2];
            double *s = p->sh + 3 * peer, o0 = s[0], o1 = s[1], o2 = s[2];
            int64_t first = p->ints[TRAIL];
            int ok = 1;
            for (int64_t w = 0; w < p->wlen[peer]; w++) {     /* release the old share, then take the new one */
                int64_t q = p->wk[peer * p->span + w], nq = p->wn[peer * p->span + w];
                double *f = p->fr + 3 * q;
                if (record(p, w == 0 ? DEMOTE : DEMOTE_MORE, pos, peer, q, 0, f[0], f[1], f[2]) < 0) return -1;
                f[0] = f[0] + o0 * nq;
                f[1] = f[1] + o1 * nq;
                f[2] = f[2] + o2 * nq;
                f[0] = f[0] - c1 * nq;
                f[1] = f[1] - m1 * nq;
                f[2] = f[2] - s1 * nq;
                ok = ok && f[0] >= 0.0 && f[1] >= 0.0 && f[2] >= 0.0;
            }
            s[0] = c1, s[1] = m1, s[2] = s1;
            if (!ok) {
                p->ints[BAD] = k;
                return 0;
            }
            p->t_f[6 * first + 3] = o0, p->t_f[6 * first + 4] = o1, p->t_f[6 * first + 5] = o2;
            p->t_i[5 * first + 4] = p->st[peer] | (p->adjust[code] ? 4 : 0);
            p->st[peer] = FAIR;
            if (p->adjust[code]) {
                if (p->ints[DEMOTED] >= p->n_demoted) return overflow("the demoted jobs");
                p->demoted[p->ints[DEMOTED]] = peer;
                p->ints[DEMOTED] += 1;
            }
        }
    }
    return 1;
}

/* place_round's loop after its checks (see placement_kernel.py); the positions examined, or -1, -2 as there, or
 * -4 with an error set. */
static int64_t run(Stage *p, const int64_t *order, Py_ssize_t n_order, int64_t mechanism, int64_t *ptr,
                   Py_ssize_t classes) {
    int64_t *ints = p->ints;
    Py_ssize_t n = ints[PREV] < n_order ? ints[PREV] : n_order, r = 0;
    while (r < n && p->prev[r] == p->ids[order[r]]) r++;
    if (r == 0) {
        if (!ints[CLEAN]) {                                  /* every lease ended: all servers free */
            int64_t total = 0;
            for (Py_ssize_t k = 0; k < p->num; k++) total += p->fg[k] = p->cap_g[k];
            memcpy(p->fr, p->start, (size_t)p->num * 3 * sizeof(double));
            memset(p->on_len, 0, (size_t)p->num * sizeof(int64_t));
            ints[FREE] = total;
            ints[PLACED] = ints[DEMOTED] = ints[TRAIL] = ints[SAVED] = ints[PREV] = 0;
        }
    } else if (undo_to(p, r)) {
        return -4;
    }
    ints[CLEAN] = 0;
    memset(ptr, 0, (size_t)classes * sizeof(int64_t));     /* per class: no one-GPU search before this server */
    int64_t placed_status = mechanism == 0 ? FAIR : IDEAL;
    Py_ssize_t i = r;
    while (i < n_order && ints[FREE]) {
        int64_t s = order[i], pos = i;
        i++;
        int64_t g = p->gpus[s];
        if (g > ints[FREE]) continue;
        int64_t code = p->codes[s];
        double c, m, ss;
        if (mechanism == 0) c = p->fair[0], m = p->fair[1], ss = p->fair[2];
        else c = p->shares[3 * code], m = p->shares[3 * code + 1], ss = p->shares[3 * code + 2];
        Py_ssize_t count = fit(p, c, m, ss, g, g == 1 ? ptr[code] : 0);
        if (count) {
            if (commit(p, s, count, c, m, ss, placed_status, pos)) return -4;
            if (g == 1) ptr[code] = p->ks[0];
            continue;
        }
        if (g == 1) ptr[code] = p->num;
        if (mechanism != 2) continue;                        /* greedy skips the job */
        int64_t status = IDEAL;
        if (p->adjust[code]) {                               /* self-demotion to the fair share */
            c = p->fair[0], m = p->fair[1], ss = p->fair[2];
            status = FAIR;
        }
        count = fit(p, c, m, ss, g, 0);
        if (!count) {
            memset(ptr, 0, (size_t)classes * sizeof(int64_t));   /* demotions free resources: from server 0 */
            int done = demote_peers(p, pos, c, m, ss, g);
            if (done < 0) return -4;
            if (!done) return -2;
            count = fit(p, c, m, ss, g, 0);
            if (!count) {
                ints[BAD] = g;
                return -1;
            }
        }
        if (commit(p, s, count, c, m, ss, status, pos)) return -4;
        if (status == FAIR) {
            if (ints[DEMOTED] >= p->n_demoted) {
                overflow("the demoted jobs");
                return -4;
            }
            p->demoted[ints[DEMOTED]] = s;
            ints[DEMOTED] += 1;
            if (record(p, SELF, pos, s, -1, 0, 0.0, 0.0, 0.0) < 0) return -4;
        }
    }
    for (Py_ssize_t q = r; q < i; q++) p->prev[q] = p->ids[order[q]];
    ints[PREV] = i;
    return i;
}

/* Shapes and every index the arguments hold, before anything is written. */
static int check(Stage *p, Arr *a, Py_ssize_t slots, Py_ssize_t classes) {
    const int64_t *order = Q(a[0]);
    Py_ssize_t n_order = a[0].n0;
    if (a[1].n0 != slots || a[2].n0 != slots || a[3].n0 < slots) return bad("gpus, codes and ids differ in size");
    if (a[4].n1 != 3 || a[5].n0 != classes || a[6].n0 != 3) return bad("shares, adjust or fair has a wrong shape");
    if (a[8].n0 != 8) return bad("ints needs 8 entries");
    Py_ssize_t num = a[9].n0;
    if (a[10].n0 != num || a[10].n1 != 3 || a[11].n0 != num || a[12].n0 != num || a[12].n1 != 3
        || a[13].n0 != num || a[14].n0 != num)
        return bad("the per-server arrays differ in size");
    if (a[15].n0 < slots || a[16].n0 != a[15].n0 || a[16].n1 != a[15].n1 || a[17].n0 < slots || a[18].n0 < slots
        || a[18].n1 != 3 || a[19].n0 < slots)
        return bad("the per-slot arrays are smaller than the slots");
    if (a[22].n0 < n_order) return bad("prev is smaller than the order");
    if (a[23].n1 != 5 || a[24].n1 != 6 || a[24].n0 != a[23].n0 || a[25].n1 != a[13].n1)
        return bad("the trail or the saved lists have a wrong shape");
    for (Py_ssize_t q = 0; q < n_order; q++) {
        int64_t s = order[q];
        if (s < 0 || s >= slots) return bad("a slot in order is out of range");
        if (p->codes[s] < 0 || p->codes[s] >= classes) return bad("a job's class is out of range");
        if (p->gpus[s] < 1) return bad("a job needs at least one GPU");
    }
    const int64_t *ints = p->ints;
    for (int i = 0; i < 8; i++)
        if (ints[i] < 0) return bad("ints holds a negative count");
    if (ints[PREV] > a[22].n0 || ints[PLACED] > a[20].n0 || ints[DEMOTED] > a[21].n0 || ints[TRAIL] > a[23].n0
        || ints[SAVED] > a[25].n0)
        return bad("ints counts more than its arrays hold");
    for (Py_ssize_t k = 0; k < num; k++)
        if (p->on_len[k] < 0 || p->on_len[k] > a[13].n1 || p->fg[k] < 0 || p->fg[k] > a[13].n1
            || p->cap_g[k] < 0 || p->cap_g[k] > a[13].n1)
            return bad("a server holds more GPUs or jobs than its list's width");
    return 0;
}

/* place_round(order, gpus, codes, ids, shares, adjust, fair, mechanism, ints, fg, fr, cap_g, start, on, on_len, wk,
 * wn, wlen, sh, st, placed, demoted, prev, t_i, t_f, saved): placement_kernel.place_round. */
static PyObject *place_round(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (wrong_count("place_round", nargs, 26)) return NULL;
    static const char kinds[] = "qqqqd?d-qqdqdqqqqqdqqqqqdq";
    static const char dims[] = {1, 1, 1, 1, 2, 1, 1, 0, 1, 1, 2, 1, 2, 2, 1, 2, 2, 1, 2, 1, 1, 1, 1, 2, 2, 2};
    static const char writes[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    Arr a[26];
    memset(a, 0, sizeof a);
    PyObject *result = NULL;
    int64_t *scratch = NULL;
    for (int i = 0; i < 26; i++)
        if (i != 7 && get(args[i], &a[i], kinds[i], dims[i], writes[i])) goto out;
    int64_t mechanism = PyLong_AsLongLong(args[7]);
    if (mechanism == -1 && PyErr_Occurred()) goto out;
    if (mechanism < 0 || mechanism > 2) {
        PyErr_SetString(PyExc_ValueError, "place_round: mechanism is 0 (fair), 1 (greedy) or 2 (tune)");
        goto out;
    }
    Stage p = {
        .gpus = Q(a[1]), .codes = Q(a[2]), .ids = Q(a[3]), .shares = D(a[4]), .adjust = B(a[5]), .fair = D(a[6]),
        .ints = Q(a[8]), .fg = Q(a[9]), .fr = D(a[10]), .cap_g = Q(a[11]), .start = D(a[12]), .on = Q(a[13]),
        .on_len = Q(a[14]), .wk = Q(a[15]), .wn = Q(a[16]), .wlen = Q(a[17]), .sh = D(a[18]), .st = Q(a[19]),
        .placed = Q(a[20]), .demoted = Q(a[21]), .prev = Q(a[22]), .t_i = Q(a[23]), .t_f = D(a[24]),
        .saved = Q(a[25]), .num = a[9].n0, .width = a[13].n1, .span = a[15].n1, .rows = a[23].n0,
        .n_placed = a[20].n0, .n_demoted = a[21].n0, .n_saved = a[25].n0, .slots = a[1].n0, .classes = a[4].n0,
    };
    Py_ssize_t slots = p.slots, classes = p.classes, n_order = a[0].n0;
    if (check(&p, a, slots, classes)) goto out;
    const int64_t *order = Q(a[0]);
    int64_t got;
    for (Py_ssize_t q = 0; q < n_order; q++)
        if (p.gpus[order[q]] > p.span) {                     /* wider than the per-slot arrays: before any change */
            p.ints[BAD] = p.gpus[order[q]];
            result = PyLong_FromLongLong(-3);
            goto out;
        }
    scratch = PyMem_Malloc(((size_t)classes + 4 * (size_t)(p.num ? p.num : 1)) * sizeof(int64_t));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    p.ks = scratch + classes, p.ns = p.ks + p.num, p.buf_k = p.ns + p.num, p.buf_n = p.buf_k + p.num;
    got = run(&p, order, n_order, mechanism, scratch, classes);
    if (got != -4) result = PyLong_FromLongLong(got);
out:
    PyMem_Free(scratch);
    release(a, 26);
    return result;
}

static PyMethodDef methods[] = {
    {"place_round", (PyCFunction)(void (*)(void))place_round, METH_FASTCALL, "placement_kernel.place_round in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_placement",
                                    "Synergy's first-fit placement stage in C (placement_kernel.py).", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__placement(void) { return PyModule_Create(&module); }
