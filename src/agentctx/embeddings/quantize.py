"""A model's int8 variant, quantized per channel, derived once from its ONNX file (issue 25, item 5).

all-MiniLM-L6-v2 runs in fp32 whatever file it comes from (the "int8" exports cast their weights back
to float, which ONNX Runtime folds at load): about 300 MB resident once loaded. Its variant keeps
every weight matrix in int8 with one scale per output column and multiplies with ONNX Runtime's
``DynamicQuantizeMatMul`` (the activations are quantized on the fly), and keeps the embedding tables
in int8 with one scale per row: about 145 MB loaded, vectors at cosine 0.99 to the fp32 model's
(docs/retrieval.md, "A lighter model", has the figures).

No ``onnx`` package: the ONNX file is a protocol buffer, and the few fields rewritten here (the
graph's nodes and initializers) are read and written in the wire format directly (:class:`_Msg`).
The source is first saved by ONNX Runtime itself at its basic optimization level, which folds any
cast-and-scale "int8" export into plain fp32 weights (a model already in fp32 passes unchanged).

:func:`derive` writes the variant's folder (the model and the tokenizer files of the source folder)
in a private temporary folder beside the target, then renames it into place: a reader sees the
whole folder or none; :func:`derive_apart` runs it in a child process, so that the process which
then loads the variant (the MCP server) never holds the fp32 model. What the variant is called
and when it is used is
:mod:`agentctx.embeddings.models`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np

from agentctx.core import files

if TYPE_CHECKING:
    from numpy.typing import NDArray

#: Bumped when the derivation changes: a folder derived by another version is derived again.
#: Version 1 multiplied with ``DynamicQuantizeMatMul`` (the activations quantized per tensor) and
#: scaled the embedding tables per row: cosine 0.994 to the fp32 model's vectors; version 2
#: multiplies with ``MatMulNBits`` (per block) and scales the tables per column: 0.9995.
VERSION = 2
#: Rows of a weight matrix per scale (``MatMulNBits``' ``block_size``).
BLOCK = 64
#: ``MatMulNBits``' ``accuracy_level``: 4 multiplies in int8, the activations quantized per block
#: of :data:`BLOCK` (cosine 0.9995 to the fp32 model's vectors; a prompt embedded in about 0.8
#: of fp32's time); 0 computes in fp32 (0.9999) but took 3.5 times fp32's time for one prompt
#: (docs/retrieval.md, "A lighter model").
ACCURACY_LEVEL = 4
#: Files of a sentence-transformers ONNX export that fastembed reads beside the model.
TOKENIZER_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)
MODEL_FILE = "model.onnx"
#: Seconds a derivation in a child process may take (about 4 s for MiniLM on a quiet machine).
DERIVE_TIMEOUT = 600.0
#: The file that marks a folder :func:`derive` wrote (its version, the source, what was quantized).
MARKER = "agentctx-variant.json"

# ONNX's TensorProto data types and field numbers (onnx/onnx.proto).
_FLOAT, _UINT8, _INT8 = 1, 2, 3
_MODEL_GRAPH, _MODEL_OPSET = 7, 8
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT = 1, 5, 11
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTR, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_FLOATS, _TENSOR_NAME, _TENSOR_RAW = 1, 2, 4, 8, 9
_ATTR_NAME, _ATTR_I, _ATTR_TYPE, _ATTR_INT = 1, 3, 20, 2
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2
_MS = "com.microsoft"


class QuantizeError(Exception):
    """The source cannot be turned into a variant (not an ONNX file, nothing to quantize)."""


# -- the protocol buffer wire format, as much of it as ONNX files use ----------------------------


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise QuantizeError("truncated or malformed protocol buffer")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _put_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values take ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


class _Msg:
    """One message as its fields in order: ``(number, wire type, value)``; a varint's value is an
    int, any other field's its raw bytes (a view into the source: nothing is copied)."""

    __slots__ = ("fields",)

    def __init__(self, fields: list[tuple[int, int, int | memoryview | bytes]] | None = None):
        self.fields = fields if fields is not None else []

    @classmethod
    def parse(cls, data: bytes | memoryview) -> _Msg:
        view = memoryview(data)
        fields: list[tuple[int, int, int | memoryview | bytes]] = []
        pos = 0
        while pos < len(view):
            key, pos = _varint(view, pos)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, pos = _varint(view, pos)
                fields.append((number, wire, value))
                continue
            if wire == 2:
                size, pos = _varint(view, pos)
            elif wire in (1, 5):
                size = 8 if wire == 1 else 4
            else:
                raise QuantizeError(f"unsupported protocol buffer wire type {wire}")
            if pos + size > len(view):
                raise QuantizeError("truncated protocol buffer")
            fields.append((number, wire, view[pos : pos + size]))
            pos += size
        return cls(fields)

    def encode(self) -> bytes:
        parts: list[bytes | memoryview] = []
        for number, wire, value in self.fields:
            parts.append(_put_varint(number << 3 | wire))
            if wire == 0:
                parts.append(_put_varint(int(value)))
            else:
                assert not isinstance(value, int)
                if wire == 2:
                    parts.append(_put_varint(len(value)))
                parts.append(value)
        return b"".join(parts)

    def raw(self, number: int) -> list[memoryview | bytes]:
        return [v for n, w, v in self.fields if n == number and not isinstance(v, int)]

    def text(self, number: int) -> list[str]:
        return [bytes(v).decode("utf-8") for v in self.raw(number)]

    def ints(self, number: int) -> list[int]:
        """A repeated integer field, packed or not."""
        out: list[int] = []
        for n, _w, v in self.fields:
            if n != number:
                continue
            if isinstance(v, int):
                out.append(v)
                continue
            view, pos = memoryview(v), 0
            while pos < len(view):
                item, pos = _varint(view, pos)
                out.append(item)
        return [i - (1 << 64) if i >= 1 << 63 else i for i in out]

    def add(self, number: int, value: int | str | bytes) -> _Msg:
        if isinstance(value, int):
            self.fields.append((number, 0, value))
        else:
            self.fields.append(
                (number, 2, value.encode("utf-8") if isinstance(value, str) else value)
            )
        return self


def _tensor(name: str, array: NDArray[np.generic], data_type: int) -> _Msg:
    msg = _Msg()
    for dim in array.shape:
        msg.add(_TENSOR_DIMS, int(dim))
    msg.add(_TENSOR_TYPE, data_type).add(_TENSOR_NAME, name)
    return msg.add(
        _TENSOR_RAW, np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
    )


def _node(op: str, inputs: list[str], outputs: list[str], name: str, domain: str = "") -> _Msg:
    msg = _Msg()
    for item in inputs:
        msg.add(_NODE_INPUT, item)
    for item in outputs:
        msg.add(_NODE_OUTPUT, item)
    msg.add(_NODE_NAME, name).add(_NODE_OP, op)
    if domain:
        msg.add(_NODE_DOMAIN, domain)
    return msg


def _float_matrix(tensor: _Msg) -> NDArray[np.float32] | None:
    """A 2-D float initializer's values; None for any other tensor (or one stored elsewhere)."""
    types = tensor.ints(_TENSOR_TYPE)
    dims = tensor.ints(_TENSOR_DIMS)
    if types != [_FLOAT] or len(dims) != 2:
        return None
    raw = tensor.raw(_TENSOR_RAW)
    if raw:
        values = np.frombuffer(bytes(raw[0]), dtype="<f4")
    else:
        packed = tensor.raw(_TENSOR_FLOATS)
        if not packed:
            return None  # external data: left as it is
        values = np.frombuffer(b"".join(bytes(p) for p in packed), dtype="<f4")
    if values.size != dims[0] * dims[1]:
        return None
    return values.reshape(dims).astype(np.float32)


def _per_column(matrix: NDArray[np.float32]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Symmetric int8 with one scale per column (the matrix is ``x @ matrix``'s right side)."""
    scale = np.abs(matrix).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(matrix / scale), -127, 127).astype(np.int8)
    return quantized, scale.astype(np.float32)


def _blocks(matrix: NDArray[np.float32]) -> tuple[NDArray[np.uint8], NDArray[np.float32]]:
    """A weight matrix (``x @ matrix``'s right side, K × N) as ``MatMulNBits`` wants its 8-bit
    weights: per output column, blocks of :data:`BLOCK` rows, each with one scale, stored
    unsigned around the default zero point 128 (``N × blocks × BLOCK`` bytes, the last block padded
    with zeros); the scales ``N × blocks``, flattened."""
    rows, columns = matrix.shape
    count = -(-rows // BLOCK)
    padded = np.zeros((count * BLOCK, columns), dtype=np.float32)
    padded[:rows] = matrix
    grouped = padded.T.reshape(columns, count, BLOCK)
    scale = np.abs(grouped).max(axis=2) / 127.0
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(grouped / scale[..., None]), -127, 127) + 128
    return quantized.astype(np.uint8), scale.reshape(-1).astype(np.float32)


def _int_attribute(name: str, value: int) -> bytes:
    return _Msg().add(_ATTR_NAME, name).add(_ATTR_I, value).add(_ATTR_TYPE, _ATTR_INT).encode()


def quantize_model(data: bytes) -> tuple[bytes, dict[str, int]]:
    """The int8 variant of an fp32 ONNX model's bytes, and what was quantized.

    Every ``MatMul`` by a 2-D float initializer becomes ``com.microsoft.MatMulNBits`` with 8-bit
    weights, one scale per block of :data:`BLOCK` rows of each output column (:func:`_blocks`),
    at :data:`ACCURACY_LEVEL` (the activations quantized per block, not per tensor); every ``Gather``
    from a 2-D float initializer (the embedding tables) gathers int8 rows and multiplies them by
    one scale per column. The rest of the graph is kept byte for byte.
    """
    model = _Msg.parse(data)
    graphs = [i for i, (n, w, _v) in enumerate(model.fields) if n == _MODEL_GRAPH and w == 2]
    if len(graphs) != 1:
        raise QuantizeError("not an ONNX model (no graph)")
    graph = _Msg.parse(model.fields[graphs[0]][2])  # type: ignore[arg-type]
    initializers: dict[str, tuple[int, _Msg]] = {}
    for index, (number, _wire, value) in enumerate(graph.fields):
        if number == _GRAPH_INITIALIZER and not isinstance(value, int):
            tensor = _Msg.parse(value)
            names = tensor.text(_TENSOR_NAME)
            if names:
                initializers[names[0]] = (index, tensor)
    graph_inputs = {
        _Msg.parse(v).text(1)[0] for v in graph.raw(_GRAPH_INPUT) if _Msg.parse(v).text(1)
    }
    uses: dict[str, int] = {}
    nodes = [
        (i, _Msg.parse(v))
        for i, (n, _w, v) in enumerate(graph.fields)
        if n == _GRAPH_NODE and not isinstance(v, int)
    ]
    for _i, node in nodes:
        for name in node.text(_NODE_INPUT):
            uses[name] = uses.get(name, 0) + 1

    replaced: dict[int, list[_Msg]] = {}  # graph field index -> the messages in its place
    dropped: set[str] = set()
    added: list[_Msg] = []
    counts = {"matmul": 0, "gather": 0}
    for index, node in nodes:
        op = node.text(_NODE_OP)
        domain = node.text(_NODE_DOMAIN)
        inputs, outputs = node.text(_NODE_INPUT), node.text(_NODE_OUTPUT)
        if not op or (domain and domain[0] not in ("", "ai.onnx")) or len(outputs) != 1:
            continue
        weight_at = {"MatMul": 1, "Gather": 0}.get(op[0])
        if weight_at is None or len(inputs) != 2:
            continue
        weight = inputs[weight_at]
        if weight not in initializers or weight in graph_inputs or uses.get(weight) != 1:
            continue
        if op[0] == "Gather" and any(
            _Msg.parse(a).text(_ATTR_NAME) == ["axis"] and _Msg.parse(a).ints(_ATTR_I) != [0]
            for a in node.raw(_NODE_ATTR)
        ):
            continue
        matrix = _float_matrix(initializers[weight][1])
        if matrix is None:
            continue
        base = f"agentctx_q{counts['matmul'] + counts['gather']}"
        dropped.add(weight)
        if op[0] == "MatMul":
            rows, n = matrix.shape
            packed, scales = _blocks(matrix)
            added += [
                _tensor(f"{base}_w", packed, _UINT8),
                _tensor(f"{base}_scale", scales, _FLOAT),
            ]
            matmul = _node(
                "MatMulNBits",
                [inputs[0], f"{base}_w", f"{base}_scale"],
                outputs,
                f"{base}_matmul",
                _MS,
            )
            for key, number in (
                ("K", rows),
                ("N", n),
                ("bits", 8),
                ("block_size", BLOCK),
                ("accuracy_level", ACCURACY_LEVEL),
            ):
                matmul.fields.append((_NODE_ATTR, 2, _int_attribute(key, number)))
            replaced[index] = [matmul]
            counts["matmul"] += 1
        else:
            quantized, scale = _per_column(matrix)  # one scale per dimension of the table
            added += [
                _tensor(f"{base}_w", quantized, _INT8),
                _tensor(f"{base}_scale", scale, _FLOAT),
            ]
            cast = _node("Cast", [f"{base}_rows"], [f"{base}_float"], f"{base}_cast")
            cast.fields.append((_NODE_ATTR, 2, _int_attribute("to", _FLOAT)))
            replaced[index] = [
                _node("Gather", [f"{base}_w", inputs[1]], [f"{base}_rows"], f"{base}_gather"),
                cast,
                _node("Mul", [f"{base}_float", f"{base}_scale"], outputs, f"{base}_mul"),
            ]
            counts["gather"] += 1
    if not counts["matmul"]:
        raise QuantizeError("nothing to quantize (no MatMul by a float weight matrix)")

    fields: list[tuple[int, int, int | memoryview | bytes]] = []
    for index, field in enumerate(graph.fields):
        if index in replaced:
            fields += [(_GRAPH_NODE, 2, msg.encode()) for msg in replaced[index]]
        elif field[0] == _GRAPH_INITIALIZER and any(
            initializers.get(name, (-1, None))[0] == index for name in dropped
        ):
            continue
        else:
            fields.append(field)
    fields += [(_GRAPH_INITIALIZER, 2, msg.encode()) for msg in added]
    model.fields[graphs[0]] = (_MODEL_GRAPH, 2, _Msg(fields).encode())
    domains = {
        _Msg.parse(v).text(_OPSET_DOMAIN)[0] if _Msg.parse(v).text(_OPSET_DOMAIN) else ""
        for v in model.raw(_MODEL_OPSET)
    }
    if _MS not in domains:
        model.fields.append(
            (_MODEL_OPSET, 2, _Msg().add(_OPSET_DOMAIN, _MS).add(_OPSET_VERSION, 1).encode())
        )
    return model.encode(), counts


# -- the variant's folder --------------------------------------------------------------------------


def is_variant(folder: str) -> bool:
    """Whether ``folder`` holds a variant :func:`derive` wrote (of this version): such a folder is
    loaded as it is, never quantized again (the tests and benchmarks derive once and point
    ``embedding.path`` at it)."""
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as handle:
            about = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(about, dict) and about.get("version") == VERSION


def source_key(model_path: str) -> str:
    """What identifies a source model file cheaply (its real path, size and mtime) and this
    derivation's version: the name of the variant's folder."""
    real = os.path.realpath(model_path)
    info = os.stat(real)
    text = f"{VERSION}|{real}|{info.st_size}|{info.st_mtime_ns}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def derive(source: str, target: str, *, model_file: str = MODEL_FILE) -> str:
    """The variant of the model in folder ``source`` (its file ``model_file``) in folder
    ``target``, derived unless there.

    ``target``'s parent is created owner-only; the folder appears whole (renamed from a private
    temporary folder beside it), its files 0600. Returns ``target``. Raises :class:`QuantizeError`
    (or OSError) when the source cannot be read or quantized.
    """
    if os.path.isfile(os.path.join(target, MODEL_FILE)):
        return target
    import importlib

    ort: Any = importlib.import_module("onnxruntime")  # fastembed's runtime (no type stubs)

    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".derive-", dir=parent)  # 0700
    try:
        folded = os.path.join(work, "folded.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = folded
        options.log_severity_level = 3
        ort.InferenceSession(
            os.path.join(source, model_file), options, providers=["CPUExecutionProvider"]
        )
        with open(folded, "rb") as handle:
            data = handle.read()
        os.unlink(folded)
        quantized, counts = quantize_model(data)
        del data
        files.write_atomic(os.path.join(work, MODEL_FILE), quantized, mode=0o600)
        for name in TOKENIZER_FILES:
            path = os.path.join(source, name)
            if os.path.isfile(path):
                with open(path, "rb") as handle:
                    files.write_atomic(os.path.join(work, name), handle.read(), mode=0o600)
        about = {"version": VERSION, "source": os.path.realpath(source), **counts}
        files.write_atomic(
            os.path.join(work, MARKER),
            (json.dumps(about, sort_keys=True) + "\n").encode("utf-8"),
            mode=0o600,
        )
        try:
            os.rename(work, target)
        except OSError:  # another process derived it meanwhile: theirs is as good
            if not os.path.isfile(os.path.join(target, MODEL_FILE)):
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def derive_apart(source: str, target: str, *, model_file: str = MODEL_FILE) -> str:
    """:func:`derive` in a child process (``python -m agentctx.embeddings.quantize``): the fp32
    session and the copies it takes (about 380 MB at peak for MiniLM) never count against the
    long-lived process that then loads the variant (the MCP server, a worker). Returns ``target``;
    :class:`QuantizeError` with the child's last line when it fails."""
    if os.path.isfile(os.path.join(target, MODEL_FILE)):
        return target
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "agentctx.embeddings.quantize", source, target, model_file],
        capture_output=True,
        text=True,
        timeout=DERIVE_TIMEOUT,
        check=False,
    )
    if done.returncode != 0 or not os.path.isfile(os.path.join(target, MODEL_FILE)):
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise QuantizeError(f"deriving failed (exit {done.returncode}): {last[:300]}")
    return target


def main(argv: list[str]) -> int:
    """``python -m agentctx.embeddings.quantize SOURCE TARGET [MODEL_FILE]``: one line on failure."""
    import sys

    if len(argv) not in (2, 3):
        sys.stderr.write(
            "usage: python -m agentctx.embeddings.quantize SOURCE TARGET [MODEL_FILE]\n"
        )
        return 2
    try:
        derive(argv[0], argv[1], model_file=argv[2] if len(argv) == 3 else MODEL_FILE)
    except Exception as exc:  # one line for the parent's log, never a traceback
        sys.stderr.write(" ".join(f"{type(exc).__name__}: {exc}".split())[:300] + "\n")
        return 1
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
