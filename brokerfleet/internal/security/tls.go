package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// ReloadingCertificate serves the certificate and key in two PEM files,
// re-reading them when either file's modification time or size changes
// (checked at most once a second), so a renewed certificate is picked up
// without a restart.
type ReloadingCertificate struct {
	certFile, keyFile string

	mu      sync.Mutex
	checked time.Time
	stamp   [4]int64
	cert    *tls.Certificate
}

// NewReloadingCertificate loads the pair once, failing on a bad pair.
func NewReloadingCertificate(certFile, keyFile string) (*ReloadingCertificate, error) {
	r := &ReloadingCertificate{certFile: certFile, keyFile: keyFile}
	if _, err := r.load(true); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *ReloadingCertificate) load(force bool) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !force && r.cert != nil && now.Sub(r.checked) < time.Second {
		return r.cert, nil
	}
	r.checked = now
	var stamp [4]int64
	for i, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			if r.cert != nil {
				return r.cert, nil // keep serving the last good pair
			}
			return nil, fmt.Errorf("tls certificate: %w", err)
		}
		stamp[2*i], stamp[2*i+1] = st.ModTime().UnixNano(), st.Size()
	}
	if r.cert != nil && stamp == r.stamp {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil // a half-written renewal: retry next time
		}
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	r.cert, r.stamp = &cert, stamp
	return r.cert, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *ReloadingCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.load(false)
}

// ServerTLS builds a listener's TLS config from PEM files: the
// certificate chain and key (reloaded on change) and, when clientCAFile is
// set, the CAs client certificates must chain to (mutual TLS).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	rc, err := NewReloadingCertificate(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: rc.GetCertificate}
	if clientCAFile != "" {
		pool, err := loadCAs(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLS builds the TLS config brokers use towards each other: the CAs
// to trust (empty: the system's) and, for mutual TLS, a client
// certificate.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadCAs(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		rc, err := NewReloadingCertificate(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return rc.load(false) }
	}
	return cfg, nil
}

func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls ca: no certificates in %s", file)
	}
	return pool, nil
}
