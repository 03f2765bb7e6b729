package metastore

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strings"
)

// pkUsers holds SASL/SCRAM credentials; sk is the path-escaped user name,
// "/", then the mechanism, so one user's mechanisms are one prefix query.
const pkUsers = "users"

// SCRAM mechanisms (RFC 5802, RFC 7677), by their SASL names.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// MinScramIterations and MaxScramIterations bound the PBKDF2 iterations
// of a stored credential (Kafka's bounds: 4096 to 16384).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ErrBadCredential is returned when a SCRAM credential's mechanism,
// iterations or user name is not acceptable.
var ErrBadCredential = errors.New("metastore: bad scram credential")

// ScramCredential is what is kept for one user and mechanism: the salt, the
// iteration count and the two keys derived from the salted password
// (RFC 5802 section 3). The password itself is never stored; the keys let
// the broker check a SCRAM proof (and a PLAIN password) but not log in.
type ScramCredential struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	Iterations int32  `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// ScramHash returns the hash of a SCRAM mechanism, or false.
func ScramHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, true
	case ScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// NewScramCredential derives a credential from a password with a fresh
// random salt.
func NewScramCredential(user, mechanism, password string, iterations int32) (ScramCredential, error) {
	h, ok := ScramHash(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("%w: unknown mechanism %q", ErrBadCredential, mechanism)
	}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	salted, err := pbkdf2.Key(h, password, salt, int(iterations), h().Size())
	if err != nil {
		return ScramCredential{}, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	return ScramCredentialFromSalted(user, mechanism, salt, iterations, salted)
}

// ScramCredentialFromSalted derives the stored keys from a salted password
// (what AlterUserScramCredentials carries: clients salt the password).
func ScramCredentialFromSalted(user, mechanism string, salt []byte, iterations int32, salted []byte) (ScramCredential, error) {
	h, ok := ScramHash(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("%w: unknown mechanism %q", ErrBadCredential, mechanism)
	}
	if err := checkScramUser(user); err != nil {
		return ScramCredential{}, err
	}
	if iterations < MinScramIterations || iterations > MaxScramIterations {
		return ScramCredential{}, fmt.Errorf("%w: %d iterations; want %d to %d", ErrBadCredential, iterations, MinScramIterations, MaxScramIterations)
	}
	if len(salt) == 0 || len(salted) == 0 {
		return ScramCredential{}, fmt.Errorf("%w: empty salt or salted password", ErrBadCredential)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return ScramCredential{
		User: user, Mechanism: mechanism, Salt: salt, Iterations: iterations,
		StoredKey: sum.Sum(nil), ServerKey: mac(salted, "Server Key"),
	}, nil
}

// CheckPassword reports whether password matches the credential (used to
// check SASL/PLAIN logins against SCRAM credentials).
func (c ScramCredential) CheckPassword(password string) bool {
	h, ok := ScramHash(c.Mechanism)
	if !ok {
		return false
	}
	salted, err := pbkdf2.Key(h, password, c.Salt, int(c.Iterations), h().Size())
	if err != nil {
		return false
	}
	got, err := ScramCredentialFromSalted(c.User, c.Mechanism, c.Salt, c.Iterations, salted)
	return err == nil && hmac.Equal(got.StoredKey, c.StoredKey)
}

func checkScramUser(user string) error {
	if user == "" || len(user) > 256 || strings.ContainsRune(user, 0) {
		return fmt.Errorf("%w: user name %q must be 1 to 256 bytes without NUL", ErrBadCredential, user)
	}
	return nil
}

func userKey(user, mechanism string) Key {
	return Key{PK: pkUsers, SK: url.PathEscape(user) + "/" + mechanism}
}

// PutScramCredential stores (or replaces) a user's credential for one
// mechanism, and moves the change counter (brokers drop their cached
// credentials).
func (m *Meta) PutScramCredential(ctx context.Context, c ScramCredential) error {
	if _, ok := ScramHash(c.Mechanism); !ok {
		return fmt.Errorf("%w: unknown mechanism %q", ErrBadCredential, c.Mechanism)
	}
	if err := checkScramUser(c.User); err != nil {
		return err
	}
	if _, err := m.s.Put(ctx, Item{Key: userKey(c.User, c.Mechanism), Value: encodeJSON(c)}, Always); err != nil {
		return fmt.Errorf("metastore: put credential of %s: %w", c.User, err)
	}
	return m.bump(ctx)
}

// ScramCredential returns a user's credential for a mechanism, or
// ErrNotFound.
func (m *Meta) ScramCredential(ctx context.Context, user, mechanism string) (ScramCredential, error) {
	var c ScramCredential
	if checkScramUser(user) != nil {
		return c, ErrNotFound
	}
	it, err := m.s.Get(ctx, userKey(user, mechanism))
	if err != nil {
		return c, fmt.Errorf("metastore: credential of %s: %w", user, err)
	}
	return c, decodeJSON(it, &c)
}

// DeleteScramCredential removes a user's credential for a mechanism, and
// moves the change counter (brokers end the sessions that logged in with
// it); it returns ErrNotFound when there was none.
func (m *Meta) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	if checkScramUser(user) != nil {
		return ErrNotFound
	}
	if err := m.s.Delete(ctx, userKey(user, mechanism), IfExists()); err != nil {
		if errors.Is(err, ErrConditionFailed) {
			err = ErrNotFound
		}
		return fmt.Errorf("metastore: delete credential of %s: %w", user, err)
	}
	return m.bump(ctx)
}

// ScramCredentials lists the credentials of user, or of every user when
// user is empty, by user then mechanism.
func (m *Meta) ScramCredentials(ctx context.Context, user string) ([]ScramCredential, error) {
	prefix := ""
	if user != "" {
		prefix = url.PathEscape(user) + "/"
	}
	items, err := m.s.Query(ctx, pkUsers, prefix)
	if err != nil {
		return nil, fmt.Errorf("metastore: list credentials: %w", err)
	}
	out := make([]ScramCredential, 0, len(items))
	for _, it := range items {
		var c ScramCredential
		if err := decodeJSON(it, &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
