/*
 * proto/test_wire: cetcd's .proto files and their protobuf-c code against
 * etcd 3.4's own .proto files.
 *
 * Run without arguments (as ctest does), it hands over to
 * tests/proto/wire_check.py, which drives protoc with etcd's files and
 * calls back into this program in one of two modes:
 *
 *   --dump   prints every generated descriptor (messages, fields, enums,
 *            services, methods), one fact per line, for comparison with
 *            etcd's schema;
 *   --codec  reads records from stdin, decodes each with the generated C
 *            code, checks that nothing decoded as an unknown field,
 *            re-encodes it and writes the result to stdout.
 *
 * Codec record, in:  u16 name length, name (full message type name),
 *                    u32 data length, data
 *            out: u8 status, u32 length, re-encoded bytes or an error text
 * (little-endian). The statuses are mirrored in wire_check.py.
 * The codec decodes whatever bytes it is given, corrupted ones included,
 * so under the sanitizer build it doubles as a small decoder fuzz.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/registry.h"

enum codec_status {
	CODEC_OK = 0,
	CODEC_UNPACK_FAILED = 1,
	CODEC_UNKNOWN_FIELDS = 2,
	CODEC_NO_SUCH_TYPE = 3,
	CODEC_PACK_MISMATCH = 4,
};

static const char *label_name(ProtobufCLabel l)
{
	switch (l) {
	case PROTOBUF_C_LABEL_REQUIRED: return "required";
	case PROTOBUF_C_LABEL_OPTIONAL: return "optional";
	case PROTOBUF_C_LABEL_REPEATED: return "repeated";
	case PROTOBUF_C_LABEL_NONE: return "none";
	}
	return "?";
}

static const char *type_name(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32: return "int32";
	case PROTOBUF_C_TYPE_SINT32: return "sint32";
	case PROTOBUF_C_TYPE_SFIXED32: return "sfixed32";
	case PROTOBUF_C_TYPE_INT64: return "int64";
	case PROTOBUF_C_TYPE_SINT64: return "sint64";
	case PROTOBUF_C_TYPE_SFIXED64: return "sfixed64";
	case PROTOBUF_C_TYPE_UINT32: return "uint32";
	case PROTOBUF_C_TYPE_FIXED32: return "fixed32";
	case PROTOBUF_C_TYPE_UINT64: return "uint64";
	case PROTOBUF_C_TYPE_FIXED64: return "fixed64";
	case PROTOBUF_C_TYPE_FLOAT: return "float";
	case PROTOBUF_C_TYPE_DOUBLE: return "double";
	case PROTOBUF_C_TYPE_BOOL: return "bool";
	case PROTOBUF_C_TYPE_ENUM: return "enum";
	case PROTOBUF_C_TYPE_STRING: return "string";
	case PROTOBUF_C_TYPE_BYTES: return "bytes";
	case PROTOBUF_C_TYPE_MESSAGE: return "message";
	}
	return "?";
}

/* The full name of a message or enum field's type, "-" for scalars. */
static const char *field_type_name(const ProtobufCFieldDescriptor *f)
{
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return ((const ProtobufCMessageDescriptor *)f->descriptor)->name;
	if (f->type == PROTOBUF_C_TYPE_ENUM)
		return ((const ProtobufCEnumDescriptor *)f->descriptor)->name;
	return "-";
}

/* Line formats must match expected_c_dump() in wire_check.py. */
static int dump(void)
{
	for (size_t i = 0; i < proto_message_count(); i++) {
		const ProtobufCMessageDescriptor *d = proto_message_at(i);

		printf("message %s %u\n", d->name, d->n_fields);
		for (unsigned j = 0; j < d->n_fields; j++) {
			const ProtobufCFieldDescriptor *f = &d->fields[j];

			printf("field %s %s %u %s %s packed=%d oneof=%d %s\n",
			       d->name, f->name, f->id, label_name(f->label),
			       type_name(f->type),
			       (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) != 0,
			       (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0,
			       field_type_name(f));
		}
	}
	for (size_t i = 0; i < proto_enum_count(); i++) {
		const ProtobufCEnumDescriptor *e = proto_enum_at(i);

		printf("enum %s %u\n", e->name, e->n_values);
		for (unsigned j = 0; j < e->n_values; j++)
			printf("enumvalue %s %s %d\n", e->name, e->values[j].name,
			       e->values[j].value);
	}
	for (size_t i = 0; i < proto_service_count(); i++) {
		const ProtobufCServiceDescriptor *s = proto_service_at(i);

		printf("service %s %u\n", s->name, s->n_methods);
		for (unsigned j = 0; j < s->n_methods; j++)
			printf("method %s %s %s %s\n", s->name, s->methods[j].name,
			       s->methods[j].input->name, s->methods[j].output->name);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

/*
 * Finds a field that protobuf-c kept as unknown anywhere in m's tree and
 * describes it in where. Returns true if there is one. protobuf-c keeps
 * unknown fields and writes them back out when packing, so a round trip
 * alone would hide a field our schema lacks.
 */
static bool find_unknown(const ProtobufCMessage *m, char *where, size_t cap)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;

	if (m->n_unknown_fields > 0) {
		snprintf(where, cap, "%s has unknown field %u", d->name,
			 m->unknown_fields[0].tag);
		return true;
	}
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			ProtobufCMessage *const *v =
				*(ProtobufCMessage *const *const *)(base + f->offset);

			for (size_t j = 0; j < n; j++)
				if (find_unknown(v[j], where, cap))
					return true;
			continue;
		}
		/* Oneof members share storage: only the chosen one is valid. */
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)(base + f->quantifier_offset) != f->id)
			continue;
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(base + f->offset);
		if (sub != NULL && find_unknown(sub, where, cap))
			return true;
	}
	return false;
}

struct out_buf {
	uint8_t *data;
	size_t len, cap;
};

/* Appends one codec result; exits on allocation failure (a test tool). */
static void put_result(struct out_buf *o, enum codec_status status,
		       const void *data, uint32_t len)
{
	uint8_t head[5] = { (uint8_t)status, (uint8_t)len, (uint8_t)(len >> 8),
			    (uint8_t)(len >> 16), (uint8_t)(len >> 24) };

	if (o->cap - o->len < sizeof(head) + len) {
		size_t cap = (o->cap ? o->cap * 2 : 1 << 16) + sizeof(head) + len;
		uint8_t *p = realloc(o->data, cap);

		if (p == NULL) {
			fprintf(stderr, "codec: out of memory\n");
			exit(2);
		}
		o->data = p;
		o->cap = cap;
	}
	memcpy(o->data + o->len, head, sizeof(head));
	memcpy(o->data + o->len + sizeof(head), data, len);
	o->len += sizeof(head) + len;
}

static void put_error(struct out_buf *o, enum codec_status status, const char *text)
{
	put_result(o, status, text, (uint32_t)strlen(text));
}

/* Decodes, checks and re-encodes one record's data as type name. */
static void codec_one(struct out_buf *o, const char *name, const uint8_t *data,
		      size_t len)
{
	const ProtobufCMessageDescriptor *d = proto_message_find(name);
	ProtobufCMessage *m;
	char where[512];
	size_t size;
	uint8_t *packed;

	if (d == NULL) {
		snprintf(where, sizeof(where), "no generated code for %s", name);
		put_error(o, CODEC_NO_SUCH_TYPE, where);
		return;
	}
	m = protobuf_c_message_unpack(d, NULL, len, data);
	if (m == NULL) {
		put_error(o, CODEC_UNPACK_FAILED, "protobuf_c_message_unpack failed");
		return;
	}
	if (find_unknown(m, where, sizeof(where))) {
		put_error(o, CODEC_UNKNOWN_FIELDS, where);
		goto out_free_msg;
	}
	size = protobuf_c_message_get_packed_size(m);
	packed = malloc(size ? size : 1);
	if (packed == NULL) {
		fprintf(stderr, "codec: out of memory\n");
		exit(2);
	}
	if (protobuf_c_message_pack(m, packed) != size)
		put_error(o, CODEC_PACK_MISMATCH, "pack wrote a size other than get_packed_size");
	else
		put_result(o, CODEC_OK, packed, (uint32_t)size);
	free(packed);
out_free_msg:
	protobuf_c_message_free_unpacked(m, NULL);
}

static uint8_t *read_all(FILE *f, size_t *len)
{
	size_t cap = 1 << 20, n = 0, got;
	uint8_t *buf = malloc(cap);

	while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			uint8_t *p = realloc(buf, cap * 2);

			if (p == NULL) {
				free(buf);
				return NULL;
			}
			buf = p;
			cap *= 2;
		}
	}
	*len = n;
	return buf;
}

static uint32_t get_le(const uint8_t *p, unsigned bytes)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static int codec(void)
{
	struct out_buf o = { 0 };
	size_t len, pos = 0;
	uint8_t *in = read_all(stdin, &len);
	int rc = 1;

	if (in == NULL) {
		fprintf(stderr, "codec: cannot read stdin\n");
		return 1;
	}
	while (pos < len) {
		char name[256];
		uint32_t name_len, data_len;

		if (len - pos < 2)
			goto out_malformed;
		name_len = get_le(in + pos, 2);
		if (name_len >= sizeof(name) || len - pos - 2 < name_len + 4u)
			goto out_malformed;
		memcpy(name, in + pos + 2, name_len);
		name[name_len] = '\0';
		pos += 2 + name_len;
		data_len = get_le(in + pos, 4);
		pos += 4;
		if (len - pos < data_len) {
			fprintf(stderr, "codec: record for %s runs past the input\n", name);
			goto out_free;
		}
		/* Decode from an exact-size copy so that ASan sees any overread. */
		uint8_t *data = malloc(data_len ? data_len : 1);
		if (data == NULL) {
			fprintf(stderr, "codec: out of memory\n");
			goto out_free;
		}
		memcpy(data, in + pos, data_len);
		codec_one(&o, name, data, data_len);
		free(data);
		pos += data_len;
	}
	rc = fwrite(o.data, 1, o.len, stdout) == o.len && fflush(stdout) == 0 ? 0 : 1;
	goto out_free;
out_malformed:
	fprintf(stderr, "codec: malformed record header at offset %zu\n", pos);
out_free:
	free(o.data);
	free(in);
	return rc;
}

/* Hands the test over to wire_check.py; returns only on failure. */
static int run_checker(void)
{
	char self[PATH_MAX], src[PATH_MAX], script[PATH_MAX];
	const char *env = getenv("CETCD_SRC");
	const char *suffix = "/tests/unit/proto/test_wire.c";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0) {
		perror("proto/test_wire: readlink /proc/self/exe");
		return 1;
	}
	self[n] = '\0';
	if (env != NULL && *env != '\0') {
		snprintf(src, sizeof(src), "%s", env);
	} else {
		/* The build passes absolute source paths, so __FILE__ locates
		 * the source tree. */
		const char *file = __FILE__;
		size_t flen = strlen(file), slen = strlen(suffix);

		if (flen <= slen || flen - slen >= sizeof(src) ||
		    strcmp(file + flen - slen, suffix) != 0) {
			printf("SKIP: cannot find the source tree from %s; set CETCD_SRC\n",
			       file);
			return 77;
		}
		memcpy(src, file, flen - slen);
		src[flen - slen] = '\0';
	}
	snprintf(script, sizeof(script), "%s/tests/proto/wire_check.py", src);
	if (access(script, R_OK) != 0) {
		printf("SKIP: %s not found; set CETCD_SRC to the source tree\n", script);
		return 77;
	}
	fflush(stdout);
	execlp("python3", "python3", script, "--codec", self, "--src", src, (char *)NULL);
	if (errno == ENOENT) {
		printf("SKIP: python3 not found (Debian: python3)\n");
		return 77;
	}
	perror("proto/test_wire: exec python3");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--dump") == 0)
		return dump();
	if (argc == 2 && strcmp(argv[1], "--codec") == 0)
		return codec();
	if (argc != 1) {
		fprintf(stderr, "usage: %s [--dump | --codec]\n", argv[0]);
		return 2;
	}
	return run_checker();
}
