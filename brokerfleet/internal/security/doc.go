// Package security is the broker's authentication and authorization:
// listeners (each plaintext or TLS, with or without SASL), TLS material
// that reloads on renewal, per-connection sessions that run SASL PLAIN and
// SCRAM-SHA-256/512 (server side, and the client side brokers use towards
// each other), and the ACL authorizer behind the Authorizer interface.
//
// The file map: config.go (Config, Listener, validation, listener
// addresses), tls.go (certificates and TLS configs), session.go (one
// connection's authentication state, re-authentication), scram.go (the
// SCRAM server), fake.go (fake credentials of unknown users),
// authenticator.go (what sessions share: Authenticator, the sessions by
// user), cache.go (the credential cache), limiter.go (failed logins per
// address), dial.go (how a broker connects to another: TLS, then SASL,
// renewed before it expires), acl.go (ACL semantics: Authorizer, ACLs,
// filters, entry validation).
//
// What a request may do is decided in the broker package, one rule per
// API key beside its handler, by asking an Authorizer.
package security
