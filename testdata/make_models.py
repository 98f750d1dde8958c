"""Make the small real-exporter models in testdata/models/ (deterministic: fixed seeds).

Run from the repository root:

    .venv/bin/python testdata/make_models.py

Needs the dev-only packages torch (CPU build), onnxscript (for the dynamo exporter), scikit-learn,
skl2onnx, onnx and onnxruntime. None of them is a runtime dependency of onemodel: this script, like
the tests, uses them only to produce and check reference files.

Every model is written, then checked with ``onnx.checker.check_model`` and run with onnxruntime on
a fixed input; for the torch models the onnxruntime outputs are compared with the eager torch
outputs, for the scikit-learn pipeline with ``predict`` / ``predict_proba``. The script stops with a
non-zero exit code if any check fails and prints one line per file (size in bytes, sha256 prefix,
opset imports, check result).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import sys
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "models"

SEED = 0
OPSET_LEGACY = 17
TRACED_SEQ = 16  # sequence length of the transformer export example


def _seed_everything() -> None:
    import torch

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.use_deterministic_algorithms(True)


# --------------------------------------------------------------------------------------------
# The networks
# --------------------------------------------------------------------------------------------


def _make_cnn():
    """A small CNN: Conv-BN-ReLU stem, a residual block, MaxPool, GAP, Flatten, Linear.

    Input float32 [N, 3, 32, 32], output float32 [N, 10]. One BatchNorm2d sits after the residual
    Add, where no exporter can fold it into a Conv, so the exported graphs keep a
    BatchNormalization node; the BatchNorm running statistics are set to non-trivial values.
    """
    import torch
    from torch import nn

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
            self.conv1 = nn.Conv2d(16, 16, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(16)
            self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
            self.bn_after_add = nn.BatchNorm2d(16)
            self.pool = nn.MaxPool2d(2)
            self.conv3 = nn.Conv2d(16, 32, 3, padding=1)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(32, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.stem(x)
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.conv2(y)
            x = torch.relu(self.bn_after_add(x + y))
            x = self.pool(x)
            x = torch.relu(self.conv3(x))
            x = self.flatten(self.gap(x))
            return self.fc(x)

    torch.manual_seed(SEED)
    model = SmallCNN()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                n = module.num_features
                module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                module.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                module.bias.copy_(torch.randn(n, generator=gen) * 0.1)
    return model.eval()


def _make_transformer():
    """Token embedding + a 2-layer nn.TransformerEncoder (d_model 64, 4 heads, batch_first) + head.

    Input int64 token ids [batch, seq] in [0, 100), output float32 [batch, seq, 10].
    """
    import torch
    from torch import nn

    class SmallTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(100, 64)
            layer = nn.TransformerEncoderLayer(
                d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.head = nn.Linear(64, 10)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.embed(tokens)))

    torch.manual_seed(SEED)
    model = SmallTransformer()
    # nn.TransformerEncoder deep-copies one layer, so both layers start with equal weights; make
    # them differ so that no initializer is a duplicate of another.
    gen = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for param in model.encoder.layers[1].parameters():
            param.add_(torch.randn(param.shape, generator=gen) * 0.02)
    return model.eval()


def _make_mlp():
    """A small MLP 64 -> 256 -> 256 -> 10 (about 330 KB of float32 weights)."""
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    return nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    ).eval()


# --------------------------------------------------------------------------------------------
# Exporters
# --------------------------------------------------------------------------------------------


def _export_legacy(model, args, path: pathlib.Path, input_names, output_names, dynamic_axes) -> None:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            str(path),
            dynamo=False,
            opset_version=OPSET_LEGACY,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            do_constant_folding=True,
        )


def _export_dynamo(model, args, path: pathlib.Path, input_names, output_names, dynamic_shapes,
                   external_data: bool) -> None:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            model,
            args,
            dynamo=True,
            input_names=input_names,
            output_names=output_names,
            dynamic_shapes=dynamic_shapes,
        )
    # ONNXProgram.save is what torch.onnx.export(f=...) calls; external_data=True writes the
    # initializers to "<file>.data" next to the model, the layout the exporter produces itself.
    program.save(str(path), external_data=external_data)


def make_cnn_models() -> list[pathlib.Path]:
    import torch

    model = _make_cnn()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(SEED))
    legacy = OUT / "cnn_legacy.onnx"
    _export_legacy(model, (x,), legacy, ["input"], ["logits"],
                   {"input": {0: "batch"}, "logits": {0: "batch"}})
    dynamo = OUT / "cnn_dynamo.onnx"
    batch = torch.export.Dim("batch", min=1, max=1024)
    _export_dynamo(model, (x,), dynamo, ["input"], ["logits"], {"x": {0: batch}},
                   external_data=False)
    return [legacy, dynamo]


def make_transformer_models() -> list[pathlib.Path]:
    import torch

    model = _make_transformer()
    tokens = torch.randint(0, 100, (2, TRACED_SEQ), generator=torch.Generator().manual_seed(SEED))
    # The TorchScript exporter records the sequence length of this example as a constant in the
    # attention Reshape nodes although the input declares dim_param "seq" (pytorch issue #110347):
    # transformer_legacy.onnx runs for any batch but only for seq == TRACED_SEQ. That is how the
    # real exporter behaves, so the file keeps it.
    legacy = OUT / "transformer_legacy.onnx"
    _export_legacy(model, (tokens,), legacy, ["tokens"], ["logits"],
                   {"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
    dynamo = OUT / "transformer_dynamo.onnx"
    batch = torch.export.Dim("batch", min=1, max=1024)
    seq = torch.export.Dim("seq", min=2, max=4096)
    _export_dynamo(model, (tokens,), dynamo, ["tokens"], ["logits"],
                   {"tokens": {0: batch, 1: seq}}, external_data=False)
    return [legacy, dynamo]


def make_external_mlp() -> list[pathlib.Path]:
    import torch

    model = _make_mlp()
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(SEED))
    (OUT / "external").mkdir(parents=True, exist_ok=True)
    path = OUT / "external" / "mlp_dynamo.onnx"
    for stale in (OUT / "external").glob("mlp_dynamo.onnx*"):
        stale.unlink()
    batch = torch.export.Dim("batch", min=1, max=1024)
    _export_dynamo(model, (x,), path, ["input"], ["output"], {"input": {0: batch}},
                   external_data=True)
    return [path]


def make_sklearn_pipeline() -> list[pathlib.Path]:
    from skl2onnx import to_onnx

    pipe, features = _fit_pipeline()
    # Default options: the classifier gets a label output and a ZipMap probability output
    # (a sequence of map(int64, float)).
    onx = to_onnx(pipe, features[:1])
    path = OUT / "sklearn_pipeline_zipmap.onnx"
    path.write_bytes(onx.SerializeToString())
    return [path]


def _fit_pipeline():
    """StandardScaler + LogisticRegression fitted on a fixed synthetic 3-class set of 300 rows x 8
    float32 features; returns (pipeline, features)."""
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    features, labels = make_classification(
        n_samples=300, n_features=8, n_informative=5, n_classes=3, random_state=SEED
    )
    features, labels = features.astype(np.float32), labels.astype(np.int64)
    pipe = Pipeline([("scale", StandardScaler()),
                     ("clf", LogisticRegression(max_iter=500, random_state=SEED))])
    return pipe.fit(features, labels), features


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


def _run_ort(path: pathlib.Path, feeds: dict) -> list:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def check_torch_model(path: pathlib.Path, model, inputs) -> str:
    """Check a torch-exported model and compare onnxruntime with eager torch on ``inputs``."""
    import onnx
    import torch

    onnx.checker.check_model(str(path))
    proto = onnx.load(str(path), load_external_data=False)
    external = [t.name for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if path.parent == OUT:  # top-level files keep every initializer inline
        assert not external and not path.with_name(path.name + ".data").exists(), path
    else:
        assert external, path
    with torch.no_grad():
        expected = model(*[torch.from_numpy(a) for a in inputs]).numpy()
    names = [i.name for i in proto.graph.input]
    (got,) = _run_ort(path, dict(zip(names, inputs)))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    return f"checker ok; onnxruntime == torch (rtol 1e-4, atol 1e-5) on input shapes {[a.shape for a in inputs]}"


def check_sklearn_model(path: pathlib.Path) -> str:
    import onnx

    onnx.checker.check_model(str(path))
    pipe, features = _fit_pipeline()
    label, proba = _run_ort(path, {"X": features[:20]})
    np.testing.assert_array_equal(label, pipe.predict(features[:20]))
    assert isinstance(proba, list) and isinstance(proba[0], dict), type(proba)
    got = np.array([[row[k] for k in sorted(row)] for row in proba])
    np.testing.assert_allclose(got, pipe.predict_proba(features[:20]), rtol=1e-4, atol=1e-5)
    return "checker ok; onnxruntime label == predict, ZipMap list[dict] == predict_proba on 20 rows"


def _describe(path: pathlib.Path) -> str:
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    opsets = ",".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in proto.opset_import)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return (f"{path.relative_to(HERE)}: {path.stat().st_size} bytes sha256:{digest} ir_version={proto.ir_version} "
            f"producer={proto.producer_name} {proto.producer_version} opsets={opsets}")


# --------------------------------------------------------------------------------------------
# The detector (written on its own: `make_models.py detector`; placed after every other network so
# that adding it moved none of their source lines)
# --------------------------------------------------------------------------------------------

DETECTOR_SIZE = 64  # input height and width of the detector's export example
DETECTOR_CLASSES = 4
DETECTOR_ANCHORS = 3


def _make_detector():
    """A small YOLO-style detector: Conv-BN-SiLU backbone with four stride-2 stages, a two-level
    FPN (nearest Upsample x2, Concat, Conv), and a head per level (1x1 Conv to anchors x (5 +
    classes), Reshape, Transpose, Sigmoid), both levels concatenated.

    Input float32 [N, 3, 64, 64], output float32 [N, 3*(8*8 + 4*4), 9] (per anchor and cell: box
    x, y, w, h, objectness, 4 class scores, all after a Sigmoid). BatchNorm statistics are random.
    """
    import torch
    from torch import nn

    def cbs(cin, cout, k, s):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout),
                             nn.SiLU())

    outs = DETECTOR_ANCHORS * (5 + DETECTOR_CLASSES)

    class TinyDetector(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = cbs(3, 8, 3, 2)            # 1/2
            self.stage1 = cbs(8, 16, 3, 2)         # 1/4
            self.stage2 = cbs(16, 32, 3, 2)        # 1/8  -> P3
            self.stage3 = cbs(32, 48, 3, 2)        # 1/16 -> P4
            self.lateral = cbs(48, 32, 1, 1)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = cbs(64, 32, 3, 1)
            self.head3 = nn.Conv2d(32, outs, 1)
            self.head4 = nn.Conv2d(48, outs, 1)

        def _level(self, head, x):
            n, _, h, w = x.shape
            y = head(x).reshape(n, DETECTOR_ANCHORS, 5 + DETECTOR_CLASSES, h, w)
            return y.permute(0, 1, 3, 4, 2).reshape(n, -1, 5 + DETECTOR_CLASSES).sigmoid()

        def forward(self, x):
            p3 = self.stage2(self.stage1(self.stem(x)))
            p4 = self.stage3(p3)
            f3 = self.fuse(torch.cat([self.up(self.lateral(p4)), p3], dim=1))
            return torch.cat([self._level(self.head3, f3), self._level(self.head4, p4)], dim=1)

    torch.manual_seed(SEED + 3)
    model = TinyDetector()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def make_detector() -> list[pathlib.Path]:
    import torch

    model = _make_detector()
    x = torch.randn(1, 3, DETECTOR_SIZE, DETECTOR_SIZE,
                    generator=torch.Generator().manual_seed(SEED))
    path = OUT / "detector_legacy.onnx"
    _export_legacy(model, (x,), path, ["images"], ["detections"],
                   {"images": {0: "batch"}, "detections": {0: "batch"}})
    return [path]


def main_detector() -> int:
    """Write and check only detector_legacy.onnx (the other files are left as they are)."""
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    _seed_everything()
    rng = np.random.default_rng(SEED)
    (path,) = make_detector()
    x = rng.standard_normal((2, 3, DETECTOR_SIZE, DETECTOR_SIZE), dtype=np.float32)
    result = check_torch_model(path, _make_detector(), [x])
    print(f"torch {torch.__version__}")
    print(_describe(path))
    print(f"    {result}")
    return 0


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # skl2onnx orders opset_import by iterating a set of domain strings, so the bytes depend
        # on Python's string hash seed; run again with a fixed seed.
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, str(pathlib.Path(__file__).resolve()), *sys.argv[1:]], env)

    if sys.argv[1:] == ["detector"]:
        return main_detector()
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    _seed_everything()
    rng = np.random.default_rng(SEED)
    report = []

    cnn_paths = make_cnn_models()
    cnn = _make_cnn()
    for path in cnn_paths:
        x = rng.standard_normal((3, 3, 32, 32), dtype=np.float32)
        report.append((path, check_torch_model(path, cnn, [x])))

    tr_paths = make_transformer_models()
    tr = _make_transformer()
    for path in tr_paths:
        seq = TRACED_SEQ if path.name == "transformer_legacy.onnx" else 11
        tokens = rng.integers(0, 100, size=(3, seq), dtype=np.int64)
        report.append((path, check_torch_model(path, tr, [tokens])))

    (mlp_path,) = make_external_mlp()
    report.append((mlp_path, check_torch_model(mlp_path, _make_mlp(),
                                               [rng.standard_normal((5, 64), dtype=np.float32)])))

    (skl_path,) = make_sklearn_pipeline()
    report.append((skl_path, check_sklearn_model(skl_path)))

    (det_path,) = make_detector()
    x = rng.standard_normal((2, 3, DETECTOR_SIZE, DETECTOR_SIZE), dtype=np.float32)
    report.append((det_path, check_torch_model(det_path, _make_detector(), [x])))

    print(f"torch {torch.__version__}")
    for path, result in report:
        print(_describe(path))
        print(f"    {result}")
    for data in sorted((OUT / "external").glob("*.data")):
        print(f"{data.relative_to(HERE)}: {data.stat().st_size} bytes "
              f"sha256:{hashlib.sha256(data.read_bytes()).hexdigest()[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
