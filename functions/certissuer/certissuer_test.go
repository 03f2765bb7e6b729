package certissuer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// memStore is Secrets Manager in a map.
type memStore struct {
	secrets map[string]string
	puts    int
}

func (m *memStore) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v, ok := m.secrets[*in.SecretId]
	if !ok {
		return nil, errors.New("ResourceNotFoundException")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: &v}, nil
}

func (m *memStore) PutSecretValue(_ context.Context, in *secretsmanager.PutSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	m.secrets[*in.SecretId] = *in.SecretString
	m.puts++
	return &secretsmanager.PutSecretValueOutput{}, nil
}

func pool(t *testing.T, pemText string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM([]byte(pemText)) {
		t.Fatalf("no certificates in %q", pemText)
	}
	return p
}

func verify(t *testing.T, certPEM, trust, name string) error {
	t.Helper()
	cert, err := parseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool(t, trust), DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

func TestIssueServer(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("strata", "1", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServer("strata brokers", []string{"brokers.strata.internal", "*.eu-west-1.compute.internal", "127.0.0.1"}, now, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"brokers.strata.internal", "ip-10-0-1-2.eu-west-1.compute.internal", "127.0.0.1"} {
		if err := verify(t, leaf.Certificate, ca.Certificate, name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"evil.example.com", "a.ip-10-0-1-2.eu-west-1.compute.internal", "ip-10-0-1-2.us-east-1.compute.internal"} {
		if verify(t, leaf.Certificate, ca.Certificate, name) == nil {
			t.Errorf("%s verified", name)
		}
	}
	if !leaf.NotAfter.Equal(now.Add(24 * time.Hour).Truncate(time.Second)) {
		t.Errorf("the leaf outlives the CA: %v", leaf.NotAfter)
	}
	if _, err := tls.X509KeyPair([]byte(leaf.Certificate), []byte(leaf.PrivateKey)); err != nil {
		t.Errorf("key pair: %v", err)
	}
	other, _ := NewCA("strata", "2", now, time.Hour)
	if verify(t, leaf.Certificate, other.Certificate, "brokers.strata.internal") == nil {
		t.Error("verified against another CA")
	}
}

func event(typ cfn.RequestType, props, old map[string]any) cfn.Event {
	return cfn.Event{RequestType: typ, PhysicalResourceID: PhysicalID, ResourceProperties: props, OldResourceProperties: old}
}

// state reads the three secrets back.
func state(t *testing.T, m *memStore) (KeySecret, CASecret, TLSSecret) {
	t.Helper()
	var k KeySecret
	var c CASecret
	var s TLSSecret
	for arn, v := range map[string]any{"arn:key": &k, "arn:ca": &c, "arn:tls": &s} {
		if err := json.Unmarshal([]byte(m.secrets[arn]), v); err != nil {
			t.Fatalf("%s: %v", arn, err)
		}
	}
	return k, c, s
}

// TestLifecycle creates the PKI, then rotates the certificate and the CA
// in the two steps the package documents, checking after each deployment
// that the brokers' certificate verifies against the published bundle.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	m := &memStore{secrets: map[string]string{"arn:key": "placeholder", "arn:ca": "placeholder", "arn:tls": "placeholder"}}
	is := &Issuer{Store: m}
	props := map[string]any{
		"ServiceToken": "arn:aws:lambda:...", "Cluster": "strata",
		"CAKeySecret": "arn:key", "CASecret": "arn:ca", "TLSSecret": "arn:tls",
		"DNSNames":     []any{"brokers.strata.internal", "*.eu-west-1.compute.internal"},
		"CAGeneration": "1", "CertGeneration": "1", "CertValidityDays": "30",
	}
	deploy := func(typ cfn.RequestType, change map[string]any) map[string]any {
		t.Helper()
		next := maps.Clone(props)
		maps.Copy(next, change)
		id, data, err := is.Handle(ctx, event(typ, next, props))
		if err != nil {
			t.Fatalf("%s %v: %v", typ, change, err)
		}
		if id != PhysicalID {
			t.Fatalf("physical id %q", id)
		}
		props = next
		_, ca, tlsSecret := state(t, m)
		if err := verify(t, tlsSecret.Certificate, ca.Certificate, "ip-10-0-9-9.eu-west-1.compute.internal"); err != nil {
			t.Fatalf("after %s %v: the certificate does not verify against the published CA: %v", typ, change, err)
		}
		if tlsSecret.CACertificate != ca.Certificate {
			t.Fatal("the brokers trust another bundle than the clients")
		}
		if data["TrustFingerprint"] != Fingerprint(ca.Certificate) {
			t.Fatalf("fingerprint %v", data["TrustFingerprint"])
		}
		return data
	}

	created := deploy(cfn.RequestCreate, nil)
	keys, ca, first := state(t, m)
	if len(keys.CAs) != 1 {
		t.Fatalf("%d CAs", len(keys.CAs))
	}
	// The CA secret has exactly the event source mapping's shape.
	var shape map[string]any
	if err := json.Unmarshal([]byte(m.secrets["arn:ca"]), &shape); err != nil || !slices.Equal(slices.Collect(maps.Keys(shape)), []string{"certificate"}) {
		t.Fatalf("CA secret %s", m.secrets["arn:ca"])
	}
	if ca.Certificate != keys.CAs[0].Certificate {
		t.Fatal("published CA is not the stored one")
	}
	notAfter, _ := time.Parse(time.RFC3339, created["CertificateNotAfter"].(string))
	if d := time.Until(notAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Errorf("certificate valid for %v, want 30 days", d)
	}

	// An update that changes nothing keeps the certificate.
	if data := deploy(cfn.RequestUpdate, nil); data["CertificateSerial"] != created["CertificateSerial"] {
		t.Fatal("an unchanged update reissued the certificate")
	}
	// A new certificate generation: new serial and key, same CA.
	renewed := deploy(cfn.RequestUpdate, map[string]any{"CertGeneration": "2"})
	_, _, second := state(t, m)
	if renewed["CertificateSerial"] == created["CertificateSerial"] || second.PrivateKey == first.PrivateKey {
		t.Fatal("not reissued")
	}
	// Step 1 of a CA rotation: the new CA is trusted but signs nothing.
	deploy(cfn.RequestUpdate, map[string]any{"CAGeneration": "2"})
	keys, ca, third := state(t, m)
	if len(keys.CAs) != 2 || third.Certificate != second.Certificate {
		t.Fatalf("step 1: %d CAs, certificate changed: %v", len(keys.CAs), third.Certificate != second.Certificate)
	}
	if err := verify(t, third.Certificate, keys.CAs[0].Certificate, "brokers.strata.internal"); err != nil {
		t.Fatalf("step 1: a client holding only the old CA fails: %v", err)
	}
	// Step 2: the next certificate is signed by the new CA.
	deploy(cfn.RequestUpdate, map[string]any{"CertGeneration": "3"})
	keys, _, fourth := state(t, m)
	if err := verify(t, fourth.Certificate, keys.CAs[1].Certificate, "brokers.strata.internal"); err != nil {
		t.Fatalf("step 2: not signed by the new CA: %v", err)
	}
	if verify(t, fourth.Certificate, keys.CAs[0].Certificate, "brokers.strata.internal") == nil {
		t.Fatal("step 2: still signed by the old CA")
	}
	// A third CA pushes the first out of the bundle.
	oldest := keys.CAs[0].Certificate
	deploy(cfn.RequestUpdate, map[string]any{"CAGeneration": "3"})
	keys, ca, _ = state(t, m)
	if len(keys.CAs) != keepCAs || keys.CAs[0].Certificate == oldest || keys.CAs[1].Generation != "3" {
		t.Fatalf("CAs after a third: %d, oldest kept %v", len(keys.CAs), keys.CAs[0].Certificate == oldest)
	}
	// Changing the names reissues.
	deploy(cfn.RequestUpdate, map[string]any{"DNSNames": []any{"brokers.strata.internal", "*.eu-west-1.compute.internal", "kafka.example.com"}})
	_, _, fifth := state(t, m)
	if err := verify(t, fifth.Certificate, ca.Certificate, "kafka.example.com"); err != nil {
		t.Fatal(err)
	}

	puts := m.puts
	if _, _, err := is.Handle(ctx, event(cfn.RequestDelete, props, nil)); err != nil || m.puts != puts {
		t.Fatalf("delete: %v, %d writes", err, m.puts-puts)
	}
	// An update over a broken key secret fails instead of minting a new CA.
	m.secrets["arn:key"] = "{}"
	if _, _, err := is.Handle(ctx, event(cfn.RequestUpdate, props, props)); err == nil {
		t.Fatal("update over an empty key secret succeeded")
	}
}

func TestParseProps(t *testing.T) {
	good := map[string]any{"Cluster": "c", "CAKeySecret": "a", "CASecret": "b", "TLSSecret": "c", "DNSNames": []any{"x"}}
	p, err := ParseProps(good)
	if err != nil || p.CAValidityDays != 3650 || p.CertValidityDays != 730 {
		t.Fatalf("%+v %v", p, err)
	}
	for _, change := range []map[string]any{
		{"Cluster": ""}, {"TLSSecret": ""}, {"DNSNames": []any{}}, {"CertValidityDays": "0"}, {"CAValidityDays": "x"},
	} {
		bad := maps.Clone(good)
		maps.Copy(bad, change)
		if _, err := ParseProps(bad); err == nil {
			t.Errorf("%v accepted", change)
		}
	}
}
