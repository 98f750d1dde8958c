"""The progress bar: drawn only on a terminal, after the delay, never when quiet."""

from __future__ import annotations

import io

from rich.console import Console

from onemodel.storage import BytesSink, MemorySource, Progress, ProgressSink, open_sink


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=100), out


def test_bar_appears_on_a_terminal_after_the_delay():
    console, out = _console(True)
    with Progress("convert", total=3 << 20, delay=0.0, console=console) as bar:
        bar(1 << 20)
        bar(1 << 20)
        assert bar.shown and bar.done == 2 << 20
        bar._bar.refresh()
        text = out.getvalue()
    assert "convert" in text and "2.0/3.0 MiB" in text  # binary units, as summaries
    assert " MB" not in text and "MB/s" not in text
    assert not bar.shown


def test_no_bar_before_the_delay():
    console, out = _console(True)
    with Progress("convert", total=100, delay=3600, console=console) as bar:
        bar(50)
        assert not bar.shown and bar.done == 50
    assert out.getvalue() == ""


def test_no_bar_when_quiet_or_not_a_terminal():
    for quiet, terminal in ((True, True), (False, False)):
        console, out = _console(terminal)
        with Progress("download", total=100, quiet=quiet, delay=0.0, console=console) as bar:
            bar(100)
            assert not bar.shown
        assert out.getvalue() == ""


def test_default_console_is_stderr_not_stdout(capsys):
    with Progress("download", total=10, delay=0.0) as bar:
        bar(10)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # captured streams are not terminals


def test_progress_sink_counts_writes_zeros_and_copies():
    seen = []
    inner = BytesSink()
    sink = ProgressSink(inner, seen.append)
    sink.write(b"abc")
    sink.write_zeros(5)
    sink.copy_from(MemorySource(b"0123456789"), 2, 4)
    sink.commit()
    assert seen == [3, 5, 4] and sink.tell() == 12
    assert inner.getvalue() == b"abc" + bytes(5) + b"2345"


def test_open_sink_with_progress(tmp_path):
    seen = []
    with open_sink(str(tmp_path / "m.bin.zst"), progress=seen.append) as sink:
        sink.write(b"x" * 1000)
    assert seen == [1000]  # uncompressed bytes


def test_a_conversion_counts_the_bytes_of_every_file_it_writes(tmp_path):
    """ONNX output with external data: the bytes of the data files count on the same bar as the
    model file's, so the bar reaches the total instead of stalling at the model file's share."""
    from pathlib import Path

    import onemodel

    src = Path(__file__).resolve().parents[2] / "testdata" / "models" / "transformer_dynamo.onnx"
    seen = []
    dst = tmp_path / "out" / "model.onnx"
    dst.parent.mkdir()
    result = onemodel.convert(src, dst, layout="file", external_data="weights.bin",
                              progress=seen.append)
    data = dst.parent / "weights.bin"
    assert data.stat().st_size > result.tensor_bytes // 2  # most weights went to the data file
    assert sum(seen) == dst.stat().st_size + data.stat().st_size
    seen.clear()
    per = tmp_path / "per" / "model.onnx"
    per.parent.mkdir()
    onemodel.convert(src, per, layout="per_tensor", progress=seen.append)
    assert sum(seen) == sum(p.stat().st_size for p in per.parent.iterdir())


def test_rate_is_in_binary_units():
    from types import SimpleNamespace

    from onemodel.storage.progress import _speed_column
    column = _speed_column()
    assert column.render(SimpleNamespace(finished_speed=None, speed=3 << 20)).plain == \
        "3.0 MiB/s"
    assert column.render(SimpleNamespace(finished_speed=1536, speed=None)).plain == "1.5 KiB/s"
    assert column.render(SimpleNamespace(finished_speed=None, speed=None)).plain == "?"


def test_binary_size():
    from onemodel.storage.progress import binary_size
    assert [binary_size(n) for n in (0, 1023, 1024, 1536, 3 << 20, 5 << 30)] == \
        ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "3.0 MiB", "5.0 GiB"]



def test_a_gap_counts_as_bytes_of_the_file():
    # as padding did when it was written: the bar counts the bytes of every file's length
    seen = []
    sink = ProgressSink(BytesSink(), seen.append)
    sink.write(b"ab")
    sink.skip(10)
    sink.write(b"c")
    assert seen == [2, 10, 1] and sink.tell() == 13


def test_progress_sink_counts_a_blob_once_and_keeps_the_inner_copy_decision():
    from onemodel.storage.blob import Blob

    class Recording(BytesSink):
        def __init__(self):
            super().__init__()
            self.copies = []

        def copy_from(self, source, offset, length):
            self.copies.append((source, offset, length))
            super().copy_from(source, offset, length)

    seen, inner = [], Recording()
    sink = ProgressSink(inner, seen.append)
    src = MemorySource(bytes(range(32)))
    sink.write_blob(Blob(src, 4, 8))
    sink.commit()
    assert seen == [8] and inner.copies == [(src, 4, 8)]
    assert inner.getvalue() == bytes(range(4, 12))
