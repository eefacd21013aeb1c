"""Writes the GGUF fixtures in this folder with gguf-py (pip install gguf;
the truth environment has it): a file with one tensor of every ggml type
gguf-py knows, metadata of every value type (a long array among them),
and a file per GGUF version the writer offers; then records what gguf-py's
own reader says about each tensor (type, elements, bytes, data offset) in
expected.json, which the Go reader is held to.

    .venv-truth/bin/python vram/testdata/gguf/make_gguf.py
"""
import json
import os

import numpy as np
import gguf
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))


def every_type(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("every ggml type")
    w.add_uint32("test.u32", 7)
    w.add_int32("test.i32", -7)
    w.add_float32("test.f32", 0.5)
    w.add_bool("test.bool", True)
    w.add_uint64("test.u64", 1 << 40)
    w.add_int64("test.i64", -(1 << 40))
    w.add_float64("test.f64", 0.25)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_array("test.short_array", [1, 2, 3])
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(1000)])
    w.add_context_length(4096)
    for t in sorted(GGML_QUANT_SIZES, key=lambda t: t.value):
        block, size = GGML_QUANT_SIZES[t]
        rows, cols = 2, block * 2  # two rows of two blocks
        raw = np.zeros((rows, cols // block * size), dtype=np.uint8)
        w.add_tensor(f"t.{t.name.lower()}", raw, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def expected(path):
    r = gguf.GGUFReader(path)
    return {
        "tensors": [{"name": t.name, "type": int(t.tensor_type), "elements": int(t.n_elements), "bytes": int(t.n_bytes),
                     "offset": int(t.data_offset)} for t in r.tensors],
        "architecture": str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8"),
    }


def main():
    out = {}
    p = os.path.join(HERE, "every-type.gguf")
    every_type(p)
    out["every-type.gguf"] = expected(p)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump({"gguf_py": gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0", "files": out}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
