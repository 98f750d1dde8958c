"""Parsing of command-line values: --dim, --shape and --storage-option (JSON values, protocol
sections by dotted keys) into exactly what the API takes."""

from __future__ import annotations

import pytest

from onemodel.cli.values import option_value, parse_dims, parse_shapes, parse_storage_options
from onemodel.errors import UsageError


def test_dims():
    assert parse_dims(None) == {}
    assert parse_dims(["seq=16", "batch=2", "a=b=3"]) == {"seq": 16, "batch": 2, "a=b": 3}
    for bad, said in (("seq", "not NAME=VALUE"), ("seq=-1", "not a non-negative integer"),
                      ("seq=x", "'x' is not a non-negative"), ("=3", "name before '=' is empty"),
                      ("seq=true", "'true' is not")):
        with pytest.raises(UsageError, match=said):
            parse_dims([bad])
    with pytest.raises(UsageError, match="--dim seq is given twice"):
        parse_dims(["seq=1", "seq=2"])


def test_shapes():
    assert parse_shapes(["x=1,3,224,224", "s=", "v=0", "a=b=2,2"]) == \
        {"x": (1, 3, 224, 224), "s": (), "v": (0,), "a=b": (2, 2)}
    assert all(type(d) is int for d in parse_shapes(["x=1, 2"])["x"])
    for bad, said in (("x", "not NAME=D0,D1"), ("x=1,,2", "'' is not"), ("x=1,-2", "'-2' is not"),
                      ("x=1x2", "'1x2' is not")):
        with pytest.raises(UsageError, match=said):
            parse_shapes([bad])
    with pytest.raises(UsageError, match="--shape x is given twice"):
        parse_shapes(["x=1", "x=2"])


def test_option_values():
    # what plain KEY=VALUE gave before: booleans in any case, decimal ints, text
    assert option_value("true") is True and option_value("False") is False
    assert option_value("42") == 42 and type(option_value("42")) is int
    assert option_value("eu-west-1") == "eu-west-1"
    assert option_value("") == ""
    assert option_value("http://127.0.0.1:9000") == "http://127.0.0.1:9000"
    # JSON values
    assert option_value('{"region_name": "eu-west-1"}') == {"region_name": "eu-west-1"}
    assert option_value("[1, 2]") == [1, 2]
    assert option_value("1.5") == 1.5
    assert option_value("null") is None
    assert option_value('"007"') == "007"  # a JSON string keeps digits as text
    assert option_value("{not json") == "{not json"


def test_storage_options_flat_and_sections():
    assert parse_storage_options(None) is None and parse_storage_options([]) is None
    assert parse_storage_options(["anon=true", "endpoint_url=http://h:9000/?a=b"]) == \
        {"anon": True, "endpoint_url": "http://h:9000/?a=b"}
    assert parse_storage_options(['client_kwargs={"region_name": "eu-west-1"}']) == \
        {"client_kwargs": {"region_name": "eu-west-1"}}
    got = parse_storage_options([
        's3.client_kwargs={"region_name": "eu-west-1"}', "s3.anon=false",
        'http.headers={"Authorization": "Bearer abc=="}', "http.headers.X-Trace=1"])
    assert got == {"s3": {"client_kwargs": {"region_name": "eu-west-1"}, "anon": False},
                   "http": {"headers": {"Authorization": "Bearer abc==", "X-Trace": 1}}}


def test_sections_are_what_options_for_takes():
    from onemodel.storage.remote import options_for
    opts = parse_storage_options(["s3.key=K", "http.headers.Authorization=Bearer t", "anon=true"])
    assert options_for("s3://b/m.onnx", opts) == {"anon": True, "key": "K"}
    assert options_for("https://h/m.onnx", opts) == {"anon": True,
                                                     "headers": {"Authorization": "Bearer t"}}


def test_storage_option_conflicts_are_refused():
    with pytest.raises(UsageError, match="--storage-option anon is given twice"):
        parse_storage_options(["anon=true", "anon=false"])
    with pytest.raises(UsageError, match="s3.key is given twice"):
        parse_storage_options(['s3={"key": "a"}', "s3.key=b"])
    assert parse_storage_options(['s3={"key": "a"}', "s3.secret=b"]) == \
        {"s3": {"key": "a", "secret": "b"}}
    with pytest.raises(UsageError, match="s3 is already given a value that is not a JSON object"):
        parse_storage_options(["s3=1", "s3.key=b"])
    with pytest.raises(UsageError, match="empty name between dots"):
        parse_storage_options(["s3..key=b"])
    with pytest.raises(UsageError, match="is not KEY=VALUE"):
        parse_storage_options(["anon"])
