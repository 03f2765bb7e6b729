// Package metastore is Strata's control-plane store: the records that make
// DynamoDB the controller (brokers, topics, partition state, leases,
// committed offsets, producer-id blocks, segment manifests, schemas).
//
// Everything is written once on top of one small primitive, Store: items
// addressed by a partition key and a sort key, each carrying a version that
// every write increments, with writes conditioned on absence or on the
// version last read. Implementations only translate that primitive: the
// embedded store (bbolt, used by `brokerfleet dev`) and the DynamoDB store
// (aws-sdk-go-v2), both checked by the conformance suite in metastoretest.
// Lease, fencing and offset-commit rules live above the primitive, in this
// package, so every implementation runs the same logic.
//
// Time is never compared across machines. Leases are measured on the local
// monotonic clock (see Lease); item expiry (TTL) is only a hint for
// DynamoDB's background deletion and for readers, never a basis for
// ownership. The one exception is offset retention: the commit and
// became-empty times in Offset and GroupInfo are wall-clock times of the
// coordinator that wrote them, read by the next; clock skew between
// brokers moves when offsets expire, never who owns what.
package metastore
