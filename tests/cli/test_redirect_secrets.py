"""A redirect to another origin never carries the headers the user set (issue 23, item 5):
the secret header of ``-S http.headers.X-Api-Key=...`` reaches the server the URL names, and
never a second server (another port of 127.0.0.1 is another origin) that it redirects to. The
redirect is followed (the model is read from there) and reported under ``--debug`` without a
header value or a query."""

from __future__ import annotations

from pathlib import Path

import pytest
from servers.http_range import RangeServer
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app

CNN = Path(__file__).resolve().parents[2] / "testdata" / "models" / "cnn_legacy.onnx"
SECRET = "SECRETVALUE42"
runner = CliRunner()


@pytest.fixture
def other_origin():
    server = RangeServer().start()
    yield server
    server.stop()


def _hash(*args):
    r = runner.invoke(app, ["hash", *map(str, args)])
    return r, r.stdout + r.stderr


def _local_digest():
    r, text = _hash(CNN)
    assert r.exit_code == 0, text
    return text.split()[0]


@pytest.mark.parametrize("debug", [False, True])
def test_a_secret_header_never_reaches_another_origin(http_server, other_origin, debug):
    other_origin.files["m.onnx"] = CNN.read_bytes()
    http_server.redirects["redirect/m.onnx"] = other_origin.url("m.onnx") + "?sig=QUERYSIG"
    flags = ["--debug"] if debug else []
    r, text = _hash(http_server.url("redirect/m.onnx"), "-S",
                    f"http.headers.X-Api-Key={SECRET}", *flags)
    assert r.exit_code == 0, text
    assert text.split()[0] == _local_digest()   # the model was read, from the other origin
    # the origin the user named got the header; the other one answered every read without it
    assert http_server.log and all(q.headers.get("X-Api-Key") == SECRET
                                   for q in http_server.log)
    assert other_origin.log
    assert all("X-Api-Key" not in q.headers and SECRET not in str(q.headers)
               for q in other_origin.log)
    assert SECRET not in text and "QUERYSIG" not in text
    if debug:
        assert (f"debug: HTTP 302 redirect from {http_server.url('redirect/m.onnx')} to "
                f"{other_origin.url('m.onnx')} (another origin)") in text
        assert (f"debug: request to another origin than the one opened, "
                f"{other_origin.url('m.onnx')}: headers not sent: X-Api-Key") in text
    else:
        assert "debug:" not in text


def test_a_redirect_within_the_origin_keeps_the_headers(http_server):
    http_server.files["m.onnx"] = CNN.read_bytes()
    http_server.redirects["old/m.onnx"] = http_server.url("m.onnx")
    r, text = _hash(http_server.url("old/m.onnx"), "-S", f"http.headers.X-Api-Key={SECRET}",
                    "--debug")
    assert r.exit_code == 0, text
    assert text.split()[0] == _local_digest()
    assert {q.path for q in http_server.log} == {"old/m.onnx", "m.onnx"}
    assert all(q.headers.get("X-Api-Key") == SECRET for q in http_server.log)
    assert "(the same origin)" in text and "headers not sent" not in text


def test_session_headers_and_chained_urls_are_guarded_too(http_server, other_origin,
                                                           tmp_path):
    """Headers set for the whole session (``client_kwargs.headers``), and the requests fsspec
    makes itself (``simplecache::``), are dropped on the way to another origin as well."""
    other_origin.files["m.onnx"] = CNN.read_bytes()
    http_server.redirects["m.onnx"] = other_origin.url("m.onnx")
    opts = {"http": {"headers": {"X-Api-Key": SECRET},
                     "client_kwargs": {"headers": {"Cookie": f"s={SECRET}"}}},
            "simplecache": {"cache_storage": str(tmp_path / "cache")}}
    for url in (http_server.url("m.onnx"), "simplecache::" + http_server.url("m.onnx")):
        other_origin.log.clear()
        http_server.log.clear()
        m = onemodel.load(url, storage_options=opts)
        assert [n.op_type for n in m.graph.nodes][:1] == ["Conv"]
        assert other_origin.log, url
        assert all(SECRET not in str(q.headers) for q in other_origin.log), url
        assert all(q.headers.get("Cookie") == f"s={SECRET}" for q in http_server.log), url


def test_access_denied_at_the_other_origin_says_where_and_why(http_server, other_origin):
    other_origin.files["m.onnx"] = CNN.read_bytes()
    other_origin.mode = "403"
    http_server.redirects["m.onnx"] = other_origin.url("m.onnx") + "?sig=QUERYSIG"
    r, text = _hash(http_server.url("m.onnx"), "-S", f"http.headers.X-Api-Key={SECRET}")
    assert r.exit_code == 2
    assert text.strip() == (f"Io: cannot open: access denied at {other_origin.url('m.onnx')}, "
                            "another origin a redirect led to (the headers set by storage "
                            "options are not sent there: docs/storage.md) in "
                            f"{http_server.url('m.onnx')}")


def test_an_aiohttp_without_middlewares_is_refused_not_trusted(http_server, monkeypatch):
    """Before aiohttp 3.12 nothing could drop the headers on a redirect: such an aiohttp is an
    UnsupportedError naming the version needed, no request is made."""
    from onemodel.errors import UnsupportedError
    from onemodel.storage import open_source, redirects

    http_server.files["m.onnx"] = CNN.read_bytes()
    monkeypatch.setattr(redirects, "_middlewares_supported", lambda: False)
    redirects._CLIENTS.clear()  # (a new session, made by the patched check)
    try:
        with pytest.raises(UnsupportedError, match=r"aiohttp 3\.12 or later is needed"):
            open_source(http_server.url("m.onnx"),
                        storage_options={"http": {"headers": {"X-Api-Key": SECRET}}})
    finally:
        redirects._CLIENTS.clear()
    assert http_server.log == []
