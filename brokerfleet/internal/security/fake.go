package security

// Fake credentials for users that have none, so that SASL does not tell
// who exists. A SCRAM server that refuses an unknown user at the
// client-first message, as Kafka's does, lets anyone list user names; ours
// answers an unknown name with a server-first message built from a fake
// credential and fails at the client-final message with the error a wrong
// password gets. The fake is a pure function of a key and the name, so
// asking twice gives the same salt and iteration count, as for a real
// user. The key is cluster-wide when the broker could load it from the
// metastore (every broker then answers alike), else random per process.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/stratamq/strata/pkg/metastore"
)

// ErrBadCredentials is returned by Session.Step when a user name and
// password (or SCRAM proof) do not match a stored credential, whether the
// user exists or not.
var ErrBadCredentials = errors.New("sasl: invalid user name or password")

// badCredentials is the failure of a login with a wrong password or an
// unknown user; the two differ only in the text for the broker's log.
func badCredentials(user string, unknown bool) error {
	if unknown {
		return fmt.Errorf("%w (user %q has no credential)", ErrBadCredentials, user)
	}
	return fmt.Errorf("%w (user %q: wrong password)", ErrBadCredentials, user)
}

// fakeSaltLen is the length of a fake salt: what metastore.NewScramCredential
// (and so -sasl-admin and brokerfleet users) uses.
const fakeSaltLen = 32

// fakeIterations are the iteration counts fakes choose from: Kafka's
// tooling's default and ours.
var fakeIterations = [2]int32{4096, 8192}

// fakes derives fake credentials.
type fakes struct{ key []byte }

// newFakes returns fakes under key, or under a random key when key is
// empty.
func newFakes(key []byte) fakes {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return fakes{key: key}
}

func (f fakes) derive(label, user, mech string, n int) []byte {
	var out []byte
	for i := byte(0); len(out) < n; i++ {
		m := hmac.New(sha256.New, f.key)
		m.Write([]byte{i})
		m.Write([]byte(label + "\x00" + mech + "\x00" + user))
		out = m.Sum(out)
	}
	return out[:n]
}

// credential returns user's fake credential for mech: a salt and an
// iteration count that stay the same for the name, and keys no password
// matches.
func (f fakes) credential(user, mech string) metastore.ScramCredential {
	size := sha256.Size
	if h, ok := metastore.ScramHash(mech); ok {
		size = h().Size()
	}
	return metastore.ScramCredential{
		User: user, Mechanism: mech,
		Salt:       f.derive("salt", user, mech, fakeSaltLen),
		Iterations: fakeIterations[f.derive("iterations", user, mech, 1)[0]&1],
		StoredKey:  f.derive("stored-key", user, mech, size),
		ServerKey:  f.derive("server-key", user, mech, size),
	}
}
