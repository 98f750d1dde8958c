"""The format packages are symmetric and their names unambiguous (issue 10, Build 4): each has a
``reader`` and a ``writer`` module whose ``read``/``write`` the plugin uses, and no function the
package exports hides a submodule of the same name (``import onemodel.formats.onnx.x`` gives
the module ``x``, and the package's attribute ``x`` is that module)."""

import importlib
import pkgutil
import types

import pytest

PACKAGES = ["onemodel.formats.onnx", "onemodel.formats.container"]


@pytest.mark.parametrize("name", PACKAGES)
def test_no_function_shares_a_name_with_a_submodule(name):
    pkg = importlib.import_module(name)
    subs = [m.name for m in pkgutil.iter_modules(pkg.__path__)]
    assert "reader" in subs and "writer" in subs
    for sub in subs:
        mod = importlib.import_module(f"{name}.{sub}")
        assert getattr(pkg, sub) is mod, f"{name}.{sub} is {getattr(pkg, sub)!r}, not the module"
        assert isinstance(mod, types.ModuleType)
    assert not set(pkg.__all__) & set(subs)


@pytest.mark.parametrize("name", PACKAGES)
def test_the_plugin_reads_with_the_reader_and_writes_with_the_writer(name):
    pkg = importlib.import_module(name)
    reader = importlib.import_module(f"{name}.reader")
    writer = importlib.import_module(f"{name}.writer")
    assert pkg.PLUGIN.read is reader.read is pkg.read
    assert pkg.PLUGIN.write is writer.write is pkg.write
