// Package interop runs Kafka clients and tools that others wrote, each
// with its own implementation of the protocol, against Strata brokers
// started in the test (brokertest): segmentio/kafka-go (Go),
// @platformatic/kafka (Node.js, driven through testdata/platformatic/client.mjs)
// and LinkedIn's Burrow (lag evaluation from the offsets Strata reports).
// Tools from outside Go are found through pkg/testenv: a missing one skips
// locally and fails in CI. The package has no code of its own beside its
// tests.
package interop
