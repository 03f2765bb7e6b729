// Package dlqconsole is Strata's console: server-rendered pages of what a
// Kafka user looks at in Redpanda Console or Kafka UI, and the dead-letter
// console with its JSON API over the "<topic>.dlq" topics that pkg/retry
// fills.
//
// The pages (views.go) are read-only: brokers with the controller, racks
// and an ApiVersions health check of each (cluster.go); topics with their
// partitions, leaders, ISR, offsets, configs and sizes on disk and in S3
// (cluster.go, sizes.go); a message browser by partition and offset or
// time, values decoded through the schema registry (messages.go,
// decode.go); consumer groups with members, assignments, lag per
// partition and lag over time as an SVG drawn on the server (groups.go,
// chart.go); schemas and their versions (schemas.go). Everything comes
// through the Kafka protocol and the registry's API, except what Kafka's
// protocol does not carry: partition sizes and the lag history, which each
// broker serves beside its registry (brokerfleet/adminhttp.go,
// /strata/v1/...) under the registry's authentication, asked at the
// broker's Kafka host on the registry's port. No page runs a script: the
// CSP forbids them, the chart uses presentation attributes only, and every
// key, value and header is escaped.
//
// The dead letters: it lists them, shows one with its headers, failure
// history and value (decoded through a Confluent-compatible schema
// registry when the value carries the 5-byte Confluent header), replays
// selected letters to their origin topic and partition, and purges
// letters.
//
// What the console has handled is kept in Kafka, not in the process: each
// .dlq partition's committed offset in the console's consumer group (Options.
// Group, default "strata-dlq-console") hides every letter before it, and the
// commit's metadata lists the offsets after it that were replayed or purged
// out of order. So the console can run as many stateless copies (a Lambda
// function) and still agree on what is left.
//
// Routes, relative to Options.BasePath:
//
//	GET  /                                             HTML: the cluster and its brokers
//	GET  /topics, /topics/{topic}                      HTML: topics; one topic's partitions, sizes and configs
//	GET  /topics/{topic}/messages?partition=P&offset=O|time=T&limit=N
//	                                                   HTML: a page of records (limit <= 100)
//	GET  /groups, /groups/{group}                      HTML: consumer groups; one with its lag chart
//	GET  /schemas, /schemas/{subject}                  HTML: subjects; one subject's versions
//	GET  /dlq/                                         HTML: DLQ topics with counts
//	GET  /dlq/topics/{topic}                           HTML: the letters of a topic
//	GET  /dlq/topics/{topic}/letters/{partition}/{offset}  HTML: one letter
//	POST /dlq/topics/{topic}/action                    HTML form: replay, purge, purge all
//	GET  /api/topics                                   JSON: DLQ topics
//	GET  /api/topics/{topic}/letters?limit=N&after=P:O JSON: letters, in partition then offset order
//	GET  /api/topics/{topic}/letters/{partition}/{offset}
//	POST /api/topics/{topic}/replay  {"letters":[{"partition":0,"offset":3}],"force":false}
//	POST /api/topics/{topic}/purge   {"upTo":[{"partition":0,"offset":3}]} | {"letters":[...]} | {"all":true}
//
// Replaying a letter that was already replayed (its strata.dlq.replays
// header is 1 or more, or the console already handled that offset) answers
// 409 unless "force" is set. A letter of X.dlq is replayed to X only: one
// whose origin header names any other topic answers 409 even with "force"
// and keeps its place (pkg/retry State.CheckOrigin), so whoever may write
// X.dlq cannot use the console to write other topics. API errors are JSON {"error": "..."}: 400 for a
// malformed request, 404 for an unknown topic, a topic that is not a .dlq
// topic or an unknown letter, 409 for a refused replay, 502/503 when Kafka
// fails. Pages answer errors as an HTML page with the same statuses (400
// naming the bad parameter, 404 for unknown topics, partitions, groups and
// subjects, 403 when the console's own Kafka user is refused). A value the
// registry cannot decode is still shown (as text or hex, with a note), so a
// broken registry does not hide the dead letters.
//
// POSTs are protected against cross-site requests: the JSON API requires
// Content-Type application/json (which a cross-site form cannot send without
// a CORS preflight) and a same-origin Origin header when one is present;
// HTML forms carry a token that must match a SameSite=Strict cookie.
//
// The Lambda entry point (./cmd) serves the console behind a Lambda Function
// URL and reads its configuration from the environment:
//
//	STRATA_BOOTSTRAP     Kafka bootstrap brokers, host:port[,host:port...] (required)
//	STRATA_REGISTRY_URL  schema registry URL (optional; without it values are shown as text or hex,
//	                     and there are no sizes or lag chart: the brokers serve those beside it)
//	STRATA_DLQ_GROUP     the console's consumer group (default strata-dlq-console)
//
// and, to reach secured brokers, package kafkaauth's STRATA_TLS_CA_SECRET_ARN,
// STRATA_SASL_SECRET_ARN (secrets read at cold start) and friends; the
// registry and the brokers' admin endpoints get the same user and CA.
//
// Build it with
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o functions/dlqconsole/bootstrap ./functions/dlqconsole/cmd
package dlqconsole
