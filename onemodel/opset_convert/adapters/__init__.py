"""The version adapters, one module per operator family (:mod:`onemodel.operators.families`),
imported by the operator table on first use. A family without a module has no adapter."""
