/*
 * proto/tables.h: the descriptor tables behind registry.c. Their
 * definitions are generated at build time (tables.cmake) from the
 * declarations protoc-c writes into each .pb-c.h, so a new message or
 * .proto file needs no edit here. Internal to cetcd_proto.
 */
#ifndef CETCD_PROTO_TABLES_H
#define CETCD_PROTO_TABLES_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

extern const ProtobufCMessageDescriptor *const proto_tables_messages[];
extern const size_t proto_tables_message_count;
extern const ProtobufCEnumDescriptor *const proto_tables_enums[];
extern const size_t proto_tables_enum_count;
extern const ProtobufCServiceDescriptor *const proto_tables_services[];
extern const size_t proto_tables_service_count;

#endif
