package metastore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

func openMeta(t *testing.T) *metastore.Meta {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return metastore.New(s)
}

// TestScramCredentialsStoreKeysNotPasswords: credentials round-trip, check
// passwords, never hold the password, list per user and delete.
func TestScramCredentialsStoreKeysNotPasswords(t *testing.T) {
	ctx := context.Background()
	m := openMeta(t)
	for _, user := range []string{"alice", "a/b c", "alice2"} {
		for _, mech := range []string{metastore.ScramSHA256, metastore.ScramSHA512} {
			c, err := metastore.NewScramCredential(user, mech, "pw-"+user, 4096)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.PutScramCredential(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := m.ScramCredential(ctx, "a/b c", metastore.ScramSHA512)
	if err != nil {
		t.Fatal(err)
	}
	if !c.CheckPassword("pw-a/b c") || c.CheckPassword("pw-alice") {
		t.Fatal("CheckPassword")
	}
	if len(c.Salt) != 32 || len(c.StoredKey) != 64 || len(c.ServerKey) != 64 || c.Iterations != 4096 {
		t.Fatalf("credential %+v", c)
	}
	alice, err := m.ScramCredentials(ctx, "alice")
	if err != nil || len(alice) != 2 {
		t.Fatalf("alice's credentials: %v %v", alice, err)
	}
	all, err := m.ScramCredentials(ctx, "")
	if err != nil || len(all) != 6 {
		t.Fatalf("all credentials: %d %v", len(all), err)
	}
	if err := m.DeleteScramCredential(ctx, "alice", metastore.ScramSHA256); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteScramCredential(ctx, "alice", metastore.ScramSHA256); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := m.ScramCredential(ctx, "alice", metastore.ScramSHA256); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("deleted credential: %v", err)
	}
	for _, bad := range []struct {
		user, mech string
		iters      int32
	}{{"", metastore.ScramSHA256, 4096}, {"x", "SCRAM-MD5", 4096}, {"x", metastore.ScramSHA256, 100}, {"x", metastore.ScramSHA256, 1 << 20}} {
		if _, err := metastore.ScramCredentialFromSalted(bad.user, bad.mech, []byte("s"), bad.iters, []byte("p")); !errors.Is(err, metastore.ErrBadCredential) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestACLsCreateListDelete(t *testing.T) {
	ctx := context.Background()
	m := openMeta(t)
	a := metastore.ACL{ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, Permission: 3}
	b := a
	b.Operation = 4
	v0, _ := m.ChangeVersion(ctx)
	if err := m.CreateACLs(ctx, []metastore.ACL{a, b, a}); err != nil {
		t.Fatal(err)
	}
	if v1, _ := m.ChangeVersion(ctx); v1 == v0 {
		t.Fatal("creating ACLs records no change")
	}
	got, err := m.ACLs(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("acls: %v %v", got, err)
	}
	if err := m.DeleteACLs(ctx, []metastore.ACL{a}); err != nil {
		t.Fatal(err)
	}
	got, _ = m.ACLs(ctx)
	if len(got) != 1 || got[0] != b {
		t.Fatalf("after delete: %v", got)
	}
}

// TestScramCredentialChangesMoveTheCounter: brokers learn of credential
// changes (they drop cached credentials and end a deleted user's
// sessions) through the change counter.
func TestScramCredentialChangesMoveTheCounter(t *testing.T) {
	ctx := context.Background()
	m := openMeta(t)
	v0, _ := m.ChangeVersion(ctx)
	c, err := metastore.NewScramCredential("bob", metastore.ScramSHA512, "pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.PutScramCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	v1, _ := m.ChangeVersion(ctx)
	if v1 == v0 {
		t.Fatal("storing a credential records no change")
	}
	if err := m.DeleteScramCredential(ctx, "bob", metastore.ScramSHA512); err != nil {
		t.Fatal(err)
	}
	if v2, _ := m.ChangeVersion(ctx); v2 == v1 {
		t.Fatal("deleting a credential records no change")
	}
}

func TestClusterSecretIsCreatedOnceAndShared(t *testing.T) {
	ctx := context.Background()
	m := openMeta(t)
	a, err := m.ClusterSecret(ctx, "fake-scram")
	if err != nil || len(a) != 32 {
		t.Fatalf("secret: %x %v", a, err)
	}
	b, err := m.ClusterSecret(ctx, "fake-scram")
	if err != nil || string(a) != string(b) {
		t.Fatalf("second read: %x %v, want %x", b, err, a)
	}
	if c, _ := m.ClusterSecret(ctx, "other"); string(c) == string(a) {
		t.Fatal("two secrets are equal")
	}
}
