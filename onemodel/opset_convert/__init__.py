"""Opset conversion: a model rewritten from the operator set versions it imports to others, up or
down (issue 26), node by node through the version adapters of the operator table
(:func:`onemodel.operators.adapter`)."""
