package certissuer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// CA is a certificate authority: an ECDSA P-256 key and its self-signed
// certificate, both PEM. Generation is the deployment setting that made it
// (the caRotation context value).
type CA struct {
	Generation  string `json:"generation"`
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"privateKey"`
}

// Leaf is a certificate signed by a CA, with its key, both PEM.
type Leaf struct {
	Certificate string
	PrivateKey  string
	Serial      string // hex
	NotAfter    time.Time
}

// backdate is how far NotBefore lies before now, for clocks that lag.
const backdate = time.Hour

func newKey() (*ecdsa.PrivateKey, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	return key, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func certPEM(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// NewCA creates a CA named after cluster, valid from now for validity.
func NewCA(cluster, generation string, now time.Time, validity time.Duration) (CA, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return CA{}, fmt.Errorf("ca key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return CA{}, err
	}
	name := cluster + " private CA"
	if generation != "" {
		name += " " + generation
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Strata"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return CA{}, fmt.Errorf("ca certificate: %w", err)
	}
	return CA{Generation: generation, Certificate: certPEM(der), PrivateKey: keyPEM}, nil
}

func parseCert(pemText string) (*x509.Certificate, error) {
	b, _ := pem.Decode([]byte(pemText))
	if b == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// parse decodes the CA's certificate and key.
func (ca CA) parse() (*x509.Certificate, any, error) {
	cert, err := parseCert(ca.Certificate)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: %w", err)
	}
	kb, _ := pem.Decode([]byte(ca.PrivateKey))
	if kb == nil {
		return nil, nil, errors.New("ca: no PEM private key")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("ca key: %w", err)
	}
	return cert, key, nil
}

// IssueServer signs a certificate for names (DNS names, wildcards such as
// *.eu-west-1.compute.internal, or IP addresses), usable by TLS servers
// and, for mutual TLS between brokers, clients. It is valid from now for
// validity, but never past the CA.
func (ca CA) IssueServer(commonName string, names []string, now time.Time, validity time.Duration) (Leaf, error) {
	caCert, caKey, err := ca.parse()
	if err != nil {
		return Leaf{}, err
	}
	if len(names) == 0 {
		return Leaf{}, errors.New("certificate: no names")
	}
	key, keyPEM, err := newKey()
	if err != nil {
		return Leaf{}, fmt.Errorf("certificate key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return Leaf{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"Strata"}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Leaf{}, fmt.Errorf("certificate: %w", err)
	}
	return Leaf{Certificate: certPEM(der), PrivateKey: keyPEM, Serial: hex.EncodeToString(sn.Bytes()), NotAfter: notAfter}, nil
}

// Bundle concatenates the CAs' certificates (the trust bundle clients
// verify the brokers against).
func Bundle(cas []CA) string {
	var b strings.Builder
	for _, ca := range cas {
		b.WriteString(ca.Certificate)
	}
	return b.String()
}

// Fingerprint is a short digest of a PEM bundle, to tell versions apart.
func Fingerprint(pemText string) string {
	sum := sha256.Sum256([]byte(pemText))
	return hex.EncodeToString(sum[:8])
}
