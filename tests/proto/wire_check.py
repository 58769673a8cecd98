#!/usr/bin/env python3
"""Wire-compatibility check of cetcd's .proto files and generated C code
against etcd 3.4's own .proto files (Debian's golang-etcd-server-dev).

Run by tests/unit/proto/test_wire, which passes itself as --codec: in
"--codec" mode that program decodes and re-encodes messages with cetcd's
protobuf-c code, in "--dump" mode it prints the generated descriptors.

Checks, for every message, enum and service of etcd's files:
  1. schema: cetcd's .proto files (as parsed by protoc) declare the same
     packages, syntax, messages, fields (name, number, type, label, type
     name, oneof, packing, default), enums, services and methods
     (including streaming), and nothing more in those packages;
  2. generated C: protobuf-c's descriptors match the same facts;
  3. etcd -> cetcd C -> etcd: random messages, written as text and encoded
     by protoc with etcd's files, decode in cetcd's C code with no unknown
     field, re-encode to the very same bytes, and decode with etcd's files
     to the same canonical text;
  4. cetcd .proto <-> etcd .proto: the same texts encoded with cetcd's
     files give the same bytes and decode with etcd's files to the same
     text, and etcd's bytes decode with cetcd's files to the same text;
  5. negative controls: an appended unknown field is reported by the C
     codec, and truncated or corrupted inputs fail cleanly (no crash).
Exit status: 0 pass, 1 failure, 77 when a needed tool or file is missing.
The seed is printed; CETCD_PROTO_SEED=<n> repeats a run.
"""

import argparse
import difflib
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77

GOCODE = os.environ.get("CETCD_GOCODE", "/usr/share/gocode/src")
ETCD_IMPORT_ROOT = os.path.join(GOCODE, "go.etcd.io")  # imports say "etcd/..."
ETCD_DIR = os.path.join(ETCD_IMPORT_ROOT, "etcd")
GOGO_DIR = os.path.join(GOCODE, "github.com/gogo/protobuf")
GOGO_WKT_DIR = os.path.join(GOGO_DIR, "protobuf")  # google/protobuf/descriptor.proto
GOOGLEAPIS_DIR = os.path.join(
    GOCODE, "github.com/grpc-ecosystem/grpc-gateway/third_party/googleapis")
# raft_internal.proto imports "rpc.proto" and "etcdserver.proto" by bare
# name, so it is compiled apart, with its own directory on the path.
RAFT_INTERNAL = "etcd/etcdserver/etcdserverpb/raft_internal.proto"
# etcd's failure-injection test harness, not part of any wire format.
EXCLUDED_DIRS = ("etcd/functional/",)
# Fields ours has that etcd 3.4's files do not, each taken from a later
# etcd release with the same number, name and type, and ignored by an etcd
# 3.4 member that decodes it (an unknown field):
# message -> {number: (name, type)}.
LATER_FIELDS = {
    # etcd 3.5: a password's bcrypt hash, made before the proposal
    "etcdserverpb.AuthUserAddRequest": {4: ("hashedPassword", "string")},
    "etcdserverpb.AuthUserChangePasswordRequest":
        {3: ("hashedPassword", "string")},
}

BATCH_PACKAGE = "cetcd_wire"

# FieldDescriptorProto.Type and .Label numbers.
TYPE_NAMES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32",
    6: "fixed64", 7: "fixed32", 8: "bool", 9: "string", 10: "group",
    11: "message", 12: "bytes", 13: "uint32", 14: "enum", 15: "sfixed32",
    16: "sfixed64", 17: "sint32", 18: "sint64",
}
T_MESSAGE, T_ENUM, T_STRING, T_BYTES, T_GROUP = 11, 14, 9, 12, 10
L_OPTIONAL, L_REQUIRED, L_REPEATED = 1, 2, 3
INT_RANGES = {
    "int32": (-2**31, 2**31 - 1), "sint32": (-2**31, 2**31 - 1),
    "sfixed32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1),
    "sint64": (-2**63, 2**63 - 1), "sfixed64": (-2**63, 2**63 - 1),
    "uint32": (0, 2**32 - 1), "fixed32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1), "fixed64": (0, 2**64 - 1),
}

# What a codec record must give: a faithful round trip, an unknown-field
# report, or anything but a crash.
MODE_ROUNDTRIP, MODE_EXPECT_UNKNOWN, MODE_ANY = 0, 1, 2
# Codec statuses (must match tests/unit/proto/test_wire.c).
STATUS_NAMES = {0: "ok", 1: "unpack failed", 2: "unknown fields",
                3: "no such message type", 4: "pack size mismatch"}


class Failure(Exception):
    pass


class Skip(Exception):
    pass


# ---------------------------------------------------------------------------
# Minimal protobuf wire reader, enough for descriptor sets and batches.

def read_varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def encode_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def wire_fields(buf):
    """Yields (field number, wire type, value) of one message's bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = read_varint(buf, pos)
        elif wt == 1:
            val, pos = buf[pos:pos + 8], pos + 8
        elif wt == 2:
            n, pos = read_varint(buf, pos)
            val, pos = buf[pos:pos + n], pos + n
        elif wt == 5:
            val, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wt)
        if pos > len(buf):
            raise ValueError("truncated field %d" % num)
        yield num, wt, val


def as_int32(v):
    v &= 0xFFFFFFFFFFFFFFFF
    return v - 2**64 if v >= 2**63 else v


# ---------------------------------------------------------------------------
# Schema model, read from protoc's --descriptor_set_out.

class Field:
    def __init__(self):
        self.name, self.number, self.label, self.type = "", 0, 0, 0
        self.type_name, self.default, self.oneof_index = "", None, None
        self.packed_option, self.proto3_optional = None, False
        self.oneof = None   # oneof name, filled in by the message
        self.packed = False  # effective packing, filled in by the file


class Message:
    def __init__(self, full, file, syntax):
        self.full, self.file, self.syntax = full, file, syntax
        self.fields, self.oneofs, self.map_entry = [], [], False


class Schema:
    def __init__(self):
        self.messages, self.enums, self.services, self.files = {}, {}, {}, {}

    def load(self, path, wanted_file):
        with open(path, "rb") as f:
            data = f.read()
        for num, _, val in wire_fields(data):
            if num == 1:
                self._file(val, wanted_file)

    def _file(self, buf, wanted_file):
        name = package = ""
        syntax = "proto2"
        msgs, enums, services = [], [], []
        for num, _, val in wire_fields(buf):
            if num == 1:
                name = val.decode()
            elif num == 2:
                package = val.decode()
            elif num == 4:
                msgs.append(val)
            elif num == 5:
                enums.append(val)
            elif num == 6:
                services.append(val)
            elif num == 12:
                syntax = val.decode()
        if not wanted_file(name):
            return
        self.files[name] = (package, syntax)
        prefix = package + "." if package else ""
        for m in msgs:
            self._message(m, prefix, name, syntax)
        for e in enums:
            self._enum(e, prefix)
        for s in services:
            self._service(s, prefix)

    def _message(self, buf, prefix, file, syntax):
        name = ""
        fields, nested, enums, oneofs = [], [], [], []
        map_entry = False
        for num, _, val in wire_fields(buf):
            if num == 1:
                name = val.decode()
            elif num == 2:
                fields.append(self._field(val))
            elif num == 3:
                nested.append(val)
            elif num == 4:
                enums.append(val)
            elif num == 7:
                for onum, _, oval in wire_fields(val):
                    if onum == 7:
                        map_entry = bool(oval)
            elif num == 8:
                oneofs.append(next((v.decode() for n, _, v in wire_fields(val)
                                    if n == 1), ""))
        m = Message(prefix + name, file, syntax)
        m.map_entry, m.oneofs = map_entry, oneofs
        for f in fields:
            if f.oneof_index is not None:
                f.oneof = oneofs[f.oneof_index]
            scalar = f.type not in (T_MESSAGE, T_GROUP, T_STRING, T_BYTES)
            if f.packed_option is not None:
                f.packed = f.packed_option
            else:
                f.packed = (syntax == "proto3" and f.label == L_REPEATED
                            and scalar)
        m.fields = sorted(fields, key=lambda f: f.number)
        self.messages[m.full] = m
        for n in nested:
            self._message(n, m.full + ".", file, syntax)
        for e in enums:
            self._enum(e, m.full + ".")

    @staticmethod
    def _field(buf):
        f = Field()
        for num, _, val in wire_fields(buf):
            if num == 1:
                f.name = val.decode()
            elif num == 3:
                f.number = as_int32(val)
            elif num == 4:
                f.label = val
            elif num == 5:
                f.type = val
            elif num == 6:
                f.type_name = val.decode().lstrip(".")
            elif num == 7:
                f.default = val.decode()
            elif num == 8:
                for onum, _, oval in wire_fields(val):
                    if onum == 2:
                        f.packed_option = bool(oval)
            elif num == 9:
                f.oneof_index = val
            elif num == 17:
                f.proto3_optional = bool(val)
        return f

    def _enum(self, buf, prefix):
        name, values = "", []
        for num, _, val in wire_fields(buf):
            if num == 1:
                name = val.decode()
            elif num == 2:
                vname, vnum = "", 0
                for n, _, v in wire_fields(val):
                    if n == 1:
                        vname = v.decode()
                    elif n == 2:
                        vnum = as_int32(v)
                values.append((vname, vnum))
        self.enums[prefix + name] = values

    def _service(self, buf, prefix):
        name, methods = "", []
        for num, _, val in wire_fields(buf):
            if num == 1:
                name = val.decode()
            elif num == 2:
                mname, inp, out, cs, ss = "", "", "", False, False
                for n, _, v in wire_fields(val):
                    if n == 1:
                        mname = v.decode()
                    elif n == 2:
                        inp = v.decode().lstrip(".")
                    elif n == 3:
                        out = v.decode().lstrip(".")
                    elif n == 5:
                        cs = bool(v)
                    elif n == 6:
                        ss = bool(v)
                methods.append((mname, inp, out, cs, ss))
        self.services[prefix + name] = methods

    def packages(self):
        return {pkg for pkg, _ in self.files.values()}


def field_facts(f):
    return {
        "name": f.name, "number": f.number, "label": f.label,
        "type": TYPE_NAMES.get(f.type, f.type), "type_name": f.type_name,
        "oneof": f.oneof, "packed": f.packed, "default": f.default,
        "proto3_optional": f.proto3_optional,
    }


def compare_schemas(etcd, ours):
    """Lists every difference between etcd's schema and ours."""
    errs = []
    pkgs = etcd.packages()
    for pkg in sorted(ours.packages() - pkgs):
        errs.append("package %s is not one of etcd's" % pkg)
    for full in sorted(etcd.messages):
        em, om = etcd.messages[full], ours.messages.get(full)
        if om is None:
            errs.append("message %s: missing" % full)
            continue
        if em.syntax != om.syntax:
            errs.append("message %s: syntax %s, etcd has %s"
                        % (full, om.syntax, em.syntax))
        if em.map_entry != om.map_entry:
            errs.append("message %s: map entry differs" % full)
        efs = {f.number: f for f in em.fields}
        ofs = {f.number: f for f in om.fields}
        for num in sorted(set(efs) | set(ofs)):
            if num not in ofs:
                errs.append("message %s: field %d (%s) missing"
                            % (full, num, efs[num].name))
            elif num not in efs:
                later = LATER_FIELDS.get(full, {}).get(num)
                if later != (ofs[num].name, TYPE_NAMES.get(ofs[num].type)):
                    errs.append("message %s: field %d (%s) not in etcd's"
                                % (full, num, ofs[num].name))
            else:
                ef, of = field_facts(efs[num]), field_facts(ofs[num])
                for k in ef:
                    if ef[k] != of[k]:
                        errs.append("message %s field %d: %s is %r, etcd has %r"
                                    % (full, num, k, of[k], ef[k]))
    for full in sorted(ours.messages):
        if full not in etcd.messages:
            errs.append("message %s: not in etcd's files" % full)
    for kind, what, e_map, o_map in (
            ("enum", "values", etcd.enums, ours.enums),
            ("service", "methods", etcd.services, ours.services)):
        for full in sorted(set(e_map) | set(o_map)):
            if full not in o_map:
                errs.append("%s %s: missing" % (kind, full))
            elif full not in e_map:
                errs.append("%s %s: not in etcd's files" % (kind, full))
            elif e_map[full] != o_map[full]:
                errs.append("%s %s: %s %r, etcd has %r"
                            % (kind, full, what, o_map[full], e_map[full]))
    return errs


def expected_c_dump(etcd):
    """The lines proto/test_wire --dump must print for etcd's schema."""
    lines = set()
    for full, m in etcd.messages.items():
        lines.add("message %s %d" % (full, len(m.fields)))
        for f in m.fields:
            if f.label == L_REPEATED:
                label = "repeated"
            elif f.label == L_REQUIRED:
                label = "required"
            elif m.syntax == "proto3" and not f.proto3_optional:
                label = "none"  # protoc-c: no has_ flag (oneofs use a case)
            else:
                label = "optional"
            lines.add("field %s %s %d %s %s packed=%d oneof=%d %s" % (
                full, f.name, f.number, label, TYPE_NAMES[f.type],
                f.packed, f.oneof is not None, f.type_name or "-"))
    for full, values in etcd.enums.items():
        lines.add("enum %s %d" % (full, len(values)))
        for name, number in values:
            lines.add("enumvalue %s %s %d" % (full, name, number))
    for full, methods in etcd.services.items():
        lines.add("service %s %d" % (full, len(methods)))
        for name, inp, out, _, _ in methods:
            lines.add("method %s %s %s %s" % (full, name, inp, out))
    return lines


# ---------------------------------------------------------------------------
# Random messages in protobuf text format, from etcd's schema.

# No NUL: protobuf-c keeps strings NUL-terminated and would cut one short
# (proto_check_strings() in proto/check.h is how gatewayd refuses those).
STRING_POOL = (list("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 _-./:")
               + ["\"", "\\", "'", "\n", "\t", "\x01", "\x7f", "é", "ß", "ж",
                  "中", "文", "\u2028", "\U0001F600", "\U0010FFFF"])


def escape_bytes(b):
    out = []
    for c in b:
        if 0x20 <= c < 0x7F and c not in (0x22, 0x27, 0x5C):
            out.append(chr(c))
        else:
            out.append("\\%03o" % c)
    return '"' + "".join(out) + '"'


class Generator:
    MAX_DEPTH = 4

    def __init__(self, rng, schema):
        self.rng, self.schema = rng, schema

    def rand_int(self, kind):
        lo, hi = INT_RANGES[kind]
        r = self.rng.random()
        if r < 0.3:
            edges = [lo, hi, 0, 1, lo + 1, hi - 1, 127, 128, 16383, 16384,
                     2**31 - 1, 2**32 - 1, 2**35, 2**63 - 1]
            if lo < 0:
                edges += [-1, -2, -128, -2**31, -2**31 + 1]
            return self.rng.choice([e for e in edges if lo <= e <= hi])
        if r < 0.55:
            return max(lo, min(hi, self.rng.randint(-300, 300)))
        bits = self.rng.randint(1, hi.bit_length())
        v = self.rng.getrandbits(bits)
        if lo < 0 and self.rng.random() < 0.5:
            v = -v - 1
        return max(lo, min(hi, v))

    def rand_bytes(self):
        r = self.rng.random()
        if r < 0.15:
            n = 0
        elif r < 0.9:
            n = self.rng.randint(1, 40)
        else:
            n = self.rng.randint(128, 3000)  # multi-byte length prefix
        return bytes(self.rng.getrandbits(8) for _ in range(n))

    def rand_string(self):
        if self.rng.random() < 0.15:
            return b""
        n = self.rng.randint(1, 30)
        return "".join(self.rng.choice(STRING_POOL) for _ in range(n)).encode()

    def scalar(self, f):
        kind = TYPE_NAMES[f.type]
        if kind in INT_RANGES:
            return str(self.rand_int(kind))
        if kind == "bool":
            return self.rng.choice(["true", "false"])
        if kind in ("float", "double"):
            return repr(self.rng.choice([0.0, 1.5, -2.25, 1024.0, 0.125]))
        if kind == "string":
            return escape_bytes(self.rand_string())
        if kind == "bytes":
            return escape_bytes(self.rand_bytes())
        if kind == "enum":
            return self.rng.choice(self.schema.enums[f.type_name])[0]
        raise Failure("cannot generate a value for %s field %s" % (kind, f.name))

    def value(self, f, depth, full):
        if f.type == T_MESSAGE:
            body = self.message(self.schema.messages[f.type_name], depth + 1, full)
            return "%s {\n%s}\n" % (f.name, body)
        return "%s: %s\n" % (f.name, self.scalar(f))

    def message(self, m, depth, full=False):
        """Text-format body of a random m. full: set every field."""
        out = []
        presence = 1.0 if full else max(0.25, 0.7 - 0.15 * depth)
        chosen_oneof = {}
        for o in m.oneofs:
            members = [f for f in m.fields if f.oneof == o]
            if full or self.rng.random() < presence:
                chosen_oneof[o] = self.rng.choice(members).number
        for f in m.fields:
            if f.type == T_MESSAGE and depth >= self.MAX_DEPTH:
                continue
            if f.oneof is not None:
                if chosen_oneof.get(f.oneof) == f.number:
                    out.append(self.value(f, depth, full and depth < 1))
                continue
            if f.label == L_REPEATED:
                if f.type == T_MESSAGE:
                    n = self.rng.randint(1 if full else 0, max(1, 3 - depth))
                elif self.rng.random() < 0.1:
                    n = self.rng.randint(20, 60)  # long packed runs
                else:
                    n = self.rng.randint(1 if full else 0, 5)
                for _ in range(n):
                    out.append(self.value(f, depth, full and depth < 1))
            elif full or self.rng.random() < presence:
                out.append(self.value(f, depth, full and depth < 1))
        return "".join(out)


# ---------------------------------------------------------------------------
# Tools

def run(cmd, data=None, what=None):
    p = subprocess.run(cmd, input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Failure("%s failed (exit %d): %s\n%s" % (
            what or cmd[0], p.returncode, " ".join(cmd),
            p.stderr.decode(errors="replace")[-4000:]))
    return p.stdout


class Protoc:
    def __init__(self, protoc, includes):
        self.cmd = [protoc] + ["-I" + d for d in includes]

    def descriptor_set(self, files, out):
        run(self.cmd + ["--include_imports", "--descriptor_set_out=" + out] + files,
            what="protoc --descriptor_set_out")

    def encode(self, proto, msg, text):
        return run(self.cmd + ["--encode=" + msg, proto], text.encode(),
                   what="protoc --encode=" + msg)

    def decode(self, proto, msg, data):
        return run(self.cmd + ["--decode=" + msg, proto], data,
                   what="protoc --decode=" + msg).decode()


def split_batch(data):
    """The (field number, payload) records of a serialized batch."""
    return [(num, val) for num, wt, val in wire_fields(data) if wt == 2]


def join_batch(records):
    out = bytearray()
    for num, payload in records:
        out += encode_varint(num << 3 | 2) + encode_varint(len(payload)) + payload
    return bytes(out)


UNKNOWN_LINE = re.compile(r"^\s*[0-9]+(:| \{)", re.M)


def split_text(text):
    """Top-level "fN { ... }" entries of a decoded batch, in order."""
    chunks, cur = [], None
    for line in text.splitlines(keepends=True):
        if cur is None:
            if not re.match(r"^f[0-9]+ \{$", line.rstrip("\n")):
                raise Failure("unexpected line in decoded batch: %r" % line)
            cur = [line]
        else:
            cur.append(line)
            if line.rstrip("\n") == "}":
                chunks.append("".join(cur))
                cur = None
    if cur is not None:
        raise Failure("decoded batch ends inside an entry")
    return chunks


def run_codec(codec, records):
    """Sends (mode, type name, bytes) records through the C codec; returns
    (status, payload) per record."""
    data = bytearray()
    for _, name, payload in records:
        n = name.encode()
        data += struct.pack("<H", len(n)) + n
        data += struct.pack("<I", len(payload)) + payload
    out = run([codec, "--codec"], bytes(data), what="C codec")
    results, pos = [], 0
    while pos < len(out):
        status, n = struct.unpack_from("<BI", out, pos)
        pos += 5
        results.append((status, out[pos:pos + n]))
        pos += n
    if len(results) != len(records):
        raise Failure("C codec answered %d of %d records"
                      % (len(results), len(records)))
    return results


# ---------------------------------------------------------------------------

class Universe:
    """A set of etcd files that protoc compiles together, and the batch
    message that carries samples of all their messages."""

    def __init__(self, label, batch_msg, etcd_files, messages):
        self.label, self.batch_msg = label, batch_msg
        self.etcd_files, self.messages = etcd_files, messages
        self.field_of = {m: i + 1 for i, m in enumerate(messages)}
        self.type_of = {i + 1: m for i, m in enumerate(messages)}

    def batch_fields(self):
        return "".join("  repeated .%s f%d = %d;\n" % (m, n, n)
                       for m, n in self.field_of.items())


class Checker:
    def __init__(self, args):
        self.args = args
        self.failures = []
        self.counts = {}

    def fail(self, msg):
        self.failures.append(msg)

    def check_list(self, what, errs, limit=40):
        if errs:
            self.fail("%s: %d difference(s)\n  %s%s" % (
                what, len(errs), "\n  ".join(errs[:limit]),
                "\n  ..." if len(errs) > limit else ""))

    def run(self):
        a = self.args
        protoc = shutil.which("protoc")
        if protoc is None:
            raise Skip("protoc not found (Debian: protobuf-compiler)")
        for d, pkg in ((ETCD_DIR, "golang-etcd-server-dev"),
                       (os.path.join(GOGO_DIR, "gogoproto"),
                        "golang-github-gogo-protobuf-dev"),
                       (os.path.join(GOOGLEAPIS_DIR, "google/api"),
                        "golang-github-grpc-ecosystem-grpc-gateway-dev")):
            if not os.path.isdir(d):
                raise Skip("%s not found (Debian: %s)" % (d, pkg))
        our_dir = os.path.join(a.src, "proto")
        our_files = sorted(os.path.relpath(os.path.join(dp, f), our_dir)
                           for dp, _, fs in os.walk(our_dir)
                           for f in fs if f.endswith(".proto"))
        etcd_files = sorted(
            os.path.relpath(os.path.join(dp, f), ETCD_IMPORT_ROOT)
            for dp, _, fs in os.walk(ETCD_DIR) for f in fs
            if f.endswith(".proto"))
        etcd_files = [f for f in etcd_files
                      if not f.startswith(EXCLUDED_DIRS) and "/vendor/" not in f]
        if RAFT_INTERNAL not in etcd_files:
            raise Skip("%s not found in %s" % (RAFT_INTERNAL, ETCD_DIR))
        files_a = [f for f in etcd_files if f != RAFT_INTERNAL]
        common = [GOGO_DIR, GOGO_WKT_DIR, GOOGLEAPIS_DIR]

        with tempfile.TemporaryDirectory(prefix="cetcd-proto-wire-") as tmp:
            if a.workdir:
                os.makedirs(a.workdir, exist_ok=True)
                tmp = a.workdir
            etcd_a = Protoc(protoc, [tmp, ETCD_IMPORT_ROOT] + common)
            etcd_b = Protoc(protoc, [tmp, os.path.join(ETCD_IMPORT_ROOT,
                                                       os.path.dirname(RAFT_INTERNAL)),
                                     ETCD_IMPORT_ROOT] + common)
            ours = Protoc(protoc, [tmp, our_dir])

            # 1. Schemas.
            etcd = Schema()
            etcd_a.descriptor_set(files_a, os.path.join(tmp, "etcd_a.desc"))
            etcd.load(os.path.join(tmp, "etcd_a.desc"), lambda n: n in files_a)
            etcd_b.descriptor_set([os.path.basename(RAFT_INTERNAL)],
                                  os.path.join(tmp, "etcd_b.desc"))
            etcd.load(os.path.join(tmp, "etcd_b.desc"),
                      lambda n: n == os.path.basename(RAFT_INTERNAL))
            mine = Schema()
            ours.descriptor_set(our_files, os.path.join(tmp, "ours.desc"))
            mine.load(os.path.join(tmp, "ours.desc"), lambda n: n in our_files)
            self.check_list("schema of cetcd's .proto files vs etcd's",
                            compare_schemas(etcd, mine))
            self.counts["etcd files"] = len(etcd.files)
            self.counts["messages"] = len(etcd.messages)
            self.counts["enums"] = len(etcd.enums)
            self.counts["services"] = len(etcd.services)
            self.counts["methods"] = sum(len(v) for v in etcd.services.values())
            self.counts["fields"] = sum(len(m.fields) for m in etcd.messages.values())

            # 2. Generated C descriptors.
            dump = set(run([a.codec, "--dump"], what="C descriptor dump")
                       .decode().splitlines())
            want = expected_c_dump(etcd)
            # LATER_FIELDS' messages: their field counts, and those
            # fields' lines, are not etcd 3.4's (the schema check above
            # holds the fields to their number, name and type)
            def not_later(line):
                w = line.split()
                if len(w) >= 2 and w[0] == "message" and w[1] in LATER_FIELDS:
                    return False
                # "field <message> <name> <number> <label> <type> ..."
                return not (len(w) >= 6 and w[0] == "field" and w[3].isdigit()
                            and LATER_FIELDS.get(w[1], {}).get(int(w[3]))
                            == (w[2], w[5]))
            dump = set(filter(not_later, dump))
            want = set(filter(not_later, want))
            self.check_list("protobuf-c descriptors vs etcd's schema",
                            ["missing in C: " + l for l in sorted(want - dump)]
                            + ["not in etcd: " + l for l in sorted(dump - want)])

            # 3-5. Samples, universe by universe.
            def top_messages(pred):
                return sorted(full for full, m in etcd.messages.items()
                              if pred(m.file) and not m.map_entry)
            unis = [
                Universe("etcd files but raft_internal.proto", "BatchA", files_a,
                         top_messages(lambda f: f in files_a)),
                Universe("raft_internal.proto", "BatchB",
                         [os.path.basename(RAFT_INTERNAL)],
                         top_messages(lambda f: f == os.path.basename(RAFT_INTERNAL))),
            ]
            with open(os.path.join(tmp, "cetcd_wire_ours.proto"), "w") as out:
                out.write('syntax = "proto2";\npackage %s;\n' % BATCH_PACKAGE)
                for f in our_files:
                    out.write('import "%s";\n' % f)
                for u in unis:
                    out.write("message %s {\n%s}\n" % (u.batch_msg, u.batch_fields()))
            rng = random.Random(a.seed)
            gen = Generator(rng, etcd)
            for u, p in zip(unis, (etcd_a, etcd_b)):
                self.check_universe(u, p, ours, gen, tmp)
        return not self.failures

    def check_universe(self, u, etcd_p, ours_p, gen, tmp):
        a = self.args
        proto = "cetcd_wire_%s.proto" % u.batch_msg.lower()
        with open(os.path.join(tmp, proto), "w") as out:
            out.write('syntax = "proto2";\npackage %s;\n' % BATCH_PACKAGE)
            for f in u.etcd_files:
                out.write('import "%s";\n' % f)
            out.write("message %s {\n%s}\n" % (u.batch_msg, u.batch_fields()))
        batch = BATCH_PACKAGE + "." + u.batch_msg

        text_parts, kinds = [], []
        for full in u.messages:
            m = gen.schema.messages[full]
            n = u.field_of[full]
            bodies = [gen.message(m, 0, full=True), ""]
            bodies += [gen.message(m, 0) for _ in range(a.samples)]
            for body in bodies:
                text_parts.append("f%d {\n%s}\n" % (n, body))
                kinds.append(full)
        text = "".join(text_parts)
        self.counts["samples"] = self.counts.get("samples", 0) + len(kinds)

        # etcd's encoding and its canonical text.
        etcd_bin = etcd_p.encode(proto, batch, text)
        etcd_text = etcd_p.decode(proto, batch, etcd_bin)
        for suffix, content in ((".txt", text.encode()), (".bin", etcd_bin),
                                (".canonical.txt", etcd_text.encode())):
            with open(os.path.join(tmp, u.batch_msg + suffix), "wb") as out:
                out.write(content)
        if UNKNOWN_LINE.search(etcd_text):
            raise Failure("etcd's own round trip shows unknown fields")
        etcd_chunks = split_text(etcd_text)
        records = split_batch(etcd_bin)
        if len(records) != len(kinds) or len(etcd_chunks) != len(kinds):
            raise Failure("%s: %d samples, %d encoded, %d decoded"
                          % (u.label, len(kinds), len(records), len(etcd_chunks)))
        self.counts["bytes"] = self.counts.get("bytes", 0) + len(etcd_bin)

        # 3. etcd bytes -> cetcd C decode/encode -> same bytes, same text.
        codec_in = [(MODE_ROUNDTRIP, u.type_of[num], payload)
                    for num, payload in records]
        controls = self.negative_controls(u, records, gen.rng)
        results = run_codec(a.codec, codec_in + controls)
        rt, ctl = results[:len(codec_in)], results[len(codec_in):]
        rebuilt, errs = [], []
        for i, ((num, payload), (status, out)) in enumerate(zip(records, rt)):
            if status != 0:
                errs.append("sample %d (%s): C codec: %s: %s\n%s" % (
                    i, u.type_of[num], STATUS_NAMES.get(status, status),
                    out.decode(errors="replace"), etcd_chunks[i]))
                out = payload
            elif out != payload:
                errs.append("sample %d (%s): C re-encoding differs from etcd's "
                            "bytes\n  etcd:  %s\n  cetcd: %s" % (
                                i, u.type_of[num], payload.hex()[:200],
                                out.hex()[:200]))
            rebuilt.append((num, out))
        self.check_list("%s: etcd -> cetcd C -> bytes" % u.label, errs, 5)
        self.compare_chunks("%s: etcd -> cetcd C -> etcd text" % u.label,
                            etcd_chunks,
                            split_text(etcd_p.decode(proto, batch,
                                                     join_batch(rebuilt))))
        self.check_controls(u, controls, ctl)

        # 4. cetcd .proto files <-> etcd's, through protoc.
        ours_proto = "cetcd_wire_ours.proto"
        try:
            ours_bin = ours_p.encode(ours_proto, batch, text)
        except Failure as e:
            self.fail("%s: encoding with cetcd's .proto files: %s" % (u.label, e))
            return
        ours_records = split_batch(ours_bin)
        errs = ["sample %d (%s): bytes differ from etcd's" % (i, u.type_of[r[0]])
                for i, (r, o) in enumerate(zip(records, ours_records)) if r != o]
        if len(ours_records) != len(records):
            errs.append("%d records, etcd has %d" % (len(ours_records), len(records)))
        self.check_list("%s: encoded by cetcd's .proto files vs etcd's" % u.label,
                        errs, 5)
        self.compare_chunks("%s: cetcd .proto encode -> etcd decode" % u.label,
                            etcd_chunks,
                            split_text(etcd_p.decode(proto, batch, ours_bin)))
        self.compare_chunks("%s: etcd encode -> cetcd .proto decode" % u.label,
                            etcd_chunks,
                            split_text(ours_p.decode(ours_proto, batch, etcd_bin)))

    def negative_controls(self, u, records, rng):
        """Records the codec must reject (an unknown field appended) or
        survive (truncated or corrupted bytes)."""
        controls = []
        for num, payload in records[::7]:
            # Field 536870911 (the highest number) is in no etcd message.
            extra = encode_varint(536870911 << 3 | 0) + encode_varint(2**64 - 1)
            controls.append((MODE_EXPECT_UNKNOWN, u.type_of[num], payload + extra))
        for num, payload in records:
            if not payload:
                continue
            cut = rng.randrange(len(payload))
            controls.append((MODE_ANY, u.type_of[num], payload[:cut]))
            flip = bytearray(payload)
            flip[rng.randrange(len(flip))] ^= 1 << rng.randrange(8)
            controls.append((MODE_ANY, u.type_of[num], bytes(flip)))
        return controls

    def check_controls(self, u, controls, results):
        errs = []
        for (mode, name, _), (status, out) in zip(controls, results):
            if mode == MODE_EXPECT_UNKNOWN and status != 2:
                errs.append("%s with an unknown field: codec said %s, want %s"
                            % (name, STATUS_NAMES.get(status, status),
                               STATUS_NAMES[2]))
            elif mode == MODE_ANY and status not in (0, 1, 2):
                errs.append("%s corrupted: codec said %s: %s" % (
                    name, STATUS_NAMES.get(status, status),
                    out.decode(errors="replace")))
        self.counts["negative controls"] = (self.counts.get("negative controls", 0)
                                            + len(controls))
        self.check_list("%s: negative controls" % u.label, errs, 5)

    def compare_chunks(self, what, want, got):
        errs = []
        if len(want) != len(got):
            errs.append("%d samples, want %d" % (len(got), len(want)))
        for i, (w, g) in enumerate(zip(want, got)):
            if w != g:
                diff = "".join(difflib.unified_diff(
                    w.splitlines(True), g.splitlines(True), "etcd", "got", n=2))
                errs.append("sample %d:\n%s" % (i, diff[:3000]))
        for i, g in enumerate(got):
            if UNKNOWN_LINE.search(g):
                errs.append("sample %d has unknown fields:\n%s" % (i, g[:3000]))
        self.check_list(what, errs, 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codec", required=True,
                    help="proto/test_wire binary (codec and descriptor dump)")
    ap.add_argument("--src", required=True, help="cetcd source root")
    ap.add_argument("--samples", type=int, default=24,
                    help="random samples per message, besides a full and an empty one")
    ap.add_argument("--workdir",
                    help="keep the generated .proto, text and binary files here")
    ap.add_argument("--seed", type=int,
                    default=int(os.environ.get("CETCD_PROTO_SEED", "0"))
                    or int.from_bytes(os.urandom(4), "little"))
    args = ap.parse_args()
    print("proto wire check: seed=%d (CETCD_PROTO_SEED=%d repeats it)"
          % (args.seed, args.seed), flush=True)
    start = time.monotonic()
    c = Checker(args)
    try:
        ok = c.run()
    except Skip as e:
        print("SKIP: %s" % e)
        return SKIP
    except Failure as e:
        c.fail(str(e))
        ok = False
    for f in c.failures:
        print("FAIL: " + f, file=sys.stderr)
    print("proto wire check: %s in %.1fs; %s" % (
        "PASS" if ok else "FAIL (%d check(s))" % len(c.failures),
        time.monotonic() - start,
        ", ".join("%s=%d" % kv for kv in c.counts.items())))
    if not ok:
        print("seed=%d" % args.seed, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
