package kafkaauth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/functions/certissuer"
)

type mapSecrets map[string]string

func (m mapSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v, ok := m[*in.SecretId]
	if !ok {
		return nil, errors.New("ResourceNotFoundException")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: &v}, nil
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	s, err := FromEnv(env(nil))
	if err != nil || s.TLS || s.NeedsSecrets() {
		t.Fatalf("empty environment: %+v %v", s, err)
	}
	s, err = FromEnv(env(map[string]string{"STRATA_TLS_CA_SECRET_ARN": "arn:ca", "STRATA_SASL_SECRET_ARN": "arn:u"}))
	if err != nil || !s.TLS || s.Mechanism != SCRAMSHA512 || s.CASecretARN != "arn:ca" || s.SASLSecretARN != "arn:u" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []map[string]string{
		{"STRATA_SASL_SECRET_ARN": "arn:u"}, // SASL without TLS
		{"STRATA_TLS_CA_SECRET_ARN": "arn:ca", "STRATA_TLS": "false"},
		{"STRATA_TLS": "maybe"},
		{"STRATA_TLS": "true", "STRATA_SASL_MECHANISM": "PLAIN"},
	} {
		if _, err := FromEnv(env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// cluster is a kfake cluster serving TLS with a certificate from a fresh
// private CA (made by certissuer, as the stack makes it) and SCRAM-SHA-512.
func cluster(t *testing.T) (seeds []string, caPEM string) {
	t.Helper()
	ca, err := certissuer.NewCA("test", "1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServer("test brokers", []string{"127.0.0.1", "localhost"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair([]byte(leaf.Certificate), []byte(leaf.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}}),
		kfake.EnableSASL(), kfake.Superuser(SCRAMSHA512, "fn-trigger", "right"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs(), ca.Certificate
}

func ping(t *testing.T, seeds []string, opts []kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestOpts connects with the options built from the secrets: TLS with the
// private CA and SCRAM-SHA-512 work; a wrong password, another CA and
// plaintext do not.
func TestOpts(t *testing.T) {
	seeds, caPEM := cluster(t)
	secrets := func(pass, ca string) mapSecrets {
		u, _ := json.Marshal(UserSecret{Username: "fn-trigger", Password: pass})
		c, _ := json.Marshal(CASecret{Certificate: ca})
		return mapSecrets{"arn:user": string(u), "arn:ca": string(c)}
	}
	s, err := FromEnv(env(map[string]string{"STRATA_TLS_CA_SECRET_ARN": "arn:ca", "STRATA_SASL_SECRET_ARN": "arn:user"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opts, err := s.Opts(ctx, secrets("right", caPEM))
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(t, seeds, opts); err != nil {
		t.Fatalf("with the function's credentials: %v", err)
	}
	opts, _ = s.Opts(ctx, secrets("wrong", caPEM))
	if ping(t, seeds, opts) == nil {
		t.Fatal("a wrong password worked")
	}
	other, _ := certissuer.NewCA("other", "1", time.Now(), time.Hour)
	opts, _ = s.Opts(ctx, secrets("right", other.Certificate))
	if err := ping(t, seeds, opts); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("another CA: %v", err)
	}
	if ping(t, seeds, nil) == nil {
		t.Fatal("plaintext worked")
	}

	// Broken secrets name the secret.
	for _, sm := range []mapSecrets{{"arn:user": "{}", "arn:ca": `{"certificate":"` + strings.ReplaceAll(caPEM, "\n", `\n`) + `"}`}, {"arn:ca": `{"cert":"x"}`}, {}} {
		if _, err := s.Opts(ctx, sm); err == nil || !strings.Contains(err.Error(), "arn:") {
			t.Errorf("%v: %v", sm, err)
		}
	}
	if _, err := s.Opts(ctx, nil); err == nil {
		t.Error("no client: no error")
	}
}

// TestClientOptsThroughTheSDK reads the secrets with the real Secrets
// Manager client from a stand-in of its JSON API.
func TestClientOptsThroughTheSDK(t *testing.T) {
	seeds, caPEM := cluster(t)
	u, _ := json.Marshal(UserSecret{Username: "fn-trigger", Password: "right"})
	c, _ := json.Marshal(CASecret{Certificate: caPEM})
	values := map[string]string{"arn:aws:secretsmanager:us-east-1:1:secret:u": string(u), "arn:aws:secretsmanager:us-east-1:1:secret:ca": string(c)}
	var targets []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targets = append(targets, r.Header.Get("X-Amz-Target"))
		body, _ := io.ReadAll(r.Body)
		var in struct{ SecretId string }
		json.Unmarshal(body, &in)
		v, ok := values[in.SecretId]
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if !ok {
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"ResourceNotFoundException","message":"no"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"ARN": in.SecretId, "Name": "n", "SecretString": v})
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	s, err := FromEnv(env(map[string]string{
		"STRATA_TLS_CA_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:ca",
		"STRATA_SASL_SECRET_ARN":   "arn:aws:secretsmanager:us-east-1:1:secret:u",
		"STRATA_SECRETS_ENDPOINT":  srv.URL,
	}))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := ClientOpts(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 2 || targets[0] != "secretsmanager.GetSecretValue" {
		t.Fatalf("requests %v", targets)
	}
	if err := ping(t, seeds, opts); err != nil {
		t.Fatal(err)
	}
}
