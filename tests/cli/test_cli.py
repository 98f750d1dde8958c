"""The command line as a user meets it: exit codes, one-line errors, info, convert, verify."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onemodel.cli import app

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CNN = MODELS / "cnn_legacy.onnx"
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_info_json_matches_onnx():
    r = cli("info", CNN, "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    proto = onnx.load(CNN)
    assert s["ir_version"] == proto.ir_version
    assert s["opsets"] == [{"domain": o.domain, "version": o.version} for o in proto.opset_import]
    assert s["producer"] == {"name": proto.producer_name, "version": proto.producer_version}
    assert [i["name"] for i in s["inputs"]] == [i.name for i in proto.graph.input]
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert s["inputs"][0]["shape"] == [d.dim_param if d.HasField("dim_param") else d.dim_value
                                       for d in dims]
    assert s["nodes"] == len(proto.graph.node)
    assert s["ops"] == dict(Counter(n.op_type for n in proto.graph.node))
    assert s["initializers"]["count"] == len(proto.graph.initializer)
    nbytes = sum(onnx.numpy_helper.to_array(t).nbytes for t in proto.graph.initializer)
    assert s["initializers"]["bytes"] == nbytes


def test_info_table():
    r = cli("info", CNN)
    assert r.exit_code == 0, r.output
    assert "opsets:" in r.stdout and "Conv" in r.stdout and "initializers:" in r.stdout
    # shapes are printed as text, not taken for markup
    assert "tensor(float)[N,3,32,32]" in r.stdout or "tensor(float)[batch,3,32,32]" in r.stdout


@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.glob("*.onnx")))
def test_convert_round_trip_is_byte_identical(tmp_path, name):
    src = MODELS / name
    r = cli("convert", src, tmp_path / "m.onemodel")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "m.onemodel").read_bytes()[:8] == b"ONEMODEL"
    r = cli("convert", tmp_path / "m.onemodel", tmp_path / "back.onnx")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "back.onnx").read_bytes() == src.read_bytes()
    r = cli("verify", src, tmp_path / "m.onemodel")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("equal")


def test_convert_to_forces_format(tmp_path):
    r = cli("convert", CNN, tmp_path / "model.bin", "--to", "onemodel")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "model.bin").read_bytes()[:8] == b"ONEMODEL"


def test_verify_names_the_first_difference(tmp_path):
    proto = onnx.load(CNN)
    index = next(i for i, n in enumerate(proto.graph.node) if n.attribute)
    attr = proto.graph.node[index].attribute[0]
    if attr.type == onnx.AttributeProto.INTS:
        attr.ints[0] += 1
        field = "ints"
    elif attr.type == onnx.AttributeProto.INT:
        attr.i += 1
        field = "i"
    else:
        attr.f += 1.0
        field = "f"
    onnx.save(proto, tmp_path / "changed.onnx")
    r = cli("verify", CNN, tmp_path / "changed.onnx")
    assert r.exit_code == 1, r.output
    assert f"graph.nodes[{index}].attributes[0].{field}" in r.stdout


def test_verify_reports_weight_difference(tmp_path):
    proto = onnx.load(CNN)
    t = proto.graph.initializer[0]
    arr = onnx.numpy_helper.to_array(t).copy()
    arr.reshape(-1)[3] = arr.reshape(-1)[3] + 1
    t.CopyFrom(onnx.numpy_helper.from_array(arr, t.name))
    onnx.save(proto, tmp_path / "w.onnx")
    r = cli("verify", CNN, tmp_path / "w.onnx")
    assert r.exit_code == 1
    assert "graph.initializers[0].contents" in r.stdout and "element 3" in r.stdout


def test_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x0a\x3a\x64abc")  # graph field whose length runs past the end
    r = cli("info", bad)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Malformed:") and "[ModelProto.graph]" in lines[0]
    assert "at offset 0x2" in lines[0] and str(bad) in lines[0]


def test_missing_file_is_io(tmp_path):
    r = cli("convert", tmp_path / "nope.onnx", tmp_path / "x.onemodel")
    assert r.exit_code == 2
    assert r.stderr.startswith("Io:")
    assert not (tmp_path / "x.onemodel").exists()


def test_unknown_output_format(tmp_path):
    r = cli("convert", CNN, tmp_path / "x.weird")
    assert r.exit_code == 2 and r.stderr.startswith("Unsupported:")


def test_debug_shows_the_traceback(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x0a\x3a\x64abc")
    proc = subprocess.run([sys.executable, "-m", "onemodel", "info", str(bad), "--debug"],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "MalformedError" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "onemodel", "info", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_options_of_the_other_format_are_refused_naming_flags(tmp_path):
    """The refusal names the flags the user typed and those the format takes, not the Python
    keywords of the API (layout, strict_v1, base_dir ...)."""
    for flags, refused in ((["--inline"], "--inline"), (["--align", "64"], "--align"),
                           (["--external-data", "w.bin"], "--external-data"),
                           (["--external-data-per-tensor"], "--external-data-per-tensor")):
        r = cli("convert", CNN, tmp_path / "x.onemodel", *flags)
        assert r.exit_code == 2
        assert r.stderr.strip() == (f"Unsupported: {refused} does not apply to onemodel output "
                                    "(it takes: --digests, --strict-v1)")
    assert not (tmp_path / "x.onemodel").exists()
    r = cli("convert", CNN, tmp_path / "x.onnx", "--strict-v1", "--inline")
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        "Unsupported: --strict-v1 does not apply to onnx output (it takes: --align, "
        "--allow-external-outside, --external-data, --force, --layout, --inline, "
        "--external-data-per-tensor, --max-shard-size, --storage-option, --threshold)")


def test_layout_is_named_as_typed_and_a_bogus_one_is_a_usage_error(tmp_path):
    """``--layout X`` for OneModel output is refused naming ``--layout`` (the flag typed, not
    the flags of the same writer option); an unknown layout is a usage error listing the
    valid ones, for either output format, before anything is written."""
    for layout in ("keep", "inline", "file", "per_tensor", "safetensors"):
        r = cli("convert", CNN, tmp_path / "x.onemodel", "--layout", layout)
        assert r.exit_code == 2
        assert r.stderr.strip() == ("Unsupported: --layout does not apply to onemodel output "
                                    "(it takes: --digests, --strict-v1)"), layout
    for dst in ("x.onemodel", "x.onnx"):
        r = cli("convert", CNN, tmp_path / dst, "--layout", "bogus")
        assert r.exit_code == 2
        assert r.stderr.strip() == (
            "Usage error: --layout 'bogus': one of keep, inline, file, per_tensor, "
            "safetensors")
    assert not any(tmp_path.iterdir())


def test_a_bad_writer_option_is_one_line_exit_2(tmp_path):
    r = cli("convert", CNN, tmp_path / "x.onnx", "--external-data", "../x.bin")
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Usage error: --external-data '../x.bin'") and "'..'" in lines[0]
    assert not any(tmp_path.iterdir()) and not (tmp_path.parent / "x.bin").exists()


def test_a_value_error_from_a_bug_is_not_a_usage_error(tmp_path, monkeypatch):
    """Only command-line values are usage errors; a ValueError from inside is reported as an
    internal error (exit status 70, a bug, as docs/cli.md says; one line)."""
    from onemodel import api

    def broken(*args, **kwargs):
        raise ValueError("something inside went wrong")

    monkeypatch.setattr(api, "convert", broken)
    r = cli("convert", CNN, tmp_path / "x.onnx")
    assert r.exit_code == 70
    assert r.stderr.strip() == ("internal error: ValueError: something inside went wrong (run "
                                "with --debug for the traceback)")


def test_strict_v1_lists_what_it_left_out(tmp_path):
    src = MODELS / "cnn_dynamo.onnx"  # the dynamo exporter writes metadata_props on nodes
    r = cli("convert", src, tmp_path / "plain.onemodel", "--strict-v1")
    assert r.exit_code == 0, r.output
    assert "left out (--strict-v1): metadata_props of 14 nodes" in r.stdout
    assert "opset_imports" not in r.stdout  # the opsets are kept; only "" vs absent domain
    r = cli("verify", src, tmp_path / "plain.onemodel", "--loose")
    assert r.exit_code == 0, r.output  # loose compares what a plain v1 file can hold
    r = cli("verify", src, tmp_path / "plain.onemodel")
    assert r.exit_code == 1 and "metadata_props" in r.stdout


def test_version():
    import onemodel
    r = cli("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"onemodel {onemodel.__version__}"


def test_unknown_engine_is_refused_before_loading(tmp_path):
    r = cli("verify", tmp_path / "missing.onnx", CNN, "--run", "--engine", "weird")
    assert r.exit_code == 2 and r.stderr.startswith("Unsupported: unknown engine 'weird'")


def test_symlinked_data_needs_the_explicit_opt_in(tmp_path):
    import shutil
    src = MODELS / "external"
    blobs, snap = tmp_path / "blobs", tmp_path / "snap"
    blobs.mkdir()
    snap.mkdir()
    for f in src.iterdir():  # a Hugging Face style cache: the files are links into blobs/
        shutil.copy(f, blobs / f.name)
        (snap / f.name).symlink_to(blobs / f.name)
    model = snap / "mlp_dynamo.onnx"
    r = cli("info", model)
    assert r.exit_code == 2 and "symbolic link" in r.stderr
    for cmd in (("info", model), ("run", model, "--random"), ("verify", model, model, "--run")):
        r = cli(*cmd, "--allow-external-outside")
        assert r.exit_code == 0, (cmd, r.output)


def test_names_are_printed_as_they_are(tmp_path):
    """Plain lines are not rich markup: ``:smile:`` and ``[bold]`` in a file name stay text,
    in the summary line and in an error."""
    src = tmp_path / "m:smile:[bold].onnx"
    src.write_bytes(CNN.read_bytes())
    dst = tmp_path / "out:smile:.onemodel"
    r = cli("convert", src, dst)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"{src} (onnx) -> {dst} (onemodel): ")
    missing = tmp_path / "gone:smile:.onnx"
    r = cli("convert", missing, dst)
    assert r.exit_code == 2 and str(missing) in r.stderr and "😄" not in r.stderr


@pytest.mark.parametrize("option", [["--align", "3"], ["--align", "0"], ["--align", "-64"],
                                    ["--align", "2097152"], ["--threshold", "-1"]])
def test_out_of_range_layout_numbers_are_one_line_usage_errors(tmp_path, option):
    """A value the user typed that the writer cannot take is a usage error (exit 2, as typer's
    own), spelled with the flag and the values it allows, not Unsupported (the kind for what a
    file needs that onemodel lacks)."""
    r = cli("convert", CNN, tmp_path / "m.onnx", "--external-data", "w.bin", *option)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Usage error: {option[0]} must be "), lines
    assert lines[0].endswith(f", not {option[1]}")
    allowed = ("a power of two from 1 to 1048576 bytes" if option[0] == "--align"
               else "a non-negative integer (bytes)")
    assert allowed in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_two_layouts_at_once_are_a_usage_error(tmp_path):
    r = cli("convert", CNN, tmp_path / "m.onnx", "--inline", "--external-data-per-tensor")
    assert r.exit_code == 2
    assert r.stderr.strip() == ("Usage error: choose one of --inline, --external-data, "
                                "--external-data-per-tensor")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["info", "convert", "verify", "run"])
def test_storage_options_for_local_files_are_refused(command, tmp_path):
    """--storage-option is for URLs: given when every file of the command is local it would be
    ignored, so it is one usage error naming the file, before anything is read or written."""
    args = {"info": ["info", CNN], "convert": ["convert", CNN, tmp_path / "m.onemodel"],
            "verify": ["verify", CNN, CNN], "run": ["run", CNN, "--random"]}[command]
    r = cli(*args, "--storage-option", "anon=true")
    assert r.exit_code == 2, r.output
    assert "Usage error: storage options are for URLs" in r.output
    local = f"{CNN} and {tmp_path / 'm.onemodel'}" if command == "convert" else f"{CNN}"
    assert f"every file of this operation is local ({local}):" in r.output
    assert not (tmp_path / "m.onemodel").exists()


def named_cli(*args):
    """The command line as the console script names itself (`onemodel`, not the runner's)."""
    return runner.invoke(app, [str(a) for a in args], prog_name="onemodel")


@pytest.mark.parametrize("args, said", [
    (["convert", "a", "b", "--align", "abc"],
     "Usage error: Invalid value for '--align': 'abc' is not a valid int. Try 'onemodel convert "
     "--help' for help."),
    (["nosuchcommand"], "Usage error: No such command 'nosuchcommand'. Try 'onemodel --help' "
                        "for help."),
    (["info"], "Usage error: Missing argument 'FILE'. Try 'onemodel info --help' for help."),
    (["info", "a", "b"], "Usage error: Got unexpected extra argument(s) (b). Try 'onemodel info "
                         "--help' for help."),
    (["run", "m.onnx", "--seed", "x"], "Usage error: Invalid value for '--seed': 'x' is not an "
                                       "integer >= 0. Try 'onemodel run --help' for help."),
    (["verify", "a", "b", "--run", "--seed", "1.5"],
     "Usage error: Invalid value for '--seed': '1.5' is not an integer >= 0. Try 'onemodel "
     "verify --help' for help."),
    (["verify", "a", "b", "--nosuch"], "Usage error: No such option: --nosuch. Try 'onemodel "
                                       "verify --help' for help."),
    (["check", "m.onnx", "--json=3"], "Usage error: Option '--json' does not take a value. Try "
                                      "'onemodel check --help' for help."),
])
def test_usage_errors_of_the_command_line_itself_are_one_line_exit_2(args, said):
    """typer's own usage errors (a bad flag value, an unknown command or option, a missing or
    extra argument) are one line, as every other error, not rich's five-line box."""
    r = named_cli(*args)
    assert r.exit_code == 2, r.output
    assert r.stderr == said + "\n"
    assert r.stdout == ""


def test_help_is_not_a_usage_error():
    r = cli("convert", "--help")
    assert r.exit_code == 0 and "Convert SRC to DST" in r.stdout and r.stderr == ""
    r = cli()  # no arguments: the help, as typer shows it
    assert "Commands" in r.output and "convert" in r.output and "Usage error" not in r.output


def test_the_command_list_shows_each_description_as_one_paragraph():
    # a docstring's line breaks are not the list's: "with\n--opset" made a short line
    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"})
    line = next(x for x in r.output.splitlines() if "Convert SRC to DST" in x)
    assert "bit-identical; with --opset, to other operator set versions." in line


def test_usage_errors_are_one_line_from_the_console_script_too():
    r = subprocess.run([sys.executable, "-c", "from onemodel.cli import main; main()",
                        "convert", "a", "b", "--align", "abc"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr == ("Usage error: Invalid value for '--align': 'abc' is not a valid int. "
                        "Try 'onemodel convert --help' for help.\n")


@pytest.mark.parametrize("args, name", [
    (["info", ""], "FILE"), (["check", ""], "FILE"), (["run", "", "--random"], "FILE"),
    (["convert", "", "x.onnx"], "SRC"), (["convert", CNN, ""], "DST"),
    (["verify", "", CNN], "A"), (["verify", CNN, ""], "B"),
])
def test_an_empty_path_is_a_usage_error_of_every_command(args, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = named_cli(*args)
    assert r.exit_code == 2, r.output
    command = args[0]
    assert r.stderr == (f"Usage error: Invalid value for '{name}': empty path. Try 'onemodel "
                        f"{command} --help' for help.\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["run", "m.onnx", "--random", "--seed", "-1"],
    ["verify", "a", "--run", "--seed", "-1"],
])
def test_a_negative_seed_is_a_usage_error_naming_the_flag(args):
    """A negative --seed was an internal ValueError (exit 2 with a traceback-like line); it is
    a usage error naming --seed, before any file is read."""
    r = named_cli(*args)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("Usage error: Invalid value for '--seed': '-1' is not an integer "
                               ">= 0. Try 'onemodel ")
    assert "internal error" not in r.output



@pytest.mark.parametrize("command", [["info"], ["check"], ["hash"], ["infer", "{out}"],
                                     ["convert", "{out}"]])
def test_an_empty_file_is_malformed_on_one_line_for_every_command(tmp_path, command):
    # found by a new-user trial: check listed the empty ModelProto's missing fields (exit 1)
    # while info refused it (exit 2)
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    out = str(tmp_path / "o.onnx")
    args = [command[0], str(p), *(a.format(out=out) for a in command[1:])]
    r = subprocess.run([sys.executable, "-c", "from onemodel.cli import main; main()", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert lines == [f"Malformed: the file is empty (0 bytes): it holds no model at offset 0x0 "
                     f"in {p}"]
    assert not (tmp_path / "o.onnx").exists()
