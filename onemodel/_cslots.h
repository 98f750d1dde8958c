/*
 * _cslots.h: the offset of a record's slot, for the C accelerators that read and make the IR's
 * records without running Python (formats/onnx/_cdecode.c, ir/_cpass.c). Included by each; the
 * records are onemodel.ir classes with __slots__ (onemodel/ir/record.py).
 */
#ifndef ONEMODEL_CSLOTS_H
#define ONEMODEL_CSLOTS_H

#include <Python.h>
#include <structmember.h>

/* The slot offset of attribute ``name`` of ``cls``: a writable object member (a __slots__
 * entry), else -1 with TypeError. */
static Py_ssize_t
slot_offset(PyTypeObject *cls, PyObject *name)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)cls, name);
    if (descr == NULL)
        return -1;
    Py_ssize_t off = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *md = ((PyMemberDescrObject *)descr)->d_member;
        if (md->type == T_OBJECT_EX && !(md->flags & READONLY) &&
            md->offset >= (Py_ssize_t)sizeof(PyObject) &&
            md->offset + (Py_ssize_t)sizeof(PyObject *) <= cls->tp_basicsize)
            off = md->offset;
    }
    Py_DECREF(descr);
    if (off < 0)
        PyErr_Format(PyExc_TypeError, "%s.%U is not a slot", cls->tp_name, name);
    return off;
}

#endif
