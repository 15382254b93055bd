"""The blob's binary layout, in one table: every record of every section, field by field (name,
type, offset, size). The Python packer and reader take their struct formats from it, and the C
loader its named offsets: `firmware/core/tp_blob_layout.h` is generated from this table
(`python -m tinyprop.blob_layout --header > firmware/core/tp_blob_layout.h`; a test fails
when the committed header is stale). docs/blob-format.md says what each field means.
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass

# type -> (struct code, bytes): little-endian, no implicit padding ("<")
TYPES = {"u8": ("B", 1), "u16": ("H", 2), "u32": ("I", 4), "i16": ("h", 2), "i32": ("i", 4),
         "f32": ("f", 4), "char4": ("4s", 4), "pad": ("x", 1)}

HEADER_COMMAND = "python -m tinyprop.blob_layout --header > firmware/core/tp_blob_layout.h"


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    count: int  # elements (1: a scalar)
    offset: int

    @property
    def size(self) -> int:
        return TYPES[self.type][1] * self.count

    @property
    def code(self) -> str:
        code = TYPES[self.type][0]
        return f"{self.count}{code}" if self.count > 1 else code


class Record:
    """One fixed-size record: `struct` packs and unpacks it (pad fields take no value)."""

    def __init__(self, name: str, prefix: str, doc: str, fields: list[tuple]):
        self.name, self.prefix, self.doc = name, prefix, doc
        self.fields: list[Field] = []
        at = 0
        for spec in fields:
            name_, type_, count = (*spec, 1) if len(spec) == 2 else spec
            self.fields.append(Field(name_, type_, count, at))
            at += self.fields[-1].size
        self.size = at
        assert all(f.name != "bytes" for f in self.fields), "TP_<R>_BYTES is the record's size"
        self.format = "<" + "".join(f.code for f in self.fields)
        self.struct = struct.Struct(self.format)
        assert self.struct.size == self.size

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)

    def unpack(self, buf: bytes, offset: int = 0) -> dict:
        """The record at buf[offset:] as {field: value}; arrays as tuples, pads left out."""
        flat = iter(self.struct.unpack_from(buf, offset))
        out = {}
        for f in self.fields:
            if f.type == "pad":
                continue
            n = 1 if f.type == "char4" else f.count
            values = tuple(next(flat) for _ in range(n))
            out[f.name] = values if f.count > 1 and f.type != "char4" else values[0]
        return out


HEADER = Record("header", "TP_HDR", "the blob header, at offset 0", [
    ("magic", "char4"), ("version", "u16"), ("header_size", "u16"), ("total_size", "u32"),
    ("model_id", "u32"), ("n_sections", "u16"), ("flags", "u16"), ("arena_infer", "u32"),
    ("arena_train", "u32"), ("params_bytes", "u32"), ("input", "u16"), ("output", "u16"),
    ("logits", "u16"), ("n_classes", "u16"), ("optimizer_bytes", "u32"), ("reserved", "u32")])
SECTION = Record("section", "TP_SEC", "a section table entry, after the header", [
    ("id", "char4"), ("offset", "u32"), ("size", "u32")])
CRC = Record("crc", "TP_CRC", "the trailer: CRC-32 of every byte before it (the blob id)", [
    ("crc", "u32")])
TENSOR = Record("tensor", "TP_TENS", "a TENS record; its index is the tensor's", [
    ("dtype", "u8"), ("rank", "u8"), ("flags", "u8"), ("reserved", "u8"), ("dims", "u16", 4),
    ("scale", "f32"), ("zero_point", "i32"), ("offset", "u32"), ("size", "u32"),
    ("scales_offset", "u32"), ("params_offset", "u32"), ("n_scales", "u16"),
    ("reserved_end", "u16")])
OP = Record("op", "TP_OPS", "an OPS record, in execution order", [
    ("kind", "u8"), ("activation", "u8"), ("mode", "u8"), ("depth_multiplier", "u8"),
    ("inputs", "u16", 3), ("output", "u16"), ("in_zp", "i32"), ("in2_zp", "i32"),
    ("out_zp", "i32"), ("act_min", "i16"), ("act_max", "i16"), ("stride", "u8", 2),
    ("pad", "u8", 2), ("k", "u8", 2), ("pad_after", "u8", 2), ("mult_offset", "u32"),
    ("n_mult", "u16"), ("left_shift", "i16"), ("diff_min", "i32"), ("float_scale", "f32"),
    ("held_map", "u32"), ("held_params", "u32"), ("pad_end", "pad", 4)])
TRAN_HEADER = Record("TRAN header", "TP_TRAN_HDR", "TRAN: the training program's header", [
    ("first", "u16"), ("last", "u16"), ("n_ops", "u16"), ("grad_format", "u16"),
    ("n_tensors", "u32"), ("loss", "u16"), ("reserved", "u16")])
TRAN_OFFSET = Record("TRAN offset", "TP_TRAN_OFF",
                     "TRAN: u32 act_offset[n_tensors] then u32 grad_offset[n_tensors]",
                     [("offset", "u32")])
TRAN_OP = Record("TRAN op", "TP_TRAN_OP", "TRAN: one op of the backward pass, ascending ops", [
    ("op", "u16"), ("flags", "u8"), ("flags2", "u8"), ("mask_offset", "u32"),
    ("scratch_offset", "u32"), ("n_sel", "u32"), ("scale_floor", "f32"), ("bias_params", "u32")])
SCRA_HEADER = Record("SCRA header", "TP_SCRA_HDR", "SCRA: the kernels' scratch plan", [
    ("n_ops", "u16"), ("target", "u16"), ("reserved", "u32")])
SCRA_OP = Record("SCRA op", "TP_SCRA_OP", "SCRA: one op's scratch under each plan", [
    ("infer_offset", "u32"), ("infer_size", "u32"), ("train_offset", "u32"),
    ("train_size", "u32")])
TILE_HEADER = Record("TILE header", "TP_TILE_HDR", "TILE: the tiled stage", [
    ("n_ops", "u16"), ("n_tensors", "u16"), ("grid", "u8", 2), ("flags", "u16"),
    ("band_bytes", "u32"), ("band_offset", "u32", 2), ("reserved", "u32")])
TILE_TENSOR = Record("TILE tensor", "TP_TILE_TENSOR", "TILE: one stage tensor's tile buffer", [
    ("tensor", "u16"), ("reserved", "u16"), ("buffer_bytes", "u32"), ("offset", "u32", 2)])
TILE_SPAN = Record("TILE span", "TP_TILE_SPAN", "TILE: a window along one axis, [lo, hi)", [
    ("lo", "u16"), ("hi", "u16")])
INPL_HEADER = Record("INPL header", "TP_INPL_HDR", "INPL: the ops run in place", [
    ("n", "u16"), ("reserved", "u16"), ("reserved_end", "u32")])
INPL_OP = Record("INPL op", "TP_INPL_OP", "INPL: one op run in place, ascending ops", [
    ("op", "u16"), ("plans", "u8"), ("reserved", "u8"), ("channel_offset", "u32", 2)])
PWIG_HEADER = Record("PWIG header", "TP_PWIG_HDR",
                     "PWIG: the 1x1 input gradient's weights in pairs of output channels", [
                         ("n", "u16"), ("reserved", "u16"), ("reserved_end", "u32")])
PWIG_OP = Record("PWIG op", "TP_PWIG_OP", "PWIG: one op's channels and pairs, ascending ops", [
    ("op", "u16"), ("n_live", "u16"), ("offset", "u32")])
LABL_HEADER = Record("LABL header", "TP_LABL_HDR",
                     "LABL: the class names, then n_labels NUL-terminated UTF-8 names", [
                         ("n_labels", "u16"), ("reserved", "u16")])

RECORDS = [HEADER, SECTION, CRC, TENSOR, OP, TRAN_HEADER, TRAN_OFFSET, TRAN_OP, SCRA_HEADER,
           SCRA_OP, TILE_HEADER, TILE_TENSOR, TILE_SPAN, INPL_HEADER, INPL_OP, PWIG_HEADER,
           PWIG_OP, LABL_HEADER]

# Facts of the format that are numbers but no record's field.
CONSTANTS = {
    "BLOB_VERSION": (3, "the version this layout is"),
    "SECTION_ALIGN": (8, "every section starts at a multiple of this"),
    "SCRA_ALIGN": (8, "a planned scratch starts at a multiple of this (kernels read words)"),
    "NONE16": (0xFFFF, "an absent u16 index"),
    "NONE32": (0xFFFFFFFF, "an absent u32 offset"),
}


def c_header() -> str:
    """firmware/core/tp_blob_layout.h: each record's size (TP_<R>_BYTES), each field's offset
    (TP_<R>_<FIELD>; an array's element i at TP_<R>_<FIELD>(i)), and the field ids a refused
    blob's fault names (tp_blob_field, TP_BLOB_FIELD_NAMES)."""
    out = [
        "/* tp_blob_layout.h - the blob's records: sizes and field offsets. */",
        "/* Generated by host/tinyprop/blob_layout.py: do not edit. Regenerate with",
        f" *   PYTHONPATH=host {HEADER_COMMAND} */",
        "/* laid out by its generator, not by clang-format: */",
        "/* clang-format off */",
        "#ifndef TP_BLOB_LAYOUT_H",
        "#define TP_BLOB_LAYOUT_H",
        "",
        "#include <stdint.h>",
        "",
    ]
    for name, (value, doc) in CONSTANTS.items():
        out.append(f"#define TP_{name} 0x{value:X}u /* {doc} */" if value > 255
                   else f"#define TP_{name} {value}u /* {doc} */")
    for r in RECORDS:
        out += ["", f"/* {r.doc}: {r.size} bytes ({r.format}) */",
                f"#define {r.prefix}_BYTES {r.size}u"]
        for f in r.fields:
            if f.type == "pad":
                continue
            macro = f"{r.prefix}_{f.name.upper()}"
            if f.count > 1 and f.type != "char4":
                step = TYPES[f.type][1]
                out.append(f"#define {macro}(i) ({f.offset}u + {step}u * (uint32_t)(i)) "
                           f"/* {f.type}[{f.count}] */")
            else:
                out.append(f"#define {macro} {f.offset}u /* {f.type} */")
    fields = [(r, f) for r in RECORDS for f in r.fields if f.type != "pad"]
    out += ["", "/* Every field, for a refused blob's fault (tp_fault.field). */",
            "typedef enum {", "    TP_FIELD_NONE = 0,"]
    out += [f"    TP_FIELD_{r.prefix[3:]}_{f.name.upper()}," for r, f in fields]
    out += ["    TP_FIELD_COUNT", "} tp_blob_field;", "",
            "/* Their names, in tp_blob_field order from TP_FIELD_NONE. */",
            "#define TP_BLOB_FIELD_NAMES \\", '    "", \\']
    out += [f'    "{f.name}", \\' for _, f in fields[:-1]]
    out += [f'    "{fields[-1][1].name}"', "", "#endif /* TP_BLOB_LAYOUT_H */", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tinyprop.blob_layout",
                                 description="The blob layout: print it, or its C header.")
    ap.add_argument("--header", action="store_true", help="print firmware/core/tp_blob_layout.h")
    args = ap.parse_args(argv)
    if args.header:
        sys.stdout.write(c_header())
        return 0
    for r in RECORDS:
        print(f"{r.name} ({r.size} bytes, {r.format})")
        for f in r.fields:
            print(f"  {f.offset:3d} {f.type}{f'[{f.count}]' if f.count > 1 else ''} {f.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
