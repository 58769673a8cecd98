/*
 * proto/registry.h: find cetcd's generated protobuf-c descriptors by name.
 *
 * The generated code for each .proto file lives in the build tree and is
 * included by path below the package, e.g.
 *     #include "etcdserverpb/rpc.pb-c.h"
 *     #include "raftpb/raft.pb-c.h"
 * This header adds lookups over all of them: by full protobuf name
 * ("etcdserverpb.RangeRequest", "raftpb.EntryType", "etcdserverpb.KV")
 * and by gRPC path ("/etcdserverpb.KV/Range").
 *
 * Every pointer returned points into static, read-only tables that live
 * for the whole program; nothing here allocates and nothing is freed.
 * Lookups are linear scans (about 130 messages, a dozen enums, eight
 * services): cheap, but callers on a hot path should cache the result.
 */
#ifndef CETCD_PROTO_REGISTRY_H
#define CETCD_PROTO_REGISTRY_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

/* Message types, nested ones included, in no particular order.
 * proto_message_at returns NULL when i >= proto_message_count(). */
size_t proto_message_count(void);
const ProtobufCMessageDescriptor *proto_message_at(size_t i);
/* The message type with this full name, or NULL. */
const ProtobufCMessageDescriptor *proto_message_find(const char *full_name);

/* Enum types, nested ones included. */
size_t proto_enum_count(void);
const ProtobufCEnumDescriptor *proto_enum_at(size_t i);
const ProtobufCEnumDescriptor *proto_enum_find(const char *full_name);

/* gRPC services (etcdserverpb.KV, ..., v3lockpb.Lock). */
size_t proto_service_count(void);
const ProtobufCServiceDescriptor *proto_service_at(size_t i);
const ProtobufCServiceDescriptor *proto_service_find(const char *full_name);

/*
 * Resolves a gRPC request path, "/<package>.<Service>/<Method>", to its
 * service and method. path need not be NUL-terminated (it usually comes
 * straight from an HTTP/2 :path header); len is its length in bytes.
 * service and method may each be NULL if the caller does not want it.
 * Returns 0, -EINVAL if path is not of that form, or -ENOENT if no such
 * service or method exists (gRPC's UNIMPLEMENTED).
 */
int proto_method_find(const char *path, size_t len,
                      const ProtobufCServiceDescriptor **service,
                      const ProtobufCMethodDescriptor **method);

#endif
