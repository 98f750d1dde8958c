"""Nothing secret on the terminal: URL credentials, presigned query values and secret storage
options never appear in what any command prints (stdout and stderr, success and failure, --json,
--debug), while the rest of the URL still names the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.cli.redact import add_secrets, clear_secrets, redact, shown

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CNN = MODELS / "cnn_legacy.onnx"
SECRETS = ("hunter2", "SIGSECRET", "CREDSECRET", "TOKSECRET", "AZSIG", "TOKENVALUE")
#: user information and a presigned query: the server ignores both, so the URL really loads
QUERY = "?X-Amz-Signature=SIGSECRET&X-Amz-Credential=CREDSECRET&token=TOKSECRET&sig=AZSIG"
runner = CliRunner()


def cli(*args):
    r = runner.invoke(app, [str(a) for a in args])
    return r, r.stdout + r.stderr


def secret_url(server, name):
    return server.url(name).replace("http://", "http://alice:hunter2@") + QUERY


def assert_masked(text: str, server) -> None:
    for s in SECRETS:
        assert s not in text, (s, text)
    assert "alice" not in text  # the user name is user information too


@pytest.fixture
def served(http_server, tmp_path):
    http_server.files["m.onnx"] = CNN.read_bytes()
    onemodel.convert(CNN, tmp_path / "m.onemodel")
    http_server.files["m.onemodel"] = (tmp_path / "m.onemodel").read_bytes()
    return http_server


def test_success_lines_mask_the_url(served, tmp_path):
    url = secret_url(served, "m.onnx")
    masked = f"http://***@127.0.0.1:{served.port}/m.onnx?X-Amz-Signature=***&" \
             "X-Amz-Credential=***&token=***&sig=***"
    cases = [
        (("convert", url, tmp_path / "x.onemodel"), f"{masked} (onnx) -> "),
        (("verify", url, tmp_path / "x.onemodel"), f"equal: {masked} and "),
        (("verify", url, secret_url(served, "m.onemodel"), "--run"), f"equal: {masked} and "),
        (("info", url), f"{masked}  format onnx"),
        (("info", url, "--json"), f'"source": "{masked}"'),
    ]
    for args, expected in cases:
        r, text = cli(*args)
        assert r.exit_code == 0, (args, text)
        assert expected in text, (args, text)
        assert_masked(text, served)
    r, text = cli("run", url, "--random", "--output-dir", tmp_path / "out")
    assert r.exit_code == 0 and "logits: shape [1, 10]" in text, text
    assert_masked(text, served)


def test_a_written_url_is_masked_too(tmp_path):
    dst = "memory://bob:hunter2@bucket/m.onnx?sig=AZSIG"
    r, text = cli("convert", CNN, dst, "--to", "onnx")  # (the suffix is hidden by the query)
    assert r.exit_code == 0, text
    assert "-> memory://***@bucket/m.onnx?sig=*** (onnx)" in text
    assert "hunter2" not in text and "AZSIG" not in text and "bob" not in text


@pytest.mark.parametrize("debug", [False, True])
def test_error_lines_mask_the_url(served, tmp_path, debug):
    flags = ["--debug"] if debug else []
    missing = secret_url(served, "missing.onnx")
    cases = [
        ("info", missing), ("info", missing, "--json"), ("run", missing, "--random"),
        ("convert", missing, tmp_path / "x.onemodel"), ("verify", CNN, missing),
        ("verify", secret_url(served, "m.onnx"), missing, "--run"),
        # refused by the API before anything is read: the message quotes the destination
        ("convert", CNN, "memory://bob:hunter2@b/m.weird" + QUERY),
    ]
    for args in cases:
        r, text = cli(*args, *flags)
        assert r.exit_code == 2, (args, text)
        assert ("Traceback" in text) == debug
        assert "***" in text, (args, text)
        assert_masked(text, served)


def test_an_authorization_header_reaches_the_server_and_never_the_terminal(served, tmp_path,
                                                                          monkeypatch):
    header = 'http.headers={"Authorization": "Bearer TOKENVALUE"}'
    r, text = cli("info", served.url("m.onnx"), "-S", header)
    assert r.exit_code == 0, text
    assert served.log and all(q.headers.get("Authorization") == "Bearer TOKENVALUE"
                              for q in served.log)
    assert "TOKENVALUE" not in text
    # a message that quotes the options (a backend's own error text) is masked as well
    from onemodel import api
    from onemodel.errors import IoError

    def failing(target, storage_options=None, **kwargs):
        raise IoError(f"cannot open: backend said {storage_options!r}", source=str(target))

    monkeypatch.setattr(api, "load", failing)
    r, text = cli("info", served.url("m.onnx"), "-S", "http.headers.Authorization=Bearer "
                  "TOKENVALUE", "-S", "key=AKIAEXAMPLE", "-S", "region=eu-west-1")
    assert r.exit_code == 2
    assert text.startswith("Io: cannot open: backend said {'http': {'headers': "
                           "{'Authorization': '***'}}, 'key': '***', 'region': 'eu-west-1'}")
    assert "TOKENVALUE" not in text and "AKIAEXAMPLE" not in text


def test_redact_finds_urls_in_running_text():
    assert redact("in s3://b/k.onnx?X-Amz-Signature=abc.") == \
        "in s3://b/k.onnx?X-Amz-Signature=***."
    assert redact("(see 'https://u:p@h/m?sig=x')") == "(see 'https://***@h/m?sig=***')"
    assert redact("simplecache::https://u:p@h/m.onnx") == "simplecache::https://***@h/m.onnx"
    assert redact('{"source": "gs://b/m?token=t"}') == '{"source": "gs://b/m?token=***"}'
    assert redact("plain /tmp/m.onnx: 3 tensors") == "plain /tmp/m.onnx: 3 tensors"
    assert shown(Path("/tmp/a b.onnx")) == "/tmp/a b.onnx"
    # the scheme starts the URL: a word glued before it by ':' is not taken into it
    assert redact("source:http://u:p@h/x?a=1") == "source:http://***@h/x?a=***"
    assert redact("zip://in.onnx::s3://u:p@b/k?sig=1 and http://h/?t=2") == \
        "zip://in.onnx::s3://***@b/k?sig=*** and http://h/?t=***"
    # masking twice changes nothing
    once = redact("x https://u:p@h/m?a=1&b")
    assert redact(once) == once == "x https://***@h/m?a=***&b"


def test_secrets_of_storage_options_are_masked_and_forgotten():
    add_secrets({"s3": {"key": "AKIAEXAMPLE", "secret": "s3cr3tvalue", "anon": False,
                        "client_kwargs": {"region_name": "eu-west-1"}},
                 "http": {"headers": {"X-Custom": "opaque-value"}}, "sas_token": "sv=2020"})
    try:
        line = "AKIAEXAMPLE s3cr3tvalue opaque-value sv=2020 eu-west-1 False"
        assert redact(line) == "*** *** *** *** eu-west-1 False"
    finally:
        clear_secrets()
    assert redact("AKIAEXAMPLE") == "AKIAEXAMPLE"


def test_masking_imports_no_backend():
    """Masking is text work: neither a plain line nor a line with a URL imports the remote
    storage module (asyncio) or fsspec; display_url lives in onemodel.errors."""
    import subprocess
    import sys
    code = ("import sys; from onemodel.cli.redact import redact; redact('a /tmp/m.onnx line'); "
            "print('onemodel.storage.remote' in sys.modules, 'fsspec' in sys.modules); "
            "assert redact('in s3://b/k?sig=1') == 'in s3://b/k?sig=***'; "
            "print('onemodel.storage.remote' in sys.modules, 'fsspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False", "False"]


def test_typer_usage_errors_mask_the_url(served):
    url = secret_url(served, "m.onnx")
    for args in (("info", url, url), ("run", url, "--seed", url), (url,)):
        r, text = cli(*args)
        assert r.exit_code == 2 and f"http://***@127.0.0.1:{served.port}/m.onnx?" in text, text
        assert_masked(text, served)


def test_protocol_sections_on_the_command_line_reach_their_backends(served, s3):
    """HTTP source, S3 destination: each backend gets its own section (an S3 key given to
    aiohttp would be refused), and no secret of either is printed."""
    server, bucket = s3
    dst = f"s3://{bucket}/m.onemodel"
    r, text = cli("convert", served.url("m.onnx"), dst,
                  "-S", "s3.key=testing", "-S", "s3.secret=testing-secret-value",
                  "-S", f"s3.endpoint_url={server.endpoint}",
                  "-S", 's3.client_kwargs={"region_name": "us-east-1"}',
                  "-S", 'http.headers={"Authorization": "Bearer TOKENVALUE"}')
    assert r.exit_code == 0, text
    assert text.startswith(f"{served.url('m.onnx')} (onnx) -> {dst} (onemodel): 14 tensors")
    assert "testing-secret-value" not in text and "TOKENVALUE" not in text
    assert all(q.headers.get("Authorization") == "Bearer TOKENVALUE" for q in served.log)
    assert server.filesystem().cat_file(f"{bucket}/m.onemodel")[:8] == b"ONEMODEL"


def test_a_url_with_nothing_secret_is_printed_as_given():
    """Masking changes only user information and query values: 's3://, https://' in a message
    and a plain URL stay exactly as written (urlunsplit used to turn 's3://,' into 's3:,')."""
    from onemodel.cli.redact import redact

    for line in ("for URLs (s3://, https:// ...)", "in s3://bucket/m.onnx", "file:///tmp/m.onnx"):
        assert redact(line) == line
    assert redact("in s3://u:p@b/m.onnx?sig=1") == "in s3://***@b/m.onnx?sig=***"


class _BackendError(Exception):
    """An error as s3fs/botocore/aiohttp raise them: the reason and secrets on later lines."""


def test_every_line_of_a_backend_error_is_kept_and_masked(monkeypatch):
    """A backend's error text of several lines: the lines that say what happened are all kept
    (one error line, parts joined by ' | '), and the secrets on them, outside any URL, are
    masked by the one masking function (before, only the first line was kept)."""
    import fsspec.implementations.memory as memory

    text = ("An error occurred (AccessDenied) when calling the HeadObject operation\n\n"
            "  request signed for alice:hunter2@bucket.s3.amazonaws.com\n"
            "  query: X-Amz-Credential=CREDSECRET&token=TOKSECRET; header Authorization: "
            "Bearer TOKENVALUE\n"
            "  sent {'password': 'SIGSECRET', 'region': 'eu-west-1'}\n")

    def info(self, path, **kwargs):
        raise _BackendError(text)

    monkeypatch.setattr(memory.MemoryFileSystem, "info", info)
    r, out = cli("info", "memory://bucket/m.onnx")
    assert r.exit_code == 2
    assert out.count("\n") == 1, out
    assert out.startswith("Io: cannot open: _BackendError: An error occurred (AccessDenied) when "
                          "calling the HeadObject operation | request signed for "
                          "***@bucket.s3.amazonaws.com | query: X-Amz-Credential=***&token=***; "
                          "header Authorization: Bearer *** | sent {'password': '***', "
                          "'region': 'eu-west-1'} in memory://bucket/m.onnx"), out
    for secret in SECRETS + ("alice",):
        assert secret not in out, (secret, out)


def test_redact_masks_secrets_outside_urls():
    cases = {
        "Cannot connect to host alice:hunter2@127.0.0.1:9 ssl:default":
            "Cannot connect to host ***@127.0.0.1:9 ssl:default",
        "Authorization: AWS4-HMAC-SHA256 Credential=AKIA/2026/s3, SignedHeaders=host, "
        "Signature=beef.": "Authorization: AWS4-HMAC-SHA256 ***, SignedHeaders=host, "
                           "Signature=***.",
        '{"token": "t0k", "key": "token", "value": "v"}':
            '{"token": "***", "key": "token", "value": "v"}',
        "X-Amz-Security-Token: FQoG and api_key=abc&user=bob":
            "X-Amz-Security-Token: *** and api_key=***&user=bob",
    }
    for line, masked in cases.items():
        assert redact(line) == masked
        assert redact(masked) == masked  # masking twice changes nothing
    # what is not a secret stays as written: names of outputs and dims, e-mail addresses
    for line in ("token: shape [1, 10] dtype float32 sha256:00", "--dim num_tokens=N",
                 "inputs: ids int64[1,5] (batch=1, max_tokens=5)", "mail bob@example.com",
                 "[ModelProto.graph.node[3]:x] at offset 0x1f"):
        assert redact(line) == line
