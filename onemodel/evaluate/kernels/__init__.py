"""The built-in kernels, one module per operator family (:mod:`onemodel.operators.families`).

Importing this package imports none of them: the operator table imports a family's module on
the first lookup of one of its operators, which attaches its kernels
(:func:`onemodel.operators.kernel`).
"""
