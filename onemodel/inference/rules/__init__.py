"""The inference rules, one module per family of operators, named as the evaluator's kernel
modules (``onemodel/evaluate/kernels/<family>.py`` -> ``rules/<family>.py``,
:mod:`onemodel.operators.families`). Importing this package imports none of them: the operator
table imports a family's module on the first lookup of one of its operators, which attaches
its rules (:func:`onemodel.operators.rule`)."""
