package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"testing"

	"github.com/stratamq/strata/brokerfleet/internal/security"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
)

func runUsersCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"users"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestUsersCommandOverSASLSSL sets, lists and deletes SCRAM users on a
// broker whose only listener is SASL_SSL, logged in as its admin.
func TestUsersCommandOverSASLSSL(t *testing.T) {
	ca := brokertest.NewCA(t)
	certFile, keyFile := ca.Issue(t, "broker", pkix.Name{CommonName: "broker"})
	srvTLS, err := security.ServerTLS(certFile, keyFile, "")
	require.NoError(t, err)
	meta := brokertest.NewMeta(t)
	admin, err := metastore.NewScramCredential("admin", metastore.ScramSHA512, "admin-secret", 4096)
	require.NoError(t, err)
	require.NoError(t, meta.PutScramCredential(context.Background(), admin))
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Meta = meta
		c.Security.Listeners = []security.Listener{{Name: "SASL_SSL", TLS: srvTLS, SASLMechanisms: []string{security.MechSCRAM512}}}
		c.Security.Authorizer, c.Security.SuperUsers = true, []string{"User:admin"}
	})
	conn := []string{"-bootstrap", b.Addr, "-tls-ca", ca.CAFile, "-sasl-user", "admin", "-sasl-password", "admin-secret"}

	code, out, errOut := runUsersCmd(append([]string{"set", "carol", "-password", "carol-pw", "-iterations", "4096"}, conn...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "set SCRAM-SHA-512, SCRAM-SHA-256 for carol")

	code, out, errOut = runUsersCmd(append([]string{"list", "-json"}, conn...)...)
	require.Equal(t, 0, code, errOut)
	var users []userJSON
	require.NoError(t, json.Unmarshal([]byte(out), &users))
	require.Len(t, users, 2)
	require.Equal(t, "carol", users[1].User)
	require.Len(t, users[1].Mechanisms, 2)

	code, out, errOut = runUsersCmd(append([]string{"list"}, conn...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "carol  SCRAM-SHA-256  4096")

	code, out, errOut = runUsersCmd(append([]string{"delete", "carol", "-mechanism", "SCRAM-SHA-256"}, conn...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "deleted SCRAM-SHA-256 of carol")
	code, _, errOut = runUsersCmd(append([]string{"delete", "carol", "nobody"}, conn...)...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "nobody")

	code, _, errOut = runUsersCmd(append([]string{"list", "carol"}, conn...)...)
	require.Equal(t, 1, code, "carol has no credentials left")
	require.Contains(t, errOut, "could not be described")

	// Wrong admin password: refused.
	bad := []string{"-bootstrap", b.Addr, "-tls-ca", ca.CAFile, "-sasl-user", "admin", "-sasl-password", "nope", "-timeout", "3s"}
	code, _, errOut = runUsersCmd(append([]string{"list"}, bad...)...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "SASL_AUTHENTICATION_FAILED")

	code, _, _ = runUsersCmd("set", "x")
	require.Equal(t, 2, code, "no password")
}
