"""The ``onemodel`` engine: onemodel's own evaluator (:mod:`onemodel.evaluate`)."""

from __future__ import annotations

from .base import Engine


class OnemodelEngine(Engine):
    """:func:`onemodel.evaluate.run` for :meth:`run`; :meth:`onemodel.evaluate.Session.observe`
    for :meth:`observe`, which gives every node output as it is produced and keeps none past its
    last use (nothing is skipped). Errors are the evaluator's (EvaluationError, InputError,
    UnsupportedError, InvalidModelError)."""

    name = "onemodel"

    def run(self, model, feeds):
        from ..evaluate import run
        return run(model, feeds)

    def observe(self, model, feeds, observer):
        from ..evaluate import Session
        Session(model).observe(feeds, observer)
        return {}


ENGINE = OnemodelEngine()
