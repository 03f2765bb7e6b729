package security

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdg-go/scram"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// countingCreds counts credential reads.
type countingCreds struct {
	*metastore.Meta
	reads atomic.Int32
}

func (c *countingCreds) ScramCredential(ctx context.Context, user, mech string) (metastore.ScramCredential, error) {
	c.reads.Add(1)
	return c.Meta.ScramCredential(ctx, user, mech)
}

func newMeta(t *testing.T, users ...string) *countingCreds {
	t.Helper()
	store, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m := &countingCreds{Meta: metastore.New(store)}
	for _, u := range users {
		for _, mech := range []string{metastore.ScramSHA256, metastore.ScramSHA512} {
			c, err := metastore.NewScramCredential(u, mech, u+"-secret", 4096)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.PutScramCredential(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

var saslListener = &Listener{Name: "SASL", SASLMechanisms: []string{MechPlain, MechSCRAM256, MechSCRAM512}, AllowPlainWithoutTLS: true}

// newSession is a fresh connection's session from host, timed by now.
func newSession(host string, maxReauth time.Duration, now func() time.Time) *Session {
	return &Session{listener: saslListener, principal: AnonymousUser, host: host, maxReauth: maxReauth, now: now}
}

// scramLogin runs a SCRAM-SHA-512 conversation on s with xdg-go/scram's
// client: the server-first message, the step that failed (1: client-first,
// 2: client-final; 0: none) and its error.
func scramLogin(t *testing.T, s *Session, a *Authenticator, user, pass string) (serverFirst string, failedAt int, err error) {
	t.Helper()
	if code := s.Handshake(MechSCRAM512, 1); code != 0 {
		t.Fatalf("handshake: code %d", code)
	}
	cl, err := scram.SHA512.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	first, _ := conv.Step("")
	out, _, err := s.Step(context.Background(), a, []byte(first))
	if err != nil {
		return "", 1, err
	}
	final, err := conv.Step(string(out))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if _, done, err := s.Step(context.Background(), a, []byte(final)); err != nil || !done {
		return string(out), 2, err
	}
	return string(out), 0, nil
}

func plainLogin(s *Session, a *Authenticator, user, pass string) error {
	if code := s.Handshake(MechPlain, 1); code != 0 {
		return errors.New("handshake refused")
	}
	_, _, err := s.Step(context.Background(), a, []byte("\x00"+user+"\x00"+pass))
	return err
}

// attr returns a SCRAM message's attribute.
func attr(msg, key string) string {
	for _, f := range strings.Split(msg, ",") {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestUnknownUserFailsLikeAWrongPassword: an unknown user gets a
// server-first message like a real user's (a salt of the same length, a
// usual iteration count, the same for the name every time, and the same
// on another broker with the same key) and fails at the client-final
// message with the error a wrong password gets; PLAIN likewise.
func TestUnknownUserFailsLikeAWrongPassword(t *testing.T) {
	m := newMeta(t, "alice")
	key := []byte("cluster-wide key")
	a := NewAuthenticator(AuthOptions{Credentials: m, FakeKey: key})

	realFirst, at, err := scramLogin(t, newSession("10.0.0.1", 0, time.Now), a, "alice", "wrong")
	if at != 2 || !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password: failed at step %d: %v", at, err)
	}
	fakeFirst, at, err := scramLogin(t, newSession("10.0.0.2", 0, time.Now), a, "mallory", "whatever")
	if at != 2 || !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("unknown user: failed at step %d: %v", at, err)
	}
	if len(attr(fakeFirst, "s")) != len(attr(realFirst, "s")) {
		t.Fatalf("fake salt %q, real salt %q", attr(fakeFirst, "s"), attr(realFirst, "s"))
	}
	if i := attr(fakeFirst, "i"); i != "4096" && i != "8192" {
		t.Fatalf("fake iterations %s", i)
	}
	again, _, _ := scramLogin(t, newSession("10.0.0.3", 0, time.Now), a, "mallory", "other")
	other := NewAuthenticator(AuthOptions{Credentials: m, FakeKey: key})
	elsewhere, _, _ := scramLogin(t, newSession("10.0.0.4", 0, time.Now), other, "mallory", "x")
	for _, f := range []string{again, elsewhere} {
		if attr(f, "s") != attr(fakeFirst, "s") || attr(f, "i") != attr(fakeFirst, "i") {
			t.Fatalf("fake credential changed: %q then %q", fakeFirst, f)
		}
	}
	if bob, _, _ := scramLogin(t, newSession("10.0.0.5", 0, time.Now), a, "bob", "x"); attr(bob, "s") == attr(fakeFirst, "s") {
		t.Fatal("two unknown users share a salt")
	}
	if _, at, err := scramLogin(t, newSession("10.0.0.6", 0, time.Now), a, "alice", "alice-secret"); at != 0 {
		t.Fatalf("right password: failed at step %d: %v", at, err)
	}

	for _, tc := range []struct{ user, pass string }{{"alice", "wrong"}, {"mallory", "x"}} {
		if err := plainLogin(newSession("10.0.1.1", 0, time.Now), a, tc.user, tc.pass); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("PLAIN %s: %v", tc.user, err)
		}
	}
	if err := plainLogin(newSession("10.0.1.1", 0, time.Now), a, "alice", "alice-secret"); err != nil {
		t.Fatalf("PLAIN alice: %v", err)
	}
}

// TestReauthentication: a login lasts MaxReauth; a re-authentication
// (SaslHandshake v1 on the authenticated session) renews it while other
// requests are still served, and must keep the user and the mechanism;
// past the lifetime only a re-authentication begun in time may go on.
func TestReauthentication(t *testing.T) {
	m := newMeta(t, "alice", "bob")
	fc := clock.NewFake(time.Unix(1000, 0))
	a := NewAuthenticator(AuthOptions{Credentials: m, Clock: fc})
	s := newSession("10.0.0.1", 10*time.Second, fc.Now)
	if _, at, err := scramLogin(t, s, a, "alice", "alice-secret"); at != 0 {
		t.Fatalf("login: %v", err)
	}
	if !s.Authenticated() || s.Ended() || s.Lifetime() != 10*time.Second {
		t.Fatalf("after login: authenticated %v ended %v lifetime %v", s.Authenticated(), s.Ended(), s.Lifetime())
	}

	fc.Advance(9 * time.Second)
	if code := s.Handshake(MechSCRAM512, 0); code == 0 {
		t.Fatal("re-authentication with SaslHandshake v0 accepted")
	}
	if _, at, err := scramLogin(t, s, a, "alice", "alice-secret"); at != 0 {
		t.Fatalf("re-authentication: %v", err)
	}
	fc.Advance(9 * time.Second) // 18 s after the first login
	if !s.Authenticated() || s.Principal() != "User:alice" {
		t.Fatal("re-authentication did not renew the login")
	}

	// A re-authentication begun in time may finish late; other requests
	// may not be served then.
	if code := s.Handshake(MechSCRAM512, 1); code != 0 {
		t.Fatalf("handshake: %d", code)
	}
	fc.Advance(2 * time.Second)
	if s.Authenticated() || s.Ended() {
		t.Fatalf("late: authenticated %v (want false), ended %v (want false)", s.Authenticated(), s.Ended())
	}
	s.mech = "" // the client gives up that conversation
	s.reauth = false
	if !s.Ended() {
		t.Fatal("expired login without a re-authentication has not ended")
	}

	// Another user, or another mechanism, may not renew a login.
	s = newSession("10.0.0.2", 10*time.Second, fc.Now)
	if _, at, _ := scramLogin(t, s, a, "alice", "alice-secret"); at != 0 {
		t.Fatal("login")
	}
	if _, at, err := scramLogin(t, s, a, "bob", "bob-secret"); at != 2 || !errors.Is(err, ErrReauthChange) {
		t.Fatalf("re-authentication as bob: step %d: %v", at, err)
	}
	s = newSession("10.0.0.3", 10*time.Second, fc.Now)
	if _, at, _ := scramLogin(t, s, a, "alice", "alice-secret"); at != 0 {
		t.Fatal("login")
	}
	if err := plainLogin(s, a, "alice", "alice-secret"); !errors.Is(err, ErrReauthChange) {
		t.Fatalf("re-authentication with PLAIN: %v", err)
	}

	// Without MaxReauth a login never expires.
	s = newSession("10.0.0.4", 0, fc.Now)
	if _, at, _ := scramLogin(t, s, a, "alice", "alice-secret"); at != 0 {
		t.Fatal("login")
	}
	fc.Advance(1000 * time.Hour)
	if !s.Authenticated() || s.Lifetime() != 0 {
		t.Fatal("a login without MaxReauth expired")
	}
}

// TestFailureLimiterStopsOneAddress: after the limit of failures from one
// address its logins are refused, before any credential is read, while
// another address logs in; a token comes back every minute/limit.
func TestFailureLimiterStopsOneAddress(t *testing.T) {
	m := newMeta(t, "alice")
	fc := clock.NewFake(time.Unix(1000, 0))
	a := NewAuthenticator(AuthOptions{Credentials: m, FailureLimit: 3, Clock: fc})
	for i := range 3 {
		if err := plainLogin(newSession("192.0.2.7", 0, fc.Now), a, "alice", "wrong"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	reads := m.reads.Load()
	if err := plainLogin(newSession("192.0.2.7", 0, fc.Now), a, "alice", "alice-secret"); !errors.Is(err, ErrTooManyFailures) {
		t.Fatalf("after the limit: %v", err)
	}
	if m.reads.Load() != reads {
		t.Fatal("a refused login read credentials")
	}
	if err := plainLogin(newSession("198.51.100.1", 0, fc.Now), a, "alice", "alice-secret"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// An IPv6 client is one /64.
	for range 3 {
		_ = plainLogin(newSession("2001:db8::1", 0, fc.Now), a, "alice", "wrong")
	}
	if err := plainLogin(newSession("2001:db8::2", 0, fc.Now), a, "alice", "alice-secret"); !errors.Is(err, ErrTooManyFailures) {
		t.Fatalf("same /64: %v", err)
	}
	fc.Advance(20 * time.Second) // one token back (3 per minute)
	if err := plainLogin(newSession("192.0.2.7", 0, fc.Now), a, "alice", "alice-secret"); err != nil {
		t.Fatalf("after the cool-off: %v", err)
	}
}

func TestFailureLimiterTableIsBounded(t *testing.T) {
	l := newFailureLimiter(2, clock.NewFake(time.Unix(0, 0)))
	l.size = 100
	for i := range 1000 {
		l.failed(address(i))
	}
	if len(l.m) > l.size {
		t.Fatalf("%d addresses tracked, bound %d", len(l.m), l.size)
	}
}

// address is the i-th address of 10.0.0.0/8.
func address(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// TestCredentialCache: logins within the TTL read the store once;
// invalidation, expiry and re-authentication read it again; unknown users
// are cached too.
func TestCredentialCache(t *testing.T) {
	m := newMeta(t, "alice")
	fc := clock.NewFake(time.Unix(1000, 0))
	a := NewAuthenticator(AuthOptions{Credentials: m, Clock: fc})
	login := func(user string) *Session {
		s := newSession("10.0.0.1", time.Hour, fc.Now)
		scramLogin(t, s, a, user, user+"-secret")
		return s
	}
	s := login("alice")
	login("alice")
	login("nobody")
	login("nobody")
	if n := m.reads.Load(); n != 2 {
		t.Fatalf("%d reads for two logins each of two users, want 2", n)
	}
	if _, at, err := scramLogin(t, s, a, "alice", "alice-secret"); at != 0 || m.reads.Load() != 2 {
		t.Fatalf("re-authentication at once: step %d %v, %d reads (want 2: cached under a second ago)", at, err, m.reads.Load())
	}
	fc.Advance(reauthCredentialAge)
	if _, at, err := scramLogin(t, s, a, "alice", "alice-secret"); at != 0 || m.reads.Load() != 3 {
		t.Fatalf("re-authentication: step %d %v, %d reads (want 3: past the cache)", at, err, m.reads.Load())
	}
	a.creds.invalidate()
	login("alice")
	if n := m.reads.Load(); n != 4 {
		t.Fatalf("%d reads after invalidation, want 4", n)
	}
	fc.Advance(credentialTTL - reauthCredentialAge)
	login("alice")
	if n := m.reads.Load(); n != 4 {
		t.Fatalf("%d reads within the TTL, want 4", n)
	}
	fc.Advance(reauthCredentialAge)
	login("alice")
	if n := m.reads.Load(); n != 5 {
		t.Fatalf("%d reads after the TTL, want 5", n)
	}

	c := newCredentialCache(m, fc)
	c.size = 50
	for i := range 500 {
		_, _ = c.get(context.Background(), address(i), MechSCRAM512, credentialTTL)
	}
	if len(c.m) > c.size {
		t.Fatalf("%d cached, bound %d", len(c.m), c.size)
	}
}

// TestDeletedUserSessionsEnd: CredentialsChanged ends the sessions that
// logged in with a credential now gone (PLAIN ones once the user has no
// credential at all), and a login that raced the change is checked again.
func TestDeletedUserSessionsEnd(t *testing.T) {
	m := newMeta(t, "alice", "bob")
	a := NewAuthenticator(AuthOptions{Credentials: m})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scramSess := newSession("10.0.0.1", 0, time.Now)
	scramLogin(t, scramSess, a, "alice", "alice-secret")
	plainSess := newSession("10.0.0.1", 0, time.Now)
	if err := plainLogin(plainSess, a, "alice", "alice-secret"); err != nil {
		t.Fatal(err)
	}
	bobSess := newSession("10.0.0.1", 0, time.Now)
	scramLogin(t, bobSess, a, "bob", "bob-secret")
	for _, s := range []*Session{scramSess, plainSess, bobSess} {
		a.Track(ctx, s)
	}

	if err := m.DeleteScramCredential(ctx, "alice", metastore.ScramSHA512); err != nil {
		t.Fatal(err)
	}
	if n, err := a.CredentialsChanged(ctx); err != nil || n != 1 {
		t.Fatalf("ended %d sessions (%v), want 1", n, err)
	}
	if !scramSess.Ended() || scramSess.Authenticated() || plainSess.Ended() || bobSess.Ended() {
		t.Fatalf("ended: SCRAM-SHA-512 %v, PLAIN %v, bob %v", scramSess.Ended(), plainSess.Ended(), bobSess.Ended())
	}
	if err := m.DeleteScramCredential(ctx, "alice", metastore.ScramSHA256); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.CredentialsChanged(ctx); n != 1 || !plainSess.Ended() {
		t.Fatalf("ended %d, PLAIN session ended %v", n, plainSess.Ended())
	}

	// A login whose credential was read before a change is checked again
	// when tracked.
	raced := newSession("10.0.0.1", 0, time.Now)
	scramLogin(t, raced, a, "bob", "bob-secret")
	if err := m.DeleteScramCredential(ctx, "bob", metastore.ScramSHA512); err != nil {
		t.Fatal(err)
	}
	a.creds.invalidate()
	a.Track(ctx, raced)
	if !raced.Ended() {
		t.Fatal("a login that raced its credential's deletion survived")
	}

	// Closed connections leave the table.
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.mu.Lock()
		n := len(a.byUser)
		a.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d users still tracked after their connections closed", n)
		}
		time.Sleep(time.Millisecond)
	}
}
