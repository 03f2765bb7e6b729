package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

func credLookup(t testing.TB, mech string, creds ...metastore.ScramCredential) func(string) (metastore.ScramCredential, error) {
	return func(user string) (metastore.ScramCredential, error) {
		for _, c := range creds {
			if c.User == user && c.Mechanism == mech {
				return c, nil
			}
		}
		return metastore.ScramCredential{}, metastore.ErrNotFound
	}
}

// runSCRAM drives our server with xdg-go/scram's client; mangle may
// rewrite the client-final message.
func runSCRAM(t *testing.T, mech, user, pass string, mangle func(final, clientNonce string) string, creds ...metastore.ScramCredential) error {
	hg := scram.SHA256
	if mech == metastore.ScramSHA512 {
		hg = scram.SHA512
	}
	cl, err := hg.NewClient(user, pass, "")
	if err != nil {
		return err
	}
	conv := cl.NewConversation()
	srv := &scramServer{mech: mech, lookup: credLookup(t, mech, creds...), fake: newFakes(nil).credential}
	first, _ := conv.Step("")
	sfirst, _, err := srv.next(first)
	if err != nil {
		return err
	}
	final, err := conv.Step(sfirst)
	if err != nil {
		return err
	}
	if mangle != nil {
		final = mangle(final, strings.TrimPrefix(first[strings.Index(first, "r="):], "r="))
	}
	sfinal, done, err := srv.next(final)
	if err != nil {
		return err
	}
	if !done {
		return errors.New("not done")
	}
	if _, err := conv.Step(sfinal); err != nil {
		return err // the client checks the server signature
	}
	if !conv.Valid() {
		return errors.New("client: server not valid")
	}
	return nil
}

func TestSCRAMServerAgainstXDGClient(t *testing.T) {
	for _, mech := range []string{metastore.ScramSHA256, metastore.ScramSHA512} {
		c, err := metastore.NewScramCredential("al,i=ce", mech, "pencil", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := runSCRAM(t, mech, "al,i=ce", "pencil", nil, c); err != nil {
			t.Fatalf("%s: good password: %v", mech, err)
		}
		if err := runSCRAM(t, mech, "al,i=ce", "pen", nil, c); err == nil {
			t.Fatalf("%s: wrong password accepted", mech)
		}
		if err := runSCRAM(t, mech, "bob", "pencil", nil, c); err == nil {
			t.Fatalf("%s: unknown user accepted", mech)
		}
		// librdkafka < 2.6.1 repeats its nonce: accepted (the proof covers
		// the message as sent).
		if err := librdkafkaStyleSCRAM(mech, "al,i=ce", "al=2Ci=3Dce", "pencil", c); err != nil {
			t.Fatalf("%s: doubled client nonce: %v", mech, err)
		}
		// A nonce the server did not issue is refused.
		if err := runSCRAM(t, mech, "al,i=ce", "pencil", func(final, _ string) string {
			return strings.Replace(final, ",r=", ",r=x", 1)
		}, c); err == nil {
			t.Fatalf("%s: foreign nonce accepted", mech)
		}
	}
}

// FuzzSASL drives a connection's SASL state machine with arbitrary
// handshake and authenticate payloads: no panic, and success only with the
// right password.
func FuzzSASL(f *testing.F) {
	store, err := embedded.Open(filepath.Join(f.TempDir(), "meta.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	meta := metastore.New(store)
	for _, mech := range []string{metastore.ScramSHA256, metastore.ScramSHA512} {
		c, _ := metastore.NewScramCredential("alice", mech, "secret", 4096)
		if err := meta.PutScramCredential(context.Background(), c); err != nil {
			f.Fatal(err)
		}
	}
	f.Add("SCRAM-SHA-512", []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add("SCRAM-SHA-256", []byte("y,a=alice,n=alice,r=x"), []byte("c=eSwsYT1hbGljZSw=,r=x,p="))
	f.Add("PLAIN", []byte("\x00alice\x00secret"), []byte{})
	f.Add("PLAIN", []byte("alice\x00alice\x00wrong"), []byte("\x00\x00"))
	f.Add("GSSAPI", []byte{0xff, 0xfe}, []byte("n=,r=,"))
	auth := NewAuthenticator(AuthOptions{Credentials: meta, FailureLimit: 1 << 30})
	f.Fuzz(func(t *testing.T, mech string, first, second []byte) {
		l := &Listener{Name: "SASL", SASLMechanisms: []string{MechPlain, MechSCRAM256, MechSCRAM512}, AllowPlainWithoutTLS: true}
		s := &Session{listener: l, principal: AnonymousUser, now: time.Now}
		if s.Handshake(mech, 1) != 0 {
			return // unsupported mechanism: closed
		}
		for _, in := range [][]byte{first, second} {
			if _, done, err := s.Step(context.Background(), auth, in); err != nil || done {
				break
			}
		}
		if s.Authenticated() && !(mech == MechPlain && strings.HasSuffix(string(first), "\x00alice\x00secret")) {
			t.Fatalf("authenticated as %s with %s %q %q", s.Principal(), mech, first, second)
		}
	})
}

// librdkafkaStyleSCRAM logs in the way librdkafka before 2.6.1 does: its
// client-final nonce is its own nonce followed by the server's whole nonce.
func librdkafkaStyleSCRAM(mech, user, encodedUser, pass string, c metastore.ScramCredential) error {
	srv := &scramServer{mech: mech, lookup: func(string) (metastore.ScramCredential, error) { return c, nil }, fake: newFakes(nil).credential}
	cnonce := "cnonce-123"
	bare := "n=" + encodedUser + ",r=" + cnonce
	sfirst, _, err := srv.next("n,," + bare)
	if err != nil {
		return err
	}
	snonce := strings.TrimPrefix(strings.Split(sfirst, ",")[0], "r=")
	h, _ := metastore.ScramHash(mech)
	salted, err := pbkdf2.Key(h, pass, c.Salt, int(c.Iterations), h().Size())
	if err != nil {
		return err
	}
	clientKey := scramHMAC(h, salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	withoutProof := "c=biws,r=" + cnonce + snonce
	sig := scramHMAC(h, sum.Sum(nil), bare+","+sfirst+","+withoutProof)
	for i := range sig {
		sig[i] ^= clientKey[i]
	}
	_, done, err := srv.next(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig))
	if err == nil && !done {
		err = errors.New("not done")
	}
	return err
}

// TestReloadingCertificate: a renewed certificate written over the same
// files is served without a restart.
func TestReloadingCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	writePair := func(cn string) {
		c, k := selfSigned(t, cn)
		if err := os.WriteFile(keyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, c, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	subject := func(rc *ReloadingCertificate) string {
		c, err := rc.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.Subject.CommonName
	}
	writePair("first")
	rc, err := NewReloadingCertificate(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := subject(rc); got != "first" {
		t.Fatalf("serving %q", got)
	}
	time.Sleep(10 * time.Millisecond) // a different mtime
	writePair("second-name")
	deadline := time.Now().Add(5 * time.Second)
	for subject(rc) != "second-name" {
		if time.Now().After(deadline) {
			t.Fatal("renewed certificate not picked up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A broken renewal keeps the last good pair.
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := subject(rc); got != "second-name" {
		t.Fatalf("serving %q after a broken renewal", got)
	}
}

func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
