// Package schemaregistry is a Confluent-compatible schema registry: the
// Schema Registry REST API (subjects, versions, ids, references, config,
// compatibility and mode) served by a Registry, an http.Handler meant to be
// mounted at the root path, with every record kept in the metastore so that
// any number of Registry instances (one per broker) agree on ids, versions
// and levels.
//
// Schemas are AVRO (github.com/hamba/avro/v2), JSON (JSON Schema, compiled
// with github.com/santhosh-tekuri/jsonschema/v6) or PROTOBUF (compiled with
// github.com/bufbuild/protocompile). A new version is checked against the
// subject's live versions at its compatibility level (BACKWARD by default;
// FORWARD, FULL, their TRANSITIVE forms, and NONE), following Confluent's
// rules per format.
//
// File map:
//
//	registry.go    Registry, Options, New, the Go API brokers use (SchemaByID, SubjectHasID)
//	http.go        routing, content types, request decoding, responses
//	errors.go      Confluent error codes and the JSON error body
//	subjects.go    /subjects: list, versions, get, delete, referencedby
//	register.go    POST /subjects/{s}/versions and POST /subjects/{s}: identity, modes, ids
//	schemas.go     /schemas: by id, its versions and subjects, types, all schemas
//	config.go      /config and /mode
//	compat.go      levels, /compatibility, and checking a schema against versions
//	format.go      the per-format interface, canonical text, reference resolution
//	avro.go        AVRO canonical text, parsing and reader/writer resolution
//	jsonschema.go  JSON Schema parsing
//	jsoncompat.go  JSON Schema compatibility rules; jsoncontent.go those of objects and arrays
//	protobuf.go    Protobuf parsing; protocompat.go its compatibility rules
//	cache.go       caches of parsed schemas and of the ids under a subject
//
// Non-obvious:
//   - A schema's id is global and stable: it is allocated once per (type,
//     canonical text, references) by the metastore and never reused, so two
//     registries over one metastore hand out the same id.
//   - Versions are appended with a compare-and-set on the subject's latest
//     version; a registration that loses the race re-reads the subject and
//     checks compatibility again.
//   - Identity is the canonical text: AVRO re-serialized the way Java
//     writes it (key order and whitespace never matter), JSON compacted
//     (key order matters unless ?normalize=true), PROTOBUF as given.
//   - hamba/avro's SchemaCompatibility caches results by the schemas'
//     canonical fingerprints, which ignore defaults and aliases, and its
//     Parse resolves names through a process-wide cache; so every check
//     uses a fresh SchemaCompatibility and every parse a fresh SchemaCache.
package schemaregistry
