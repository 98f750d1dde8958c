"""Float32, the value of AttributeProto.f: a float that keeps its exact binary32 pattern."""

from __future__ import annotations

import copy
import pickle
import struct

import numpy as np
import pytest

from onemodel.ir import Attribute, AttributeType, Float32, f32_bits


def test_a_value_is_rounded_to_float32_and_keeps_its_pattern():
    v = Float32(0.1)
    assert v.bits == 0x3DCCCCCD
    assert v == float(np.float32(0.1)) and v != 0.1  # the float32 value, widened exactly
    assert isinstance(v, float) and repr(v) == "Float32(0.10000000149011612)"


@pytest.mark.parametrize("bits", [0x7F800001, 0x7FA00001, 0xFFC00123, 0x80000000, 0x7F800000,
                                  0x00000001, 0x3F800000])
def test_every_pattern_survives_from_bits_copy_and_pickle(bits):
    v = Float32.from_bits(bits)
    assert v.bits == bits
    assert copy.deepcopy(v).bits == bits and copy.copy(v).bits == bits
    assert pickle.loads(pickle.dumps(v)).bits == bits
    assert f32_bits(v) == bits
    assert struct.pack("<f", v) == struct.pack("<I", bits) or v != v  # NaNs: a float is quiet


def test_f32_bits_takes_numpy_scalars_and_plain_numbers():
    assert f32_bits(np.float32(-0.0)) == 0x80000000
    assert f32_bits(np.array([0x7F800001], "<u4").view("<f4")[0]) == 0x7F800001
    assert f32_bits(1.0) == 0x3F800000 and f32_bits(1) == 0x3F800000
    assert f32_bits(0.1) == 0x3DCCCCCD


def test_out_of_range_patterns_are_refused():
    with pytest.raises(struct.error):
        Float32.from_bits(1 << 32)
    with pytest.raises(struct.error):
        Float32.from_bits(-1)


def test_record_equality_compares_patterns_not_numbers():
    def attr(f):
        return Attribute(name="a", type=int(AttributeType.FLOAT), f=f)
    assert attr(Float32.from_bits(0x7FC00000)) == attr(Float32.from_bits(0x7FC00000))  # NaN == NaN
    assert attr(Float32.from_bits(0x7FC00000)) != attr(Float32.from_bits(0x7FC00001))
    assert attr(Float32(0.0)) != attr(Float32(-0.0))
    assert attr(Float32(0.5)) == attr(np.float32(0.5)) == attr(0.5)


def test_attributes_made_from_numbers_hold_float32():
    a = Attribute.make("alpha", 0.2)
    assert type(a.f) is Float32 and a.f.bits == 0x3E4CCCCD and a.type == AttributeType.FLOAT
