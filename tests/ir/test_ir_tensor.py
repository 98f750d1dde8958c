"""onemodel.ir.tensor: the element count of dims and the content rules of a tensor, shared by
every reader, writer and kernel."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.errors import InvalidModelError, UnsupportedError
from onemodel.ir import INFO, DataType, SparseTensor, Tensor
from onemodel.ir.tensor import dims_text, element_count, sparse_problem, tensor_problem
from onemodel.limits import MAX_ELEMENT_COUNT
from onemodel.storage.base import Source
from onemodel.storage.blob import Blob


@pytest.mark.parametrize("dims, count", [
    ([], 1), ([7], 7), ([2, 3, 4], 24), ([0, 5], 0), ([1 << 40, 1 << 40, 0], 0),
    ([(1 << 60) - 1], (1 << 60) - 1), ([1 << 30, (1 << 30) - 1], (1 << 60) - (1 << 30))])
def test_element_count_is_the_product_of_dims(dims, count):
    assert element_count(dims) == count


def test_a_negative_dimension_is_refused_with_its_index_even_after_a_zero():
    with pytest.raises(InvalidModelError) as info:
        element_count([3, 0, -2], "manifest.graph.initializers[0].dims")
    assert info.value.path == "manifest.graph.initializers[0].dims[2]"
    assert "-2" in info.value.message


@pytest.mark.parametrize("dims", [[1 << 60], [1 << 30, 1 << 30], [2, 1 << 59]])
def test_a_count_of_2_60_or_more_is_unsupported(dims):
    assert MAX_ELEMENT_COUNT == 1 << 60
    with pytest.raises(UnsupportedError) as info:
        element_count(dims, "p")
    assert info.value.path == "p" and "2^60" in info.value.message


@pytest.mark.parametrize("dims", [[1 << 40, 1 << 40], [1 << 63], [2, 3, (1 << 62) + 1]])
def test_a_count_past_int64_is_invalid(dims):
    with pytest.raises(InvalidModelError, match="overflows 64 bits"):
        element_count(dims)


def test_a_lower_limit_can_be_asked_for():
    assert element_count([255], limit=256) == 255
    with pytest.raises(UnsupportedError, match=r"256 elements, 2\^8 or more"):
        element_count([16, 16], limit=256)


def test_many_huge_dims_stay_cheap_and_the_message_short():
    dims = [(1 << 62) + 1] * 60_000
    with pytest.raises(InvalidModelError) as info:
        element_count(dims)
    assert len(str(info.value)) < 200
    assert dims_text(dims) == "[" + ", ".join([str((1 << 62) + 1)] * 6) + ", ...]"
    assert dims_text([1, 2]) == "[1, 2]"


def test_tensor_size_checks_its_dims():
    assert Tensor(dims=[2, 5]).size == 10
    with pytest.raises(InvalidModelError) as info:
        _ = Tensor(name="w", dims=[4, -1]).size
    assert info.value.path == "w.dims[1]"


@pytest.mark.parametrize("code, count, values", [
    (DataType.INT4, 5, 3), (DataType.UINT2, 5, 2), (DataType.FLOAT6E2M3, 5, 5),
    (DataType.COMPLEX64, 3, 6), (DataType.FLOAT, 3, 3), (DataType.BFLOAT16, 0, 0)])
def test_typed_count_follows_table_7(code, count, values):
    assert INFO[code].typed_count(count) == values


@pytest.mark.parametrize("tensor, problem", [
    (Tensor(data_type=1, dims=[2], raw_data=bytes(8)), None),
    (Tensor(data_type=22, dims=[5], int32_data=np.zeros(3, "<i4")), None),
    (Tensor(data_type=22, dims=[5], int32_data=np.zeros(5, "<i4")),
     (InvalidModelError, "5 values in int32_data for 5 elements of INT4 (3 expected)")),
    (Tensor(data_type=1, dims=[1], raw_data=bytes(4), float_data=np.zeros(1, "<f4")),
     (InvalidModelError, "contents in more than one storage field (Clause 6.3.4)")),
    (Tensor(data_type=99, dims=[1]), (UnsupportedError, "element type 99 is not in Table 5")),
    (Tensor(data_type=1, dims=[-1]),
     (InvalidModelError, "dimension -1 at index 0 of dims [-1] is negative")),
    (Tensor(data_type=1, dims=[3], raw_data=bytes(8)),
     (InvalidModelError, "raw_data holds 8 bytes; dims [3] of FLOAT need 12")),
])
def test_tensor_problem_names_the_first_problem(tensor, problem):
    assert tensor_problem(tensor) == problem


def _sparse(values, indices, dims):
    return SparseTensor(values=Tensor.from_numpy(np.asarray(values), name="sp"),
                        indices=None if indices is None else Tensor.from_numpy(
                            np.asarray(indices, np.int64)), dims=dims)


def test_to_dense_places_values_at_linear_or_coordinate_indices():
    assert _sparse([5.0, 6.0], [1, 3], [4]).to_dense().tolist() == [0, 5, 0, 6]
    assert _sparse([5, 6], [[0, 2], [1, 0]], [2, 3]).to_dense().tolist() == [[0, 0, 5], [6, 0, 0]]
    assert _sparse(np.zeros(0, np.float32), None, [2]).to_dense().tolist() == [0, 0]
    strings = _sparse(np.array([b"a"], dtype=object), [1], [2]).to_dense()
    assert strings.tolist() == [b"", b"a"]


@pytest.mark.parametrize("sparse, message", [
    (_sparse([5.0], [0, 1], [4]), "sparse tensor 'sp': indices: indices of dims [2] for 1 values "
     "of a rank-1 tensor: [1] (linear) or [1, 1] (coordinates) expected"),
    (_sparse([5.0, 6.0], [0, 4], [4]), "sparse tensor 'sp': indices: index 4 at position 1 is "
     "outside the 4 elements of dims [4]"),
    (_sparse([5.0], [[0, -1]], [2, 2]), "sparse tensor 'sp': indices: coordinate -1 of index 0 "
     "is outside dim 1 (2) of dims [2, 2]"),
    (_sparse([5.0], [0], [0, 3]), "sparse tensor 'sp': indices: 1 values in a tensor of dims "
     "[0, 3], which has no elements"),
    (_sparse([[5.0]], [0], [3]), "sparse tensor 'sp': values: values of dims [1, 1]; a sparse "
     "tensor's values are 1-D [NNZ]"),
    (_sparse([5.0], None, [3]), "sparse tensor 'sp': indices: 1 values and no indices"),
    (SparseTensor(dims=[3]), "sparse tensor None: values: a sparse tensor needs values"),
])
def test_to_dense_refuses_what_does_not_fit_with_the_name(sparse, message):
    with pytest.raises(InvalidModelError) as info:
        sparse.to_dense()
    assert info.value.message == message and info.value.path is None


class _Remote(Source):
    """A source with no local view (a remote file): every read is counted."""

    def __init__(self, data: bytes):
        self.data, self.size, self.reads = data, len(data), 0

    def read(self, offset, length):
        self.reads += 1
        return memoryview(self.data)[offset:offset + length]


def test_sparse_problem_leaves_lazy_indices_unread_but_to_dense_checks_them():
    st = _sparse([5.0], [7], [4])
    remote = _Remote(np.array([7], "<i8").tobytes())
    st.indices.raw_data = Blob(remote, 0, 8)
    assert sparse_problem(st) is None and remote.reads == 0
    with pytest.raises(InvalidModelError, match="index 7 at position 0 is outside"):
        st.to_dense()
    assert sparse_problem(_sparse([5.0], [7], [4]), check_range=False) is None


def test_storage_field_lists_name_the_tensor_fields_that_hold_contents():
    from onemodel.ir.tensor import EXTERNAL_FIELDS, STORAGE_FIELDS, TYPED_FIELDS
    described = {"dims", "data_type", "segment", "name", "doc_string", "metadata_props"}
    assert set(STORAGE_FIELDS) == {f for f, _, _ in Tensor.FIELDS} - described
    assert len(STORAGE_FIELDS) == len(set(STORAGE_FIELDS))
    assert set(TYPED_FIELDS) == {i.typed_field for i in INFO.values()} - {"string_data"}
    assert set(EXTERNAL_FIELDS) == {"data_location", "external_data"}


def test_typed_fields_lists_the_fields_with_values():
    t = Tensor(data_type=1, dims=[1], float_data=np.ones(1, "<f4"),
               int64_data=np.zeros(0, "<i8"), double_data=np.ones(1, "<f8"))
    assert t.typed_fields() == ["float_data", "double_data"]
    assert t.typed_field() == "float_data" and t.storage == "typed"
    assert Tensor(data_type=8, dims=[1], string_data=[b"a"]).typed_field() == "string_data"
    assert Tensor(data_type=1, dims=[0]).typed_field() is None


@pytest.mark.parametrize("buf, n", [
    (b"abc", 3), (bytearray(5), 5), (memoryview(np.zeros((2, 3), "<f4")), 24),
    (np.zeros(3, "<f8"), 24), (np.zeros((2, 2), np.uint8), 4), (Blob(_Remote(bytes(9)), 1, 7), 7)])
def test_buffer_nbytes_counts_bytes_whatever_the_buffer(buf, n):
    from onemodel.ir import buffer_nbytes
    assert buffer_nbytes(buf) == n
    if isinstance(buf, Blob):
        assert buf.source.reads == 0


def test_raw_data_as_a_float_array_is_checked_by_its_bytes():
    t = Tensor(data_type=1, dims=[3], raw_data=np.zeros(3, "<f4"))  # 12 bytes, 3 items
    assert tensor_problem(t) is None
    t.raw_data = np.zeros(12, "<f4")
    assert tensor_problem(t) == (InvalidModelError, "raw_data holds 48 bytes; dims [3] of FLOAT "
                                                    "need 12")
