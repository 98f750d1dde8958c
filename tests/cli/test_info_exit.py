"""How ``onemodel info`` ends: os._exit only when nothing is left for the interpreter's exit to do,
and collections paused while the model is read."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import onemodel.cli as cli
import onemodel.cli.application as application

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
MODEL = MODELS / "cnn_dynamo.onnx"


def _main(prelude: str, *args: str) -> subprocess.CompletedProcess:
    """``onemodel ARGS`` through cli.main() in a fresh process, after ``prelude`` ran; os._exit
    is wrapped so that the test sees whether it was taken."""
    code = textwrap.dedent("""
        import os, sys
        real_exit = os._exit
        def _exit(code):
            os.write(2, b"[os._exit %d]" % code)
            real_exit(code)
        os._exit = _exit
        import onemodel.cli as cli
    """) + textwrap.dedent(prelude) + "\ncli.main()\n"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=120)


def test_info_ends_with_os_exit_and_prints_everything():
    expected = CliRunner().invoke(cli.app, ["info", str(MODEL)])
    assert expected.exit_code == 0
    done = _main("", "info", str(MODEL))
    assert done.returncode == 0
    assert done.stderr == "[os._exit 0]"
    assert done.stdout == expected.stdout  # flushed before leaving
    done = _main("", "info", "--json", str(MODEL))
    assert done.returncode == 0 and done.stderr == "[os._exit 0]"
    assert '"nodes": 14' in done.stdout and done.stdout.rstrip().endswith("}")


def test_errors_and_other_commands_exit_as_usual():
    done = _main("", "info", str(MODELS / "no-such.onnx"))
    assert done.returncode == 2
    assert "[os._exit" not in done.stderr and "no-such.onnx" in done.stderr
    done = _main("", "--version")
    assert done.returncode == 0 and "[os._exit" not in done.stderr


def test_atexit_callbacks_registered_by_the_command_still_run():
    prelude = """
        import atexit
        from onemodel import api
        load = api.load
        def load_and_register(*a, **k):
            atexit.register(lambda: print("atexit ran", flush=True))
            return load(*a, **k)
        api.load = load_and_register
    """
    done = _main(prelude, "info", str(MODEL))
    assert done.returncode == 0
    assert "[os._exit" not in done.stderr
    assert done.stdout.rstrip().endswith("atexit ran")


def test_a_running_thread_is_waited_for():
    """A thread the command started is still at work when the way out is chosen: it waits for
    an event set only after that choice (a thread that slept a fixed time instead could end
    first on a loaded machine, and then the fast exit is right), so the process must end the
    usual way, which waits for the thread."""
    prelude = """
        import threading
        from onemodel import api
        import onemodel.cli.application as application
        load, exit_now = api.load, application._exit_now
        decided = threading.Event()
        def load_and_start(*a, **k):
            def late():
                decided.wait()
                print("thread done", flush=True)
            threading.Thread(target=late).start()
            return load(*a, **k)
        def exit_now_then_release(code):
            try:
                exit_now(code)
            finally:
                decided.set()
        api.load = load_and_start
        application._exit_now = exit_now_then_release
    """
    done = _main(prelude, "info", str(MODEL))
    assert done.returncode == 0
    assert "[os._exit" not in done.stderr
    assert "thread done" in done.stdout


def test_collections_paused_in_the_commands_process_and_the_records_frozen():
    code = textwrap.dedent("""
        import gc
        import onemodel.cli.application as cli
        cli._own_process = True
        before = gc.get_freeze_count()
        with cli._no_collections():
            paused = not gc.isenabled()
            kept = [[i] for i in range(50000)]
        print(paused, gc.isenabled(), gc.get_freeze_count() - before >= 50000)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["True", "True", "True"]


def test_under_a_test_runner_collections_resume_and_nothing_is_frozen():
    frozen = gc.get_freeze_count()
    assert not application._own_process
    result = CliRunner().invoke(cli.app, ["info", str(MODEL)])
    assert result.exit_code == 0, result.output
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
    assert application._kept_to_exit == []  # the model is not kept past the command


@pytest.mark.parametrize("extra, paused", [((), True), (("--opset", "21"), True),
                                           (("--opset", "21", "--verify-run"), False)])
def test_convert_pauses_collections_but_not_for_verify_run(tmp_path, monkeypatch, extra,
                                                           paused):
    from onemodel import api

    seen = []
    real = api.convert

    def watched(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(api, "convert", watched)
    result = CliRunner().invoke(cli.app, ["convert", str(MODEL), str(tmp_path / "o.onnx"),
                                          *extra])
    assert result.exit_code == 0, result.output
    assert seen == [not paused] and gc.isenabled()
