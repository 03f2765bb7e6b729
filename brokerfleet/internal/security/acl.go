package security

// ACL authorization with Kafka's semantics (AclAuthorizer /
// StandardAuthorizer): an operation on a resource is allowed when a
// matching ALLOW entry exists and no matching DENY entry does (deny wins);
// no matching entry means denied; super users skip the check. An entry
// matches by resource type, then its pattern (a literal name, the literal
// wildcard "*", or a prefix), its principal (or "User:*") and its host (or
// "*"). DESCRIBE is implied by READ, WRITE, DELETE and ALTER;
// DESCRIBE_CONFIGS by ALTER_CONFIGS; ALL implies everything.

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// ClusterName is the name of the one cluster resource.
const ClusterName = "kafka-cluster"

// Wire codes used below (kmsg's ACL enums).
const (
	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId

	opAll             = kmsg.ACLOperationAll
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// Authorizer answers "may principal, connecting from host, do op on the
// resource of type rt named name". ACLs is the real one; AllowAll lets
// everything through (ACLs off).
type Authorizer interface {
	Allowed(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
	// AnyAllows reports whether some ALLOW entry for op (or ALL) on some
	// resource of type rt covers principal and host, whatever its name
	// (KIP-679: WRITE on any topic allows idempotent produce).
	AnyAllows(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool
}

// AllowAll is the Authorizer of a broker without ACLs.
type AllowAll struct{}

// Allowed always reports true.
func (AllowAll) Allowed(string, string, kmsg.ACLOperation, kmsg.ACLResourceType, string) bool {
	return true
}

// AnyAllows always reports true.
func (AllowAll) AnyAllows(string, string, kmsg.ACLOperation, kmsg.ACLResourceType) bool { return true }

var (
	_ Authorizer = AllowAll{}
	_ Authorizer = (*ACLs)(nil)
)

// ACLs answers from a cached copy of the metastore's ACL entries, which
// the broker replaces with Set on every metadata change.
type ACLs struct {
	super map[string]bool

	mu     sync.RWMutex
	byType map[kmsg.ACLResourceType][]metastore.ACL
}

// NewACLs returns an authorizer with no entries: only superUsers
// ("User:admin") get through until Set.
func NewACLs(superUsers []string) *ACLs {
	a := &ACLs{super: map[string]bool{}, byType: map[kmsg.ACLResourceType][]metastore.ACL{}}
	for _, u := range superUsers {
		if u = strings.TrimSpace(u); u != "" {
			a.super[u] = true
		}
	}
	return a
}

// Set replaces the cached entries.
func (a *ACLs) Set(acls []metastore.ACL) {
	by := map[kmsg.ACLResourceType][]metastore.ACL{}
	for _, e := range acls {
		rt := kmsg.ACLResourceType(e.ResourceType)
		by[rt] = append(by[rt], e)
	}
	a.mu.Lock()
	a.byType = by
	a.mu.Unlock()
}

// impliedBy lists the operations whose ALLOW also allows op.
func impliedBy(op kmsg.ACLOperation) []kmsg.ACLOperation {
	switch op {
	case opDescribe:
		return []kmsg.ACLOperation{opAll, opDescribe, opRead, opWrite, opDelete, opAlter}
	case opDescribeConfigs:
		return []kmsg.ACLOperation{opAll, opDescribeConfigs, opAlterConfigs}
	}
	return []kmsg.ACLOperation{opAll, op}
}

// Allowed reports whether principal, connecting from host, may do op on
// the resource of type rt named name.
func (a *ACLs) Allowed(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	a.mu.RLock()
	entries := a.byType[rt]
	a.mu.RUnlock()
	allow := false
	ops := impliedBy(op)
	for i := range entries {
		e := &entries[i]
		if !aclMatches(e, principal, host, name) {
			continue
		}
		eop := kmsg.ACLOperation(e.Operation)
		switch kmsg.ACLPermissionType(e.Permission) {
		case kmsg.ACLPermissionTypeDeny:
			if eop == op || eop == opAll {
				return false // deny wins
			}
		case kmsg.ACLPermissionTypeAllow:
			if slices.Contains(ops, eop) {
				allow = true
			}
		}
	}
	return allow
}

func aclMatches(e *metastore.ACL, principal, host, name string) bool {
	if e.Principal != principal && e.Principal != "User:*" {
		return false
	}
	if e.Host != "*" && e.Host != host {
		return false
	}
	switch kmsg.ACLResourcePatternType(e.PatternType) {
	case kmsg.ACLResourcePatternTypeLiteral:
		return e.ResourceName == "*" || e.ResourceName == name
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, e.ResourceName)
	}
	return false
}

// IsSuper reports whether principal is a super user.
func (a *ACLs) IsSuper(principal string) bool { return a.super[principal] }

// AnyAllows implements Authorizer.
func (a *ACLs) AnyAllows(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if a.super[principal] {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, e := range a.byType[rt] {
		eop := kmsg.ACLOperation(e.Operation)
		if kmsg.ACLPermissionType(e.Permission) == kmsg.ACLPermissionTypeAllow && (eop == op || eop == opAll) &&
			(e.Principal == principal || e.Principal == "User:*") && (e.Host == "*" || e.Host == host) {
			return true
		}
	}
	return false
}

// Filter selects ACL entries, as DescribeAcls and DeleteAcls do: nil
// strings and the ANY codes match everything; pattern MATCH selects the
// entries that apply to the named resource.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	Name         *string
	Pattern      kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Matches reports whether the filter selects e.
func (f Filter) Matches(e metastore.ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && int8(f.ResourceType) != e.ResourceType {
		return false
	}
	pt := kmsg.ACLResourcePatternType(e.PatternType)
	switch f.Pattern {
	case kmsg.ACLResourcePatternTypeAny:
		if f.Name != nil && *f.Name != e.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.Name != nil {
			n := *f.Name
			ok := (pt == kmsg.ACLResourcePatternTypeLiteral && (e.ResourceName == n || e.ResourceName == "*")) ||
				(pt == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(n, e.ResourceName))
			if !ok {
				return false
			}
		}
	default:
		if pt != f.Pattern || (f.Name != nil && *f.Name != e.ResourceName) {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == kmsg.ACLOperationAny || int8(f.Operation) == e.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || int8(f.Permission) == e.Permission)
}

// CheckEntry validates an entry to store.
func CheckEntry(e metastore.ACL) error {
	switch kmsg.ACLResourceType(e.ResourceType) {
	case resTopic, resGroup, resTxnID:
		if e.ResourceName == "" {
			return fmt.Errorf("empty resource name")
		}
	case resCluster:
		if e.ResourceName != ClusterName {
			return fmt.Errorf("the cluster resource is named %q", ClusterName)
		}
	default:
		return fmt.Errorf("resource type %d not served", e.ResourceType)
	}
	switch kmsg.ACLResourcePatternType(e.PatternType) {
	case kmsg.ACLResourcePatternTypeLiteral:
	case kmsg.ACLResourcePatternTypePrefixed:
		if e.ResourceName == "*" {
			return fmt.Errorf("a prefixed pattern may not be %q", "*")
		}
	default:
		return fmt.Errorf("pattern type %d is not literal or prefixed", e.PatternType)
	}
	if op := kmsg.ACLOperation(e.Operation); op < opAll || op > opIdempotentWrite {
		return fmt.Errorf("operation %d not served", e.Operation)
	}
	if p := kmsg.ACLPermissionType(e.Permission); p != kmsg.ACLPermissionTypeAllow && p != kmsg.ACLPermissionTypeDeny {
		return fmt.Errorf("permission %d is not allow or deny", e.Permission)
	}
	if name, ok := strings.CutPrefix(e.Principal, "User:"); !ok || name == "" {
		return fmt.Errorf("principal %q is not User:<name>", e.Principal)
	}
	if e.Host == "" {
		return fmt.Errorf("empty host (use %q for any)", "*")
	}
	return nil
}
