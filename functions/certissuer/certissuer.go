// Package certissuer is the private certificate authority of a Strata
// deployment: a CloudFormation custom resource, run as a Lambda function
// (cmd/, built to functions/certissuer/bootstrap by `make lambdas`), that
// creates a CA and the brokers' TLS certificate at deploy time and keeps
// them in three AWS Secrets Manager secrets the stack made beforehand:
//
//	CAKeySecret  {"cas":[{"generation","certificate","privateKey"}...]}: the CA keys; only this function reads it
//	CASecret     {"certificate": PEM}: the CAs clients trust, in the shape AWS Lambda's
//	             Kafka event source reads (SERVER_ROOT_CA_CERTIFICATE); public, not secret
//	TLSSecret    {"certificate","privateKey","caCertificate"}: the brokers' certificate and
//	             key, and the CAs they verify each other with
//
// Rotation takes deployments, never a restart by hand:
//
//   - CertGeneration changed (or the names, the validity, the cluster): a
//     new broker certificate and key, signed by the newest CA that existed
//     before this deployment. The stack puts the serial on the task
//     definition, so ECS replaces the brokers one at a time.
//   - CAGeneration changed: a new CA joins the trust bundle (the newest two
//     are kept) but signs nothing yet, so clients that still hold the old
//     bundle keep working. The next CertGeneration change has the broker
//     certificate signed by it.
//
// Delete leaves the secrets to the stack.
package certissuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// CASecret is the shape of the CA secret: AWS Lambda's
// SERVER_ROOT_CA_CERTIFICATE secret, the root CA in PEM under
// "certificate".
type CASecret struct {
	Certificate string `json:"certificate"`
}

// TLSSecret is the shape of the brokers' TLS secret.
type TLSSecret struct {
	Certificate   string `json:"certificate"`   // the broker certificate, PEM
	PrivateKey    string `json:"privateKey"`    // its key, PKCS #8 PEM
	CACertificate string `json:"caCertificate"` // the trust bundle, PEM
}

// KeySecret is the shape of the CA key secret: the CAs, oldest first.
type KeySecret struct {
	CAs []CA `json:"cas"`
}

// keepCAs is how many CAs the trust bundle holds: the newest and the one
// before it, so a rotation never strands a client holding either.
const keepCAs = 2

// Props are the custom resource's properties (CloudFormation passes them
// as strings).
type Props struct {
	Cluster          string   // names the CA and the certificate
	CAKeySecret      string   // ARN of the KeySecret
	CASecret         string   // ARN of the CASecret
	TLSSecret        string   // ARN of the TLSSecret
	DNSNames         []string // the broker certificate's names
	CAGeneration     string   // change it to add a new CA
	CertGeneration   string   // change it to issue a new broker certificate
	CAValidityDays   int
	CertValidityDays int
}

// ParseProps reads the properties of a custom resource event.
func ParseProps(m map[string]any) (Props, error) {
	var p Props
	str := func(key string) string {
		s, _ := m[key].(string)
		return s
	}
	days := func(key string, def int) (int, error) {
		s := str(key)
		if s == "" {
			return def, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("property %s: want a number of days, got %q", key, s)
		}
		return n, nil
	}
	p.Cluster, p.CAKeySecret, p.CASecret, p.TLSSecret = str("Cluster"), str("CAKeySecret"), str("CASecret"), str("TLSSecret")
	p.CAGeneration, p.CertGeneration = str("CAGeneration"), str("CertGeneration")
	switch names := m["DNSNames"].(type) {
	case []any:
		for _, n := range names {
			if s, ok := n.(string); ok && s != "" {
				p.DNSNames = append(p.DNSNames, s)
			}
		}
	case []string:
		p.DNSNames = names
	}
	var err error
	if p.CAValidityDays, err = days("CAValidityDays", 3650); err != nil {
		return p, err
	}
	if p.CertValidityDays, err = days("CertValidityDays", 730); err != nil {
		return p, err
	}
	switch {
	case p.Cluster == "":
		return p, errors.New("property Cluster is empty")
	case p.CAKeySecret == "" || p.CASecret == "" || p.TLSSecret == "":
		return p, errors.New("properties CAKeySecret, CASecret and TLSSecret are required")
	case len(p.DNSNames) == 0:
		return p, errors.New("property DNSNames is empty")
	}
	return p, nil
}

// Store is the part of the Secrets Manager API the issuer uses
// (*secretsmanager.Client).
type Store interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
}

// Issuer handles the custom resource's events.
type Issuer struct {
	Store Store
	Now   func() time.Time // time.Now when nil
}

// PhysicalID names the resource (it never changes, so CloudFormation never
// replaces it).
const PhysicalID = "strata-pki"

// Handle creates or updates the CA and the certificate; its data are the
// resource's attributes: CertificateSerial, CertificateNotAfter (RFC
// 3339) and TrustFingerprint (a digest of the trust bundle). It has the
// signature of cfn.CustomResourceFunction (cmd/ wraps it with
// cfn.LambdaWrap).
func (is *Issuer) Handle(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
	if ev.RequestType == cfn.RequestDelete {
		return ev.PhysicalResourceID, nil, nil
	}
	p, err := ParseProps(ev.ResourceProperties)
	if err != nil {
		return "", nil, err
	}
	now := time.Now
	if is.Now != nil {
		now = is.Now
	}
	var old Props
	if ev.RequestType == cfn.RequestUpdate {
		if old, err = ParseProps(ev.OldResourceProperties); err != nil {
			return "", nil, fmt.Errorf("old properties: %w", err)
		}
	}
	res, err := is.apply(ctx, ev.RequestType == cfn.RequestCreate, old, p, now())
	if err != nil {
		return "", nil, err
	}
	return PhysicalID, map[string]any{
		"CertificateSerial":   res.serial,
		"CertificateNotAfter": res.notAfter.UTC().Format(time.RFC3339),
		"TrustFingerprint":    Fingerprint(res.trust),
	}, nil
}

type applied struct {
	serial   string
	notAfter time.Time
	trust    string
}

func (is *Issuer) apply(ctx context.Context, create bool, old, p Props, now time.Time) (applied, error) {
	var keys KeySecret
	if !create {
		if err := is.get(ctx, p.CAKeySecret, &keys); err != nil {
			return applied{}, err
		}
		if len(keys.CAs) == 0 {
			return applied{}, errors.New("the CA key secret holds no CA")
		}
	}
	// The signer is chosen before a new CA is added: a CA signs only from
	// the deployment after the one that made it.
	var signer CA
	if len(keys.CAs) > 0 {
		signer = keys.CAs[len(keys.CAs)-1]
	}
	if create || p.CAGeneration != old.CAGeneration {
		ca, err := NewCA(p.Cluster, p.CAGeneration, now, days(p.CAValidityDays))
		if err != nil {
			return applied{}, err
		}
		keys.CAs = append(keys.CAs, ca)
		if len(keys.CAs) > keepCAs {
			keys.CAs = keys.CAs[len(keys.CAs)-keepCAs:]
		}
		if create {
			signer = ca
		}
		if err := is.put(ctx, p.CAKeySecret, keys); err != nil {
			return applied{}, err
		}
	}
	trust := Bundle(keys.CAs)
	if err := is.put(ctx, p.CASecret, CASecret{Certificate: trust}); err != nil {
		return applied{}, err
	}
	reissue := create || p.CertGeneration != old.CertGeneration || !slices.Equal(p.DNSNames, old.DNSNames) ||
		p.CertValidityDays != old.CertValidityDays || p.Cluster != old.Cluster
	var tlsSecret TLSSecret
	var res applied
	if reissue {
		leaf, err := signer.IssueServer(p.Cluster+" brokers", p.DNSNames, now, days(p.CertValidityDays))
		if err != nil {
			return applied{}, err
		}
		tlsSecret = TLSSecret{Certificate: leaf.Certificate, PrivateKey: leaf.PrivateKey}
		res = applied{serial: leaf.Serial, notAfter: leaf.NotAfter}
	} else {
		if err := is.get(ctx, p.TLSSecret, &tlsSecret); err != nil {
			return applied{}, err
		}
		cert, err := parseCert(tlsSecret.Certificate)
		if err != nil {
			return applied{}, fmt.Errorf("the TLS secret: %w", err)
		}
		res = applied{serial: fmt.Sprintf("%x", cert.SerialNumber.Bytes()), notAfter: cert.NotAfter}
	}
	tlsSecret.CACertificate = trust
	if err := is.put(ctx, p.TLSSecret, tlsSecret); err != nil {
		return applied{}, err
	}
	res.trust = trust
	return res, nil
}

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

func (is *Issuer) get(ctx context.Context, arn string, v any) error {
	out, err := is.Store.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		return fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil || json.Unmarshal([]byte(*out.SecretString), v) != nil {
		return fmt.Errorf("secret %s does not hold the JSON the issuer wrote", arn)
	}
	return nil
}

func (is *Issuer) put(ctx context.Context, arn string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s := string(b)
	if _, err := is.Store.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: &arn, SecretString: &s}); err != nil {
		return fmt.Errorf("write secret %s: %w", arn, err)
	}
	return nil
}
