package security

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func acl(rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) metastore.ACL {
	return metastore.ACL{
		ResourceType: int8(rt), ResourceName: name, PatternType: int8(pattern),
		Principal: principal, Host: host, Operation: int8(op), Permission: int8(perm),
	}
}

// TestAuthorizerMatrix checks every principal × operation × resource
// against the set of allowed cells; every cell not listed is denied.
func TestAuthorizerMatrix(t *testing.T) {
	const (
		lit   = kmsg.ACLResourcePatternTypeLiteral
		pre   = kmsg.ACLResourcePatternTypePrefixed
		allow = kmsg.ACLPermissionTypeAllow
		deny  = kmsg.ACLPermissionTypeDeny
	)
	a := NewACLs([]string{"User:admin", " "})
	a.Set([]metastore.ACL{
		acl(resTopic, lit, "orders", "User:alice", "*", opRead, allow),
		acl(resTopic, pre, "orders-", "User:alice", "*", opWrite, allow),
		acl(resTopic, lit, "orders-eu-secret", "User:alice", "*", opWrite, deny),
		acl(resGroup, lit, "g1", "User:alice", "*", opRead, allow),
		acl(resTopic, lit, "public", "User:*", "*", opRead, allow),

		acl(resTopic, lit, "*", "User:bob", "*", opAll, allow),
		acl(resTopic, lit, "orders", "User:bob", "*", opRead, deny),
		acl(resCluster, lit, ClusterName, "User:bob", "*", opCreate, allow),
		acl(resTxnID, lit, "tx1", "User:bob", "*", opWrite, allow),
		acl(resGroup, lit, "g1", "User:bob", "10.0.0.1", opDescribe, allow), // another host

		acl(resCluster, lit, ClusterName, "User:carol", "*", opAlterConfigs, allow),
		acl(resCluster, lit, ClusterName, "User:carol", "*", opIdempotentWrite, allow),
		acl(resGroup, pre, "g", "User:carol", "*", opAll, deny),
		acl(resGroup, lit, "*", "User:carol", "*", opRead, allow),
	})

	type res struct {
		rt   kmsg.ACLResourceType
		name string
		ops  []kmsg.ACLOperation
	}
	topicOps := []kmsg.ACLOperation{opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs}
	resources := []res{
		{resTopic, "orders", topicOps},
		{resTopic, "orders-eu", topicOps},
		{resTopic, "orders-eu-secret", topicOps},
		{resTopic, "public", topicOps},
		{resGroup, "g1", []kmsg.ACLOperation{opRead, opDescribe, opDelete}},
		{resGroup, "other", []kmsg.ACLOperation{opRead, opDescribe, opDelete}},
		{resCluster, ClusterName, []kmsg.ACLOperation{opCreate, opAlter, opDescribe, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite}},
		{resTxnID, "tx1", []kmsg.ACLOperation{opWrite, opDescribe}},
	}
	principals := []string{"User:admin", "User:alice", "User:bob", "User:carol", AnonymousUser}

	allowed := map[string]bool{}
	cells := func(principal string, rt kmsg.ACLResourceType, name string, ops ...kmsg.ACLOperation) {
		for _, op := range ops {
			allowed[cell(principal, rt, name, op)] = true
		}
	}
	for _, r := range resources { // super user: everything
		cells("User:admin", r.rt, r.name, r.ops...)
	}
	cells("User:alice", resTopic, "orders", opRead, opDescribe)
	cells("User:alice", resTopic, "orders-eu", opWrite, opDescribe)
	cells("User:alice", resTopic, "orders-eu-secret", opDescribe) // WRITE denied; DESCRIBE still implied by the prefixed WRITE
	cells("User:alice", resTopic, "public", opRead, opDescribe)
	cells("User:alice", resGroup, "g1", opRead, opDescribe)

	cells("User:bob", resTopic, "orders", opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs) // READ denied
	for _, n := range []string{"orders-eu", "orders-eu-secret", "public"} {
		cells("User:bob", resTopic, n, topicOps...)
	}
	cells("User:bob", resCluster, ClusterName, opCreate)
	cells("User:bob", resTxnID, "tx1", opWrite, opDescribe)

	cells("User:carol", resCluster, ClusterName, opAlterConfigs, opDescribeConfigs, opIdempotentWrite)
	cells("User:carol", resTopic, "public", opRead, opDescribe)
	cells("User:carol", resGroup, "other", opRead, opDescribe) // g1 falls under the prefixed DENY ALL

	cells(AnonymousUser, resTopic, "public", opRead, opDescribe)

	n := 0
	for _, p := range principals {
		for _, r := range resources {
			for _, op := range r.ops {
				n++
				want := allowed[cell(p, r.rt, r.name, op)]
				if got := a.Allowed(p, "127.0.0.1", op, r.rt, r.name); got != want {
					t.Errorf("%s: got allowed=%v, want %v", cell(p, r.rt, r.name, op), got, want)
				}
			}
		}
	}
	if n != 5*(4*8+2*3+7+2) {
		t.Fatalf("checked %d cells", n)
	}
	// The other host's entry applies from that host.
	if !a.Allowed("User:bob", "10.0.0.1", opDescribe, resGroup, "g1") {
		t.Error("bob from 10.0.0.1 may describe g1")
	}
}

func cell(principal string, rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) string {
	return fmt.Sprintf("%s %s %s:%s", principal, strings.ToUpper(op.String()), rt, name)
}

// TestAuthorizerEmptyDeniesAll: with ACLs on and no entries only super
// users get through (allow.everyone.if.no.acl.found=false).
func TestAuthorizerEmptyDeniesAll(t *testing.T) {
	a := NewACLs([]string{"User:admin"})
	if a.Allowed("User:x", "h", opDescribe, resTopic, "t") {
		t.Fatal("allowed without ACLs")
	}
	if !a.Allowed("User:admin", "h", opAlter, resCluster, ClusterName) {
		t.Fatal("super user refused")
	}
}

// BenchmarkAuthorizerAllowed measures one check against n topic ACLs (the
// per-topic cost a Produce or Fetch pays when ACLs are on).
func BenchmarkAuthorizerAllowed(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			a := NewACLs(nil)
			var acls []metastore.ACL
			for i := 0; i < n; i++ {
				acls = append(acls, acl(resTopic, kmsg.ACLResourcePatternTypeLiteral, fmt.Sprint("topic-", i), fmt.Sprint("User:u", i%50), "*", opWrite, kmsg.ACLPermissionTypeAllow))
			}
			a.Set(acls)
			b.ReportAllocs()
			for b.Loop() {
				a.Allowed("User:u7", "10.0.0.1", opWrite, resTopic, "topic-7")
			}
		})
	}
}
