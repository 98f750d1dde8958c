/*
 * _cpass: passes over a scope's nodes in C: the graph rules' one pass (onemodel.ir.graph_rules,
 * ONNX Part 1, Clauses 7.3 and 7.5), the binding of nodes to definitions of the operator checks
 * (onemodel.validation.operators, Clauses 10.4 and 14.3) and the value_info entries of
 * inference's annotate (onemodel.inference, Clause 9); and the deep copy of records.
 *
 * This module is an optional accelerator. Its behaviour is specified by the pure-Python code
 * it replaces (graph_rules._in_order_python, the walk in operators.bound_nodes, the loop of
 * inference.annotate): the same results and the same changes to the arguments. Only the speed
 * differs. It is used when it is built and ``ONEMODEL_PURE_PYTHON=1`` is not set
 * (onemodel.ir.accelerator.passes).
 *
 * Interface (called through onemodel.ir.accelerator only):
 *
 *   setup(Node, ValueInfo)
 *       Looks up the slot offsets of ``domain``, ``inputs``, ``outputs``, ``attributes`` and
 *       ``op_type`` of the IR's node record class and of the five slots of its ValueInfo
 *       record. Raises TypeError when one is not a plain slot, or ValueInfo has others (the
 *       callers then keep the Python code).
 *
 *   in_order(nodes, defs, outer, admit) -> (read, held) or None
 *       ``nodes`` a list of Node records, ``defs`` the scope's ``{name: index}`` (-1 for a graph
 *       input or initializer), ``outer`` the enclosing scopes' dicts (innermost first),
 *       ``admit(domain)`` whether a node's domain is imported (called once per distinct
 *       spelling). The common case, reporting nothing: every domain imported, every node
 *       output a new name, every non-empty input defined before its node, here or in an
 *       enclosing scope. Then every node output is in ``defs`` (its node's index) and the
 *       result is ``(names read from outer, indices of the nodes with attributes)``. Otherwise
 *       ``defs`` is left as it was and the result is None (the caller walks the nodes rule by
 *       rule). A record whose fields are not what the reader makes (a list of str names, a
 *       str or None domain, a list of attributes) also gives None: the rule-by-rule walk
 *       handles every value.
 *
 *   bound(nodes, path, cache, bind, out, sub)
 *       The walk of validation.operators.bound_nodes over one node list: for each node with an
 *       op_type, ``(path, index, node) + binding`` is appended to ``out``, the binding being
 *       ``cache[op_type]`` (domain None) or ``cache[(domain, op_type)]``, else
 *       ``bind(op_type, domain)`` (which fills the cache); then, for a node with attributes,
 *       ``sub(index, node)`` (the caller walks its subgraphs: each node comes before the nodes
 *       of its subgraphs).
 *
 *   annotate(nodes, have, values, by_id, resolve) -> list of ValueInfo
 *       The loop of onemodel.inference.annotate over one graph's nodes: for each non-empty
 *       node output not in the set ``have`` with a Value in ``values``, its Type record is
 *       ``by_id[id(value)]``, else ``resolve(value)`` (which fills ``by_id``; None: no entry);
 *       a ValueInfo(name, type) is made as ValueInfo.__new__ and the five slots make it (no
 *       doc_string, no metadata_props, no unknown fields) and the name added to ``have``.
 *
 *   setup_copy(plans), copy(record) -> record
 *       Record.copy(deep=True) without running Python: ``plans`` lists each record class
 *       with every one of its slots and how the copy treats it (shared; a record, copied; a
 *       list of records, copied; a list of str, bytes or int, copied as a list). Iterative
 *       (records nested any depth deep). A record of a class without a plan raises
 *       LookupError (the caller copies in Python).
 *
 * Records of another class than Node (a subclass) are read through their attributes, as
 * Python reads them. The GIL is held throughout; no Python code runs but the callbacks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#include "_cslots.h"

static PyTypeObject *g_node = NULL;
static Py_ssize_t off_domain = -1, off_inputs = -1, off_outputs = -1, off_attributes = -1,
                  off_op_type = -1;
static PyObject *s_domain, *s_inputs, *s_outputs, *s_attributes, *s_op_type;
/* The ValueInfo record class and the offsets of its slots (annotate). */
enum { VI_NAME, VI_TYPE, VI_DOC, VI_META, VI_UNKNOWN, VI_N };
static PyTypeObject *g_vi = NULL;
static Py_ssize_t vi_off[VI_N];

static PyObject *
cpass_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "setup(Node, ValueInfo)");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)args[0], *v = (PyTypeObject *)args[1];
    Py_ssize_t a = slot_offset(t, s_domain), b = slot_offset(t, s_inputs),
               c = slot_offset(t, s_outputs), d = slot_offset(t, s_attributes),
               e = slot_offset(t, s_op_type);
    if (a < 0 || b < 0 || c < 0 || d < 0 || e < 0)
        return NULL;
    static const char *const vi_names[VI_N] = {"name", "type", "doc_string", "metadata_props",
                                               "unknown"};
    Py_ssize_t off[VI_N];
    for (int k = 0; k < VI_N; k++) {
        PyObject *n = PyUnicode_InternFromString(vi_names[k]);
        if (n == NULL)
            return NULL;
        off[k] = slot_offset(v, n);
        Py_DECREF(n);
        if (off[k] < 0)
            return NULL;
    }
    /* every slot of the record class must be one of these (tp_alloc leaves the others unset) */
    if (v->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + VI_N * sizeof(PyObject *))) {
        PyErr_SetString(PyExc_TypeError, "ValueInfo has other slots than annotate sets");
        return NULL;
    }
    Py_XSETREF(g_node, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(g_vi, (PyTypeObject *)Py_NewRef(args[1]));
    off_domain = a, off_inputs = b, off_outputs = c, off_attributes = d, off_op_type = e;
    memcpy(vi_off, off, sizeof off);
    Py_RETURN_NONE;
}

/* Field ``off`` (attribute ``name``) of ``node``: a new reference, NULL with an error set (an
 * unset slot raises AttributeError, as Python's read does). */
static PyObject *
field(PyObject *node, Py_ssize_t off, PyObject *name)
{
    if (Py_IS_TYPE(node, g_node)) {
        PyObject *v = *(PyObject **)((char *)node + off);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(node, name);
}

/* Whether ``n`` (a str) is a key of one of the dicts of ``outer``: 1, 0, -1 on error. */
static int
in_outer(PyObject *outer, PyObject *n)
{
    Py_ssize_t k = PyList_GET_SIZE(outer);
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *scope = PyList_GET_ITEM(outer, j);
        int r = PyDict_Check(scope) ? PyDict_Contains(scope, n) : PySequence_Contains(scope, n);
        if (r != 0)
            return r;
    }
    return 0;
}

/* Remove from ``defs`` the outputs of nodes[0..last] it maps to a node (an index >= 0), as
 * the Python pass undoes its additions. 0, or -1 on error. */
static int
undo(PyObject *nodes, Py_ssize_t last, PyObject *defs)
{
    for (Py_ssize_t i = 0; i <= last; i++) {
        PyObject *outs = field(PyList_GET_ITEM(nodes, i), off_outputs, s_outputs);
        if (outs == NULL)
            return -1;
        if (!PyList_Check(outs)) {
            Py_DECREF(outs);
            continue;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(outs); k++) {
            PyObject *o = PyList_GET_ITEM(outs, k);
            if (!PyUnicode_Check(o) || PyUnicode_GET_LENGTH(o) == 0)
                continue;
            PyObject *p = PyDict_GetItemWithError(defs, o);
            if (p == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(outs);
                    return -1;
                }
                continue;
            }
            if (PyLong_Check(p) && PyLong_AsSsize_t(p) >= 0 && PyDict_DelItem(defs, o) < 0) {
                Py_DECREF(outs);
                return -1;
            }
        }
        Py_DECREF(outs);
    }
    return 0;
}

enum { PASS_OK = 1, PASS_NOT = 0, PASS_ERR = -1 };

/* One node: its domain admitted, its inputs defined (outer reads appended to ``read``), its
 * outputs added to ``defs``, its index to ``held`` when it has attributes. */
static int
one(PyObject *node, Py_ssize_t i, PyObject *defs, PyObject *outer, PyObject *admit,
    PyObject *imported, PyObject *read, PyObject *held)
{
    int status = PASS_ERR;
    PyObject *dom = NULL, *ins = NULL, *outs = NULL, *attrs = NULL, *idx = NULL;
    if ((dom = field(node, off_domain, s_domain)) == NULL)
        goto done;
    if (dom != Py_None && !PyUnicode_CheckExact(dom)) {
        status = PASS_NOT;
        goto done;
    }
    int known = PySet_Contains(imported, dom);
    if (known < 0)
        goto done;
    if (!known) {
        PyObject *r = PyObject_CallOneArg(admit, dom);
        if (r == NULL)
            goto done;
        int yes = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (yes < 0)
            goto done;
        if (!yes) {
            status = PASS_NOT;
            goto done;
        }
        if (PySet_Add(imported, dom) < 0)
            goto done;
    }
    if ((ins = field(node, off_inputs, s_inputs)) == NULL ||
        (outs = field(node, off_outputs, s_outputs)) == NULL ||
        (attrs = field(node, off_attributes, s_attributes)) == NULL)
        goto done;
    if (!PyList_CheckExact(ins) || !PyList_CheckExact(outs) || !PyList_CheckExact(attrs)) {
        status = PASS_NOT;
        goto done;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ins); k++) {
        PyObject *n = PyList_GET_ITEM(ins, k);
        if (!PyUnicode_CheckExact(n)) {
            status = PASS_NOT;
            goto done;
        }
        if (PyUnicode_GET_LENGTH(n) == 0)
            continue;
        int r = PyDict_Contains(defs, n);
        if (r < 0)
            goto done;
        if (r)
            continue;
        r = in_outer(outer, n);
        if (r < 0)
            goto done;
        if (!r) {
            status = PASS_NOT;
            goto done;
        }
        if (PyList_Append(read, n) < 0)
            goto done;
    }
    if ((idx = PyLong_FromSsize_t(i)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(outs); k++) {
        PyObject *o = PyList_GET_ITEM(outs, k);
        if (!PyUnicode_CheckExact(o)) {
            status = PASS_NOT;
            goto done;
        }
        if (PyUnicode_GET_LENGTH(o) == 0)
            continue;
        int r = PyDict_Contains(defs, o);
        if (r < 0)
            goto done;
        if (r) {
            status = PASS_NOT;
            goto done;
        }
        if (PyDict_SetItem(defs, o, idx) < 0)
            goto done;
    }
    if (PyList_GET_SIZE(attrs) && PyList_Append(held, idx) < 0)
        goto done;
    status = PASS_OK;
done:
    Py_XDECREF(dom);
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    Py_XDECREF(attrs);
    Py_XDECREF(idx);
    return status;
}

static PyObject *
cpass_in_order(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[0]) || !PyDict_CheckExact(args[1]) ||
        !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "in_order(nodes: list, defs: dict, outer: list, admit)");
        return NULL;
    }
    if (g_node == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cpass.setup was not called");
        return NULL;
    }
    PyObject *nodes = args[0], *defs = args[1], *outer = args[2], *admit = args[3];
    PyObject *imported = PySet_New(NULL), *read = PyList_New(0), *held = PyList_New(0);
    PyObject *result = NULL;
    if (imported == NULL || read == NULL || held == NULL)
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(nodes), i;
    int status = PASS_OK;
    for (i = 0; i < n && status == PASS_OK; i++) {
        PyObject *node = Py_NewRef(PyList_GET_ITEM(nodes, i));
        status = one(node, i, defs, outer, admit, imported, read, held);
        Py_DECREF(node);
    }
    if (status == PASS_ERR)
        goto done;
    if (status == PASS_OK) {
        /* a name read from outer must not be defined later here either */
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(read); k++) {
            int r = PyDict_Contains(defs, PyList_GET_ITEM(read, k));
            if (r < 0)
                goto done;
            if (r) {
                status = PASS_NOT;
                break;
            }
        }
        if (status == PASS_OK) {
            result = PyTuple_Pack(2, read, held);
            goto done;
        }
    }
    /* nodes[0..i-1] ran (the last of them failed, or all passed and a read came back) */
    if (undo(nodes, i - 1, defs) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(imported);
    Py_XDECREF(read);
    Py_XDECREF(held);
    return result;
}

/* bound(nodes, path, cache, bind, out, sub): the walk of validation.operators.bound_nodes over
 * one node list. */
static PyObject *
cpass_bound(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6 || !PyList_Check(args[0]) || !PyDict_CheckExact(args[2]) ||
        !PyList_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "bound(nodes: list, path, cache: dict, bind, out: list, sub)");
        return NULL;
    }
    if (g_node == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cpass.setup was not called");
        return NULL;
    }
    PyObject *nodes = args[0], *path = args[1], *cache = args[2], *bind = args[3],
             *out = args[4], *sub = args[5];
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = Py_NewRef(PyList_GET_ITEM(nodes, i));
        PyObject *op = NULL, *spelled = NULL, *key = NULL, *got = NULL, *idx = NULL,
                 *row = NULL, *attrs = NULL;
        int ok = 0;
        if ((op = field(node, off_op_type, s_op_type)) == NULL)
            goto next;
        int has_op = PyUnicode_CheckExact(op) ? PyUnicode_GET_LENGTH(op) > 0
                                              : PyObject_IsTrue(op);
        if (has_op < 0)
            goto next;
        if (has_op) {
            if ((spelled = field(node, off_domain, s_domain)) == NULL)
                goto next;
            key = spelled == Py_None ? Py_NewRef(op) : PyTuple_Pack(2, spelled, op);
            if (key == NULL)
                goto next;
            got = PyDict_GetItemWithError(cache, key);
            if (got != NULL)
                Py_INCREF(got);
            else if (PyErr_Occurred() || (got = PyObject_CallFunctionObjArgs(
                                              bind, op, spelled, NULL)) == NULL)
                goto next;
            if (!PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 3) {
                PyErr_SetString(PyExc_TypeError, "a binding is a 3-tuple");
                goto next;
            }
            if ((idx = PyLong_FromSsize_t(i)) == NULL || (row = PyTuple_New(6)) == NULL)
                goto next;
            PyTuple_SET_ITEM(row, 0, Py_NewRef(path));
            PyTuple_SET_ITEM(row, 1, Py_NewRef(idx));
            PyTuple_SET_ITEM(row, 2, Py_NewRef(node));
            for (int k = 0; k < 3; k++)
                PyTuple_SET_ITEM(row, 3 + k, Py_NewRef(PyTuple_GET_ITEM(got, k)));
            if (PyList_Append(out, row) < 0)
                goto next;
        }
        if ((attrs = field(node, off_attributes, s_attributes)) == NULL)
            goto next;
        int has = PyList_CheckExact(attrs) ? PyList_GET_SIZE(attrs) > 0 : PyObject_IsTrue(attrs);
        if (has < 0)
            goto next;
        if (has) {
            if (idx == NULL && (idx = PyLong_FromSsize_t(i)) == NULL)
                goto next;
            PyObject *r = PyObject_CallFunctionObjArgs(sub, idx, node, NULL);
            if (r == NULL)
                goto next;
            Py_DECREF(r);
        }
        ok = 1;
    next:
        Py_XDECREF(op);
        Py_XDECREF(spelled);
        Py_XDECREF(key);
        Py_XDECREF(got);
        Py_XDECREF(idx);
        Py_XDECREF(row);
        Py_XDECREF(attrs);
        Py_DECREF(node);
        if (!ok)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* annotate(nodes, have, values, by_id, resolve) -> list of ValueInfo: the loop of
 * onemodel.inference.annotate over one graph's nodes. */
static PyObject *
cpass_annotate(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5 || !PyList_Check(args[0]) || !PySet_CheckExact(args[1]) ||
        !PyDict_CheckExact(args[2]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "annotate(nodes: list, have: set, values: dict, by_id: dict, resolve)");
        return NULL;
    }
    if (g_node == NULL || g_vi == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cpass.setup was not called");
        return NULL;
    }
    PyObject *nodes = args[0], *have = args[1], *values = args[2], *by_id = args[3],
             *resolve = args[4];
    PyObject *entries = PyList_New(0), *empty = PyBytes_FromStringAndSize(NULL, 0);
    if (entries == NULL || empty == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *outs = field(PyList_GET_ITEM(nodes, i), off_outputs, s_outputs);
        if (outs == NULL)
            goto fail;
        if (!PyList_Check(outs)) {
            Py_DECREF(outs);
            PyErr_SetString(PyExc_TypeError, "a node's outputs must be a list");
            goto fail;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(outs); k++) {
            PyObject *name = PyList_GET_ITEM(outs, k);
            int r = PyObject_IsTrue(name);
            if (r > 0)
                r = !PySet_Contains(have, name) ? 1 : (PyErr_Occurred() ? -1 : 0);
            if (r == 0)
                continue;
            PyObject *v = r < 0 ? NULL : PyDict_GetItemWithError(values, name);  /* borrowed */
            if (v == NULL || v == Py_None) {
                if (r < 0 || PyErr_Occurred()) {
                    Py_DECREF(outs);
                    goto fail;
                }
                continue;
            }
            PyObject *id = PyLong_FromVoidPtr(v), *t = NULL;
            if (id == NULL) {
                Py_DECREF(outs);
                goto fail;
            }
            t = PyDict_GetItemWithError(by_id, id);  /* borrowed */
            if (t != NULL)
                Py_INCREF(t);
            else if (!PyErr_Occurred())
                t = PyObject_CallOneArg(resolve, v);  /* fills by_id */
            Py_DECREF(id);
            if (t == NULL) {
                Py_DECREF(outs);
                goto fail;
            }
            if (t == Py_None) {
                Py_DECREF(t);
                continue;
            }
            PyObject *vi = g_vi->tp_alloc(g_vi, 0), *meta = PyList_New(0);
            if (vi == NULL || meta == NULL) {
                Py_XDECREF(vi);
                Py_XDECREF(meta);
                Py_DECREF(t);
                Py_DECREF(outs);
                goto fail;
            }
            *(PyObject **)((char *)vi + vi_off[VI_NAME]) = Py_NewRef(name);
            *(PyObject **)((char *)vi + vi_off[VI_TYPE]) = t;  /* the reference taken */
            *(PyObject **)((char *)vi + vi_off[VI_DOC]) = Py_NewRef(Py_None);
            *(PyObject **)((char *)vi + vi_off[VI_META]) = meta;
            *(PyObject **)((char *)vi + vi_off[VI_UNKNOWN]) = Py_NewRef(empty);
            r = PyList_Append(entries, vi);
            Py_DECREF(vi);
            if (r < 0 || PySet_Add(have, name) < 0) {
                Py_DECREF(outs);
                goto fail;
            }
        }
        Py_DECREF(outs);
    }
    Py_DECREF(empty);
    return entries;
fail:
    Py_XDECREF(entries);
    Py_XDECREF(empty);
    return NULL;
}

/* ---- deep copy of records (record.Record.copy) ------------------------------------------------ */

/* How copy treats a slot: shared, a record copied, a list of records copied, a list copied. */
enum { C_SHARED, C_MSG, C_LIST_MSG, C_LIST };

typedef struct {
    Py_ssize_t n;
    Py_ssize_t *off;
    unsigned char *how;
} CopyPlan;

static PyObject *g_plans = NULL;  /* record class -> capsule of its CopyPlan */

static void
plan_free(PyObject *capsule)
{
    CopyPlan *p = PyCapsule_GetPointer(capsule, "onemodel.copyplan");
    if (p != NULL) {
        PyMem_Free(p->off);
        PyMem_Free(p->how);
        PyMem_Free(p);
    }
}

/* setup_copy(plans): ``plans`` a list of ``(cls, ((slot name, how), ...))``, every slot of the
 * class named once (how: 0 shared, 1 record, 2 list of records, 3 list). */
static PyObject *
cpass_setup_copy(PyObject *self, PyObject *plans)
{
    (void)self;
    if (!PyList_Check(plans)) {
        PyErr_SetString(PyExc_TypeError, "setup_copy(plans: list)");
        return NULL;
    }
    PyObject *table = PyDict_New();
    if (table == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(plans); i++) {
        PyObject *cls, *slots;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(plans, i), "OO!", &cls, &PyTuple_Type, &slots))
            goto fail;
        if (!PyType_Check(cls)) {
            PyErr_SetString(PyExc_TypeError, "setup_copy: a plan's first item is a class");
            goto fail;
        }
        Py_ssize_t n = PyTuple_GET_SIZE(slots);
        PyTypeObject *t = (PyTypeObject *)cls;
        /* every slot of the class must be in the plan: tp_alloc leaves the others unset */
        if (t->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + n * sizeof(PyObject *)) ||
            t->tp_dictoffset != 0 || t->tp_weaklistoffset != 0) {
            PyErr_Format(PyExc_TypeError, "setup_copy: %s has slots the plan does not name",
                         t->tp_name);
            goto fail;
        }
        CopyPlan *p = PyMem_Calloc(1, sizeof(CopyPlan));
        if (p == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        p->n = n;
        p->off = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
        p->how = PyMem_Calloc((size_t)(n ? n : 1), 1);
        PyObject *capsule = (p->off && p->how) ? PyCapsule_New(p, "onemodel.copyplan", plan_free)
                                               : NULL;
        if (capsule == NULL) {
            PyMem_Free(p->off);
            PyMem_Free(p->how);
            PyMem_Free(p);
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto fail;
        }
        int r = PyDict_SetItem(table, cls, capsule);
        Py_DECREF(capsule);
        if (r < 0)
            goto fail;
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *name;
            int how;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(slots, k), "Ui", &name, &how))
                goto fail;
            if (how < C_SHARED || how > C_LIST) {
                PyErr_SetString(PyExc_ValueError, "setup_copy: how is 0 to 3");
                goto fail;
            }
            if ((p->off[k] = slot_offset(t, name)) < 0)
                goto fail;
            p->how[k] = (unsigned char)how;
        }
    }
    Py_XSETREF(g_plans, table);
    Py_RETURN_NONE;
fail:
    Py_DECREF(table);
    return NULL;
}

static CopyPlan *
plan_of(PyObject *obj)
{
    PyObject *capsule = PyDict_GetItemWithError(g_plans, (PyObject *)Py_TYPE(obj));
    if (capsule == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_LookupError, "no copy plan for %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, "onemodel.copyplan");
}

/* A new record of ``old``'s class, its slots unset, pushed on the work stack with ``old``. */
static PyObject *
push_new(PyObject *old, PyObject ***stack, Py_ssize_t *len, Py_ssize_t *cap)
{
    if (plan_of(old) == NULL)
        return NULL;
    PyTypeObject *t = Py_TYPE(old);
    PyObject *new = t->tp_alloc(t, 0);
    if (new == NULL)
        return NULL;
    if (*len + 2 > *cap) {
        Py_ssize_t c = *cap ? *cap * 2 : 256;
        PyObject **s = PyMem_Realloc(*stack, (size_t)c * sizeof(PyObject *));
        if (s == NULL) {
            Py_DECREF(new);
            PyErr_NoMemory();
            return NULL;
        }
        *stack = s, *cap = c;
    }
    (*stack)[(*len)++] = old;  /* borrowed: ``old`` lives in the tree being copied */
    (*stack)[(*len)++] = new;  /* borrowed: owned by its parent (or the caller's root) */
    return new;
}

/* copy(record) -> record: record.Record.copy(deep=True). */
static PyObject *
cpass_copy(PyObject *self, PyObject *obj)
{
    (void)self;
    if (g_plans == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cpass.setup_copy was not called");
        return NULL;
    }
    PyObject **stack = NULL;
    Py_ssize_t len = 0, cap = 0;
    /* the copies form a tree as the records do: the cyclic GC has nothing to find while they
     * are made, and would traverse them again and again (as _cdecode.c's decode, it is off) */
    int gc_was = PyGC_Disable();
    PyObject *root = push_new(obj, &stack, &len, &cap);
    if (root == NULL)
        goto fail;
    while (len) {
        PyObject *new = stack[--len], *old = stack[--len];
        CopyPlan *p = plan_of(old);
        if (p == NULL)
            goto fail;
        for (Py_ssize_t k = 0; k < p->n; k++) {
            PyObject *v = *(PyObject **)((char *)old + p->off[k]), *c = NULL;
            if (v == NULL) {  /* an unset slot: Python's getattr raises */
                PyErr_Format(PyExc_AttributeError, "a %s has an unset field",
                             Py_TYPE(old)->tp_name);
                goto fail;
            }
            switch (p->how[k]) {
            case C_MSG:
                if (v == Py_None)
                    c = Py_NewRef(v);
                else if ((c = push_new(v, &stack, &len, &cap)) == NULL)
                    goto fail;
                break;
            case C_LIST_MSG: {
                if (!PyList_Check(v) && !PyTuple_Check(v)) {  /* (the copies' sources must
                                                                  stay owned by ``old``) */
                    PyErr_Format(PyExc_TypeError, "a %s holds a %s where a list is",
                                 Py_TYPE(old)->tp_name, Py_TYPE(v)->tp_name);
                    goto fail;
                }
                PyObject *seq = PySequence_Fast(v, "a list of records");
                if (seq == NULL)
                    goto fail;
                Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
                c = PyList_New(m);
                if (c == NULL) {
                    Py_DECREF(seq);
                    goto fail;
                }
                /* set into the new record first: the list owns each copy as it is made */
                *(PyObject **)((char *)new + p->off[k]) = c;
                for (Py_ssize_t j = 0; j < m; j++) {
                    PyObject *x = push_new(PySequence_Fast_GET_ITEM(seq, j), &stack, &len, &cap);
                    if (x == NULL) {
                        Py_DECREF(seq);
                        goto fail;
                    }
                    PyList_SET_ITEM(c, j, x);
                }
                Py_DECREF(seq);
                continue;
            }
            case C_LIST:
                if ((c = PySequence_List(v)) == NULL)
                    goto fail;
                break;
            default:
                c = Py_NewRef(v);
            }
            *(PyObject **)((char *)new + p->off[k]) = c;
        }
    }
    PyMem_Free(stack);
    if (gc_was)
        PyGC_Enable();
    return root;
fail:
    PyMem_Free(stack);
    Py_XDECREF(root);
    if (gc_was)
        PyGC_Enable();
    return NULL;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)(void (*)(void))cpass_setup, METH_FASTCALL,
     "setup(Node, ValueInfo): look up the records' slots."},
    {"in_order", (PyCFunction)(void (*)(void))cpass_in_order, METH_FASTCALL,
     "in_order(nodes, defs, outer, admit) -> (read, held) or None: graph_rules._in_order."},
    {"bound", (PyCFunction)(void (*)(void))cpass_bound, METH_FASTCALL,
     "bound(nodes, path, cache, bind, out, sub): validation.operators.bound_nodes' walk."},
    {"annotate", (PyCFunction)(void (*)(void))cpass_annotate, METH_FASTCALL,
     "annotate(nodes, have, values, by_id, resolve) -> new ValueInfo entries."},
    {"setup_copy", (PyCFunction)cpass_setup_copy, METH_O,
     "setup_copy(plans): the slots of each record class and how copy treats them."},
    {"copy", (PyCFunction)cpass_copy, METH_O, "copy(record) -> its deep copy (Record.copy)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cpass", "Passes over node lists in C (see _cpass.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__cpass(void)
{
    s_domain = PyUnicode_InternFromString("domain");
    s_inputs = PyUnicode_InternFromString("inputs");
    s_outputs = PyUnicode_InternFromString("outputs");
    s_attributes = PyUnicode_InternFromString("attributes");
    s_op_type = PyUnicode_InternFromString("op_type");
    if (!s_domain || !s_inputs || !s_outputs || !s_attributes || !s_op_type)
        return NULL;
    return PyModule_Create(&module);
}
