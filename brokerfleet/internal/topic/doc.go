// Package topic defines what a Strata topic is to the broker: its name
// rules and its configuration keys with their defaults and validation.
// Topic records themselves live in the metastore.
//
// Configs are stored as the overrides a user set (a map of strings, as Kafka
// keeps them) and resolved into a typed Config against the broker's defaults
// whenever they change, so the hot path reads plain fields.
package topic
