/* Arrays through the buffer protocol for the project's C kernels (compiled/_rounds.c, resources/_placement.c): each
 * argument is checked for C order, dtype (float64 'd', int64 'q', bool '?') and dimension before a kernel reads it.
 */
#ifndef HETSCHED_ARRAYS_H
#define HETSCHED_ARRAYS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    Py_buffer view;
    int held;
    Py_ssize_t n0, n1, n2;          /* shape (1 where the array has fewer dimensions) */
} Arr;

#define D(a) ((double *)(a).view.buf)
#define Q(a) ((int64_t *)(a).view.buf)
#define B(a) ((char *)(a).view.buf)

static int kind_of(const char *fmt) {
    if (fmt == NULL) return 'B';
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    if (fmt[1] != '\0') return 0;
    switch (fmt[0]) {
        case 'd': return 'd';
        case 'q': case 'l': return 'q';
        case '?': return '?';
        default: return 0;
    }
}

/* kind: 'd' float64, 'q' int64, '?' bool. 0 on success; TypeError otherwise. */
static int get(PyObject *o, Arr *a, int kind, int ndim, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    a->held = 0;
    if (PyObject_GetBuffer(o, &a->view, flags) != 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "a C-contiguous array is needed");
        return -1;
    }
    a->held = 1;
    int k = kind_of(a->view.format);
    Py_ssize_t size = kind == '?' ? 1 : 8;
    if (k != kind || a->view.itemsize != size || a->view.ndim != ndim) {
        PyErr_SetString(PyExc_TypeError, "an array of another dtype or dimension than the kernel's");
        return -1;
    }
    a->n0 = ndim > 0 ? a->view.shape[0] : 1;
    a->n1 = ndim > 1 ? a->view.shape[1] : 1;
    a->n2 = ndim > 2 ? a->view.shape[2] : 1;
    return 0;
}

static void release(Arr *arrs, int count) {
    for (int i = 0; i < count; i++)
        if (arrs[i].held) {
            PyBuffer_Release(&arrs[i].view);
            arrs[i].held = 0;
        }
}

static int wrong_count(const char *kernel, Py_ssize_t nargs, Py_ssize_t want) {
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", kernel, want, nargs);
    return -1;
}

#endif
