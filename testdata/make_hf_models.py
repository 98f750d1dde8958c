"""Make tiny random Hugging Face BERT and GPT-2 exports in testdata/models/ (fixed seeds).

Run from the repository root with the torch side environment (torch CPU, transformers, onnx,
onnxruntime are build-time generators only, never dependencies of onemodel):

    /work/torchenv/bin/python testdata/make_hf_models.py

Writes ``bert_tiny.onnx`` (``transformers.BertModel``) and ``gpt2_tiny.onnx``
(``transformers.GPT2LMHeadModel``, no past) with randomly initialised weights of tiny configs.
Both are exported by the TorchScript exporter (``torch.onnx.export(dynamo=False,
opset_version=17)``) with ``attn_implementation="eager"``: that is the graph shape onnxruntime's
transformer optimizer (``onnxruntime.transformers.optimizer``) matches best. With the "sdpa"
attention the optimizer fuses neither Attention nor EmbedLayerNormalization for BERT; with
"eager" it emits Attention, EmbedLayerNormalization, SkipLayerNormalization and BiasGelu for
BERT, and SkipLayerNormalization and FastGelu for GPT-2 (whose attention it does not fuse: its
GPT-2 patterns are those of older transformers releases).

Every file is checked with ``onnx.checker.check_model`` and run in onnxruntime on an input of
another batch size and sequence length than the export example; the outputs must equal eager
torch within rtol 1e-4, atol 1e-5. The script prints one line per file (bytes, sha256 prefix).

``type_vocab_size`` is 3 (BERT's default is 2) so that every integer input of the
evaluator's random inputs (integers in [0, 3), used by tests/evaluate/test_models.py) is a valid
token type.
"""

from __future__ import annotations

import hashlib
import pathlib
import sys
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "models"

SEED = 0
OPSET = 17
#: Tiny configurations: 2 layers, hidden 32, 2 heads (what the tests pass to the optimizer).
BERT = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64, type_vocab_size=3)
GPT2 = dict(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2,
            bos_token_id=0, eos_token_id=0)


def _export(module, args, path, input_names, output_names, dynamic) -> None:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=OPSET,
                          input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic, do_constant_folding=True)


def make_bert(path: pathlib.Path):
    """BertModel: inputs input_ids, attention_mask, token_type_ids int64 [batch, seq];
    outputs last_hidden_state f32 [batch, seq, 32], pooler_output f32 [batch, 32]."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(SEED)
    model = BertModel(BertConfig(attn_implementation="eager", **BERT)).eval()

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids, return_dict=False)
            return out[0], out[1]

    wrap = Wrap(model).eval()
    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, BERT["vocab_size"], (2, 8), generator=g)
    mask = torch.ones(2, 8, dtype=torch.int64)
    types = torch.zeros(2, 8, dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dyn = {n: {0: "batch", 1: "seq"} for n in names + ["last_hidden_state"]}
    dyn["pooler_output"] = {0: "batch"}
    _export(wrap, (ids, mask, types), path, names, ["last_hidden_state", "pooler_output"], dyn)

    ids = torch.randint(0, BERT["vocab_size"], (3, 11), generator=g)
    mask = torch.ones(3, 11, dtype=torch.int64)
    mask[1, 7:] = 0
    types = torch.zeros(3, 11, dtype=torch.int64)
    types[:, 5:] = 1
    with torch.no_grad():
        want = [t.numpy() for t in wrap(ids, mask, types)]
    return dict(zip(names, (ids.numpy(), mask.numpy(), types.numpy()))), want


def make_gpt2(path: pathlib.Path):
    """GPT2LMHeadModel without past: inputs input_ids, attention_mask int64 [batch, seq];
    output logits f32 [batch, seq, 100]."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(SEED)
    model = GPT2LMHeadModel(GPT2Config(attn_implementation="eager", **GPT2)).eval()

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                          return_dict=False)[0]

    wrap = Wrap(model).eval()
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, GPT2["vocab_size"], (2, 8), generator=g)
    mask = torch.ones(2, 8, dtype=torch.int64)
    names = ["input_ids", "attention_mask"]
    dyn = {n: {0: "batch", 1: "seq"} for n in names + ["logits"]}
    _export(wrap, (ids, mask), path, names, ["logits"], dyn)

    ids = torch.randint(0, GPT2["vocab_size"], (3, 11), generator=g)
    mask = torch.ones(3, 11, dtype=torch.int64)
    with torch.no_grad():
        want = [wrap(ids, mask).numpy()]
    return dict(zip(names, (ids.numpy(), mask.numpy()))), want


def _check(path: pathlib.Path, feeds: dict, want: list) -> None:
    import onnx
    import onnxruntime

    onnx.checker.check_model(str(path), full_check=True)
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=path.name)


def main() -> int:
    """Write and check both files; print their sizes and digests. Returns the exit code."""
    import onnx
    import onnxruntime
    import torch
    import transformers

    OUT.mkdir(exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}")
    for name, make in (("bert_tiny.onnx", make_bert), ("gpt2_tiny.onnx", make_gpt2)):
        path = OUT / name
        feeds, want = make(path)
        _check(path, feeds, want)
        data = path.read_bytes()
        print(f"{name}: {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:12]}, "
              "onnxruntime == torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
