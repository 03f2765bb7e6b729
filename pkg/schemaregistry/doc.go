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
//	http.go        routing with each endpoint's authorization rule, content types, request decoding, responses
//	auth.go        Protect: HTTP basic authentication, Authenticator, Authorizer, subjects mapped to Kafka ACL resources
//	scramauth.go   ScramAuthenticator: basic credentials checked against the SCRAM users, with a bounded cache
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
// Security: Protect(registry, Security{...}) authenticates every request
// (401, error code 40101, without valid credentials) and lets each route's
// rule ask an Authorizer with Kafka's ACL semantics (403, 40301): a subject
// T-value or T-key is guarded by topic T, any other subject by the cluster;
// reads need DESCRIBE, registering WRITE, deleting and config or mode
// changes ALTER (on the cluster, every change ALTER); a schema id is
// readable with DESCRIBE on the cluster or on a subject using it; lists
// hold only what the caller may describe. Without Protect, or with a zero
// Security, everything is open.
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
//   - The caller travels in the request's context: Protect puts it there,
//     rules and list filters read it (callerOf); a nil caller allows all.
//     A schema may reference only subjects its registrant may describe.
package schemaregistry
