"""The ONNX conformance test vectors through the OneModel container: for every model,
ONNX -> OneModel -> ONNX gives back the original bytes, and OneModel -> ONNX -> OneModel gives
back the same OneModel bytes."""

from __future__ import annotations

from onemodel.formats.container import read_bytes, write_bytes
from onemodel.formats.onnx import decode_model, encode_model


def test_conformance_models_through_onemodel(conformance_cases):
    failures = []
    count = 0
    for case in conformance_cases:
        data = case.model_path.read_bytes()
        try:
            om = write_bytes(decode_model(data))
            back = encode_model(read_bytes(om))
            if back != data:
                failures.append(f"{case.id}: ONNX -> OneModel -> ONNX differs")
                continue
            again = write_bytes(decode_model(back))
            if again != om:
                failures.append(f"{case.id}: OneModel -> ONNX -> OneModel differs")
        except Exception as e:  # noqa: BLE001 - collected, reported below
            failures.append(f"{case.id}: {type(e).__name__}: {e}")
        count += 1
    assert count >= 1900
    assert not failures, f"{len(failures)} of {count} failed; first: {failures[:10]}"
