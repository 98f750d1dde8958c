"""The command line when its surroundings end it: SIGTERM undoes the writes in progress, a
closed stdout ends it quietly with the status of SIGPIPE (141), never 1 (verify: different)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CLI = [sys.executable, "-m", "onemodel"]


@pytest.mark.parametrize("layout", [[], ["--external-data", "w.bin"]], ids=["onemodel", "onnx"])
def test_sigterm_during_a_write_leaves_nothing_behind(tmp_path, layout):
    """The process sends itself SIGTERM while the first tensor is copied (model file or data
    file): exit 143, one line, and no destination and no temporary file in the directory."""
    dst = tmp_path / ("m.onnx" if layout else "m.onemodel")
    src = MODELS / "transformer_dynamo.onnx"
    code = textwrap.dedent(f"""
        import os, signal, sys
        from onemodel.storage import base, local
        def kill_self(self, *a, **k):
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM was not delivered")
        base.Sink.write_zeros = kill_self  # padding comes before the first tensor's bytes
        local.LocalSink.write_zeros = kill_self
        sys.argv = ["onemodel", "convert", {str(src)!r}, {str(dst)!r}] + {layout!r}
        from onemodel.cli import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip() == "terminated"
    assert os.listdir(tmp_path) == []


def _closed_stdout(args) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe whose reading end is already closed."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(CLI + [str(a) for a in args], stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(w)


@pytest.mark.parametrize("args", [
    ["--version"],
    ["info", MODELS / "cnn_legacy.onnx"],  # rich tables
    ["info", "--json", MODELS / "cnn_legacy.onnx"],
    ["verify", MODELS / "cnn_legacy.onnx", MODELS / "cnn_dynamo.onnx"],  # would exit 1
    ["--help"], ["info", "--help"], ["scan", "-h"], [],  # typer's own rich console: it gave 1
], ids=["version", "info", "info-json", "verify", "help", "info-help", "scan-h", "no-args"])
def test_a_closed_stdout_ends_quietly_with_141(args):
    done = _closed_stdout(args)
    assert done.returncode == 141 and done.stderr == ""


# -- a signal while the command line is still importing (the first ~0.1 s) -------------------

def _sigint_as_at_a_terminal() -> None:
    """In the child before it runs: SIGINT's default disposition, as a command typed at a
    terminal has it. A job a shell starts in the background (``.ci/run`` runs ``make
    test-pythons`` so) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt
    handler: the signal would do nothing, which is not what these tests are about."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


_SIGNAL_AT_IMPORT = textwrap.dedent("""
    import os, runpy, signal, sys
    module, signame, src, dst = sys.argv[1:]
    class SignalAtImport:  # sends the signal when the module is about to be imported
        def find_spec(self, name, path=None, target=None):
            if name == module:
                os.kill(os.getpid(), getattr(signal, signame))
            return None
    sys.meta_path.insert(0, SignalAtImport())
    sys.argv = ["onemodel", "convert", src, dst]
    runpy.run_module("onemodel", run_name="__main__")  # python -m onemodel
""")


@pytest.mark.parametrize("module", ["onemodel.cli", "typer", "typer._click",
                                    "onemodel.cli.application", "onemodel.cli.convert",
                                    "onemodel.api", "onemodel.storage", "onemodel.formats"])
@pytest.mark.parametrize("signame, status, line", [("SIGINT", 130, "interrupted"),
                                                    ("SIGTERM", 143, "terminated")])
def test_a_signal_while_the_command_line_imports(tmp_path, module, signame, status, line):
    """Ctrl-C or SIGTERM while a module of the command line is imported: one line and 130 or
    143, no traceback of the imports (the signal is sent by the import of ``module``)."""
    done = subprocess.run([sys.executable, "-c", _SIGNAL_AT_IMPORT, module, signame,
                           str(MODELS / "cnn_dynamo.onnx"), str(tmp_path / "m.onemodel")],
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=_sigint_as_at_a_terminal)
    assert (done.returncode, done.stderr) == (status, line + "\n")
    assert os.listdir(tmp_path) == []


def _run_interrupted(dst, delay: float) -> tuple[int, str]:
    """``python -m onemodel convert`` sent SIGINT ``delay`` seconds after its entry point
    (:mod:`onemodel.entry`) is imported: the moment is read from ``-X importtime``'s line for
    that module as the child writes it, not guessed from a start-up time measured beforehand
    (which a loaded machine outlasts, putting the signal in the interpreter's own start, before
    any onemodel code). Returns the status and stderr without the import-time lines."""
    import signal
    import threading
    import time

    p = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "onemodel", "convert",
                          str(MODELS / "cnn_dynamo.onnx"), str(dst)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_sigint_as_at_a_terminal)
    lines: list[str] = []
    entered = threading.Event()

    def read() -> None:
        for line in p.stderr:
            lines.append(line)
            if line.startswith("import time:") and line.rstrip().endswith(" onemodel.entry"):
                entered.set()
        entered.set()  # (ended before: nothing to wait for)

    reader = threading.Thread(target=read)
    reader.start()
    assert entered.wait(60)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=120)
    reader.join(60)
    return p.returncode, "".join(x for x in lines if not x.startswith("import time:"))


def test_ctrl_c_in_the_first_tenth_of_a_second(tmp_path):
    """The user's case: Ctrl-C 0 to 100 ms after onemodel's entry point is running, while
    `python -m onemodel convert` imports the rest of its modules: `interrupted` and 130 (or,
    should the command be done already, 0), never a traceback of the imports nor death by
    SIGINT (-2)."""
    outcomes = []
    for delay in (0, 0.02, 0.05, 0.1):
        for trial in range(3):
            code, err = _run_interrupted(tmp_path / f"m{delay}-{trial}.onemodel", delay)
            outcomes.append((delay, code, err))
            assert "Traceback" not in err, (delay, err)
            assert (code, err) in ((130, "interrupted\n"), (0, "")), (delay, code, err)
    assert any(code == 130 for _, code, _ in outcomes), outcomes


_SIGNAL_AT_THE_END = textwrap.dedent("""
    import atexit, os, runpy, signal, sys, time
    when, signame, src, dst = sys.argv[1:]
    def send():
        os.kill(os.getpid(), getattr(signal, signame))
        time.sleep(0.2)  # (delivered by now, whatever its handler does)
    if when == "atexit":  # registered after onemodel.entry's: run before its own
        import onemodel.entry
        atexit.register(send)
    else:  # as the modules are destroyed, after Python reset its handlers
        class SendWhenDestroyed:
            def __del__(self):
                send()
        sys.modules["__end__"] = type(sys)("__end__")
        sys.modules["__end__"].x = SendWhenDestroyed()
    sys.argv = ["onemodel", "convert", src, dst]
    runpy.run_module("onemodel", run_name="__main__")  # python -m onemodel
""")


@pytest.mark.parametrize("when", ["atexit", "teardown"])
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_once_the_command_is_done_keeps_its_status(tmp_path, when, signame):
    """Ctrl-C or SIGTERM after the command has written everything, while the interpreter ends
    (an atexit callback, the modules' teardown after Python reset its signal handlers to the
    default): the command's status (0) and nothing on stderr, the output whole; not death by
    the signal (-2, -15), which a Ctrl-C at the end of a convert gave under load."""
    dst = tmp_path / "m.onemodel"
    done = subprocess.run([sys.executable, "-c", _SIGNAL_AT_THE_END, when, signame,
                           str(MODELS / "cnn_dynamo.onnx"), str(dst)],
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=_sigint_as_at_a_terminal)
    assert (done.returncode, done.stderr) == (0, "")
    import onemodel

    with onemodel.load(str(dst)) as m:
        assert len(m.graph.nodes) > 0
