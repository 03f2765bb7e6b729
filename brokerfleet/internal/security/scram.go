package security

// The server side of SCRAM (RFC 5802, RFC 7677) for SASL/SCRAM-SHA-256
// and -512. It is ours rather than xdg-go/scram's server because librdkafka
// before 2.6.1 (kcat 1.7 among its users) sends its own nonce twice in the
// client-final message (librdkafka#4895); like Kafka 3.8.1 we accept that
// form, which still carries the whole server nonce, and nothing else.
// xdg-go/scram remains the client (inter-broker) and this code's test
// oracle.

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

var errSCRAM = errors.New("scram")

// scramServer is one server conversation. A user without a credential
// for the mechanism gets fake's credential instead, so that the
// conversation looks the same as a real user's and fails at the
// client-final message exactly as a wrong password does.
type scramServer struct {
	mech   string
	lookup func(user string) (metastore.ScramCredential, error)
	fake   func(user, mech string) metastore.ScramCredential

	step        int
	user        string
	gs2         string // gs2 header, as echoed in c=
	clientNonce string
	nonce       string // client nonce + server nonce
	firstBare   string // client-first-message-bare
	serverFirst string
	cred        metastore.ScramCredential
	unknown     bool // cred is fake: the user has no credential
}

// scramFields splits a message into its attributes.
func scramFields(msg string) []string { return strings.Split(msg, ",") }

// scramAttr returns the value of attribute f when it is key.
func scramAttr(f, key string) (string, bool) {
	if len(f) < 2 || f[1] != '=' || f[0] != key[0] {
		return "", false
	}
	return f[2:], true
}

// decodeSaslName undoes RFC 5802's =2C and =3D escapes.
func decodeSaslName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in name", errSCRAM)
		}
		i += 2
	}
	return b.String(), nil
}

// next processes one client message and returns the server's reply and
// whether authentication succeeded (after the final message).
func (s *scramServer) next(in string) (out string, done bool, err error) {
	switch s.step {
	case 0:
		s.step = 1
		return s.first(in)
	case 1:
		s.step = 2
		return s.final(in)
	}
	return "", false, fmt.Errorf("%w: conversation already finished", errSCRAM)
}

func (s *scramServer) first(in string) (string, bool, error) {
	// gs2-header: cbind flag "n" or "y" (no channel binding), then an
	// optional authzid "a=...", then the bare message.
	f := strings.SplitN(in, ",", 3)
	if len(f) != 3 || (f[0] != "n" && f[0] != "y") {
		return "", false, fmt.Errorf("%w: unsupported gs2 header", errSCRAM)
	}
	authz := ""
	if f[1] != "" {
		a, ok := scramAttr(f[1], "a")
		if !ok {
			return "", false, fmt.Errorf("%w: bad authzid", errSCRAM)
		}
		var err error
		if authz, err = decodeSaslName(a); err != nil {
			return "", false, err
		}
	}
	s.gs2 = f[0] + "," + f[1] + ","
	s.firstBare = f[2]
	bare := scramFields(f[2])
	if len(bare) < 2 {
		return "", false, fmt.Errorf("%w: short client-first message", errSCRAM)
	}
	n, ok1 := scramAttr(bare[0], "n")
	r, ok2 := scramAttr(bare[1], "r")
	if !ok1 || !ok2 || r == "" || len(bare) > 2 { // no extensions (Kafka's tokenauth) served
		return "", false, fmt.Errorf("%w: bad client-first message", errSCRAM)
	}
	user, err := decodeSaslName(n)
	if err != nil {
		return "", false, err
	}
	if authz != "" && authz != user {
		return "", false, fmt.Errorf("%w: user %q may not act as %q", errSCRAM, user, authz)
	}
	s.cred, err = s.lookup(user)
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		s.cred, s.unknown = s.fake(user, s.mech), true
	case err != nil: // the store failed: not the user's fault, nothing to hide
		return "", false, fmt.Errorf("%w: user %q: %w", errSCRAM, user, err)
	case s.cred.Mechanism != s.mech:
		s.cred, s.unknown = s.fake(user, s.mech), true
	}
	var nb [24]byte
	_, _ = rand.Read(nb[:])
	s.user, s.clientNonce = user, r
	s.nonce = r + base64.RawURLEncoding.EncodeToString(nb[:])
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(int(s.cred.Iterations))
	return s.serverFirst, false, nil
}

func (s *scramServer) final(in string) (string, bool, error) {
	proofAt := strings.LastIndex(in, ",p=")
	if proofAt < 0 {
		return "", false, fmt.Errorf("%w: no proof", errSCRAM)
	}
	withoutProof := in[:proofAt]
	proof, err := base64.StdEncoding.DecodeString(in[proofAt+3:])
	if err != nil {
		return "", false, fmt.Errorf("%w: bad proof encoding", errSCRAM)
	}
	f := scramFields(withoutProof)
	if len(f) != 2 {
		return "", false, fmt.Errorf("%w: bad client-final message", errSCRAM)
	}
	c, ok1 := scramAttr(f[0], "c")
	r, ok2 := scramAttr(f[1], "r")
	if !ok1 || !ok2 {
		return "", false, fmt.Errorf("%w: bad client-final message", errSCRAM)
	}
	if cb, err := base64.StdEncoding.DecodeString(c); err != nil || string(cb) != s.gs2 {
		return "", false, fmt.Errorf("%w: channel binding mismatch", errSCRAM)
	}
	if r != s.nonce && r != s.clientNonce+s.nonce { // the second: librdkafka < 2.6.1
		return "", false, fmt.Errorf("%w: nonce mismatch", errSCRAM)
	}
	h, _ := metastore.ScramHash(s.cred.Mechanism)
	authMsg := s.firstBare + "," + s.serverFirst + "," + withoutProof
	sig := scramHMAC(h, s.cred.StoredKey, authMsg)
	if len(proof) != len(sig) {
		return "", false, fmt.Errorf("%w: bad proof length", errSCRAM)
	}
	clientKey := make([]byte, len(sig))
	for i := range sig {
		clientKey[i] = proof[i] ^ sig[i]
	}
	sum := h()
	sum.Write(clientKey)
	if !hmac.Equal(sum.Sum(nil), s.cred.StoredKey) || s.unknown {
		return "", false, badCredentials(s.user, s.unknown)
	}
	return "v=" + base64.StdEncoding.EncodeToString(scramHMAC(h, s.cred.ServerKey, authMsg)), true, nil
}

func scramHMAC(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
