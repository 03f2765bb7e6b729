package broker

// ACL authorization with Kafka's semantics (AclAuthorizer /
// StandardAuthorizer): an operation on a resource is allowed when a
// matching ALLOW entry exists and no matching DENY entry does (deny wins);
// no matching entry means denied; super users skip the check. An entry
// matches by resource type, then its pattern (a literal name, the literal
// wildcard "*", or a prefix), its principal (or "User:*") and its host (or
// "*"). DESCRIBE is implied by READ, WRITE, DELETE and ALTER;
// DESCRIBE_CONFIGS by ALTER_CONFIGS; ALL implies everything.

import (
	"context"
	"crypto/tls"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

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

	clusterName = "kafka-cluster" // the one cluster resource's name
)

// authorizer answers "may principal do op on resource" from a cached copy
// of the metastore's ACLs, reloaded on every metadata change.
type authorizer struct {
	super map[string]bool

	mu     sync.RWMutex
	byType map[kmsg.ACLResourceType][]metastore.ACL
}

func newAuthorizer(superUsers []string) *authorizer {
	a := &authorizer{super: map[string]bool{}, byType: map[kmsg.ACLResourceType][]metastore.ACL{}}
	for _, u := range superUsers {
		if u = strings.TrimSpace(u); u != "" {
			a.super[u] = true
		}
	}
	return a
}

// set replaces the cached entries.
func (a *authorizer) set(acls []metastore.ACL) {
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

// allowed reports whether principal, connecting from host, may do op on
// the resource of type rt named name.
func (a *authorizer) allowed(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
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

// initSecurity sets up what Config.Security asks for.
func (b *Broker) initSecurity(ctx context.Context) {
	b.secured = b.cfg.Security.enabled()
	if !b.cfg.Security.Authorizer {
		return
	}
	b.authz = newAuthorizer(b.cfg.Security.SuperUsers)
	if ib := b.interBrokerListener(); len(ib.SASLMechanisms) == 0 && (ib.TLS == nil || ib.TLS.ClientAuth < tls.VerifyClientCertIfGiven) && !b.authz.super[anonymousUser] {
		b.log.Warn("acls are on but followers reach leaders as User:ANONYMOUS (the inter-broker listener has neither SASL nor client certificates): grant it CLUSTER_ACTION or replication is refused",
			"listener", ib.Name)
	}
	tctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	b.reloadACLs(tctx) // until this succeeds, only super users get through
}

// reloadACLs refreshes the authorizer's cache from the metastore.
func (b *Broker) reloadACLs(ctx context.Context) {
	if b.authz == nil {
		return
	}
	acls, err := b.meta.ACLs(ctx)
	if err != nil {
		b.log.Warn("load acls", "err", err)
		return
	}
	b.authz.set(acls)
}

// allowed checks op on a resource for the connection (always true without
// an authorizer).
func (b *Broker) allowed(cc *clientConn, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	host := ""
	if cc.sec != nil {
		host = cc.sec.host
	}
	return b.authz.allowed(cc.principal(), host, op, rt, name)
}

// dispatchSecurityAdmin serves the ACL and SCRAM credential requests (and
// SASL requests on a broker without security); it reports false for any
// other request.
func (b *Broker) dispatchSecurityAdmin(cc *clientConn, req kmsg.Request, p *pending) bool {
	switch r := req.(type) {
	case *kmsg.DescribeACLsRequest:
		p.resp = b.handleDescribeACLs(cc, r)
	case *kmsg.CreateACLsRequest:
		p.resp = b.handleCreateACLs(cc, r)
	case *kmsg.DeleteACLsRequest:
		p.resp = b.handleDeleteACLs(cc, r)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		p.resp = b.handleDescribeUserSCRAMCredentials(cc, r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		p.resp = b.handleAlterUserSCRAMCredentials(cc, r)
	case *kmsg.SASLHandshakeRequest: // only without security: nothing to authenticate
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.ErrorCode, p.resp, p.last = kerr.IllegalSaslState.Code, resp, true
	case *kmsg.SASLAuthenticateRequest:
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode, p.resp, p.last = kerr.IllegalSaslState.Code, resp, true
	default:
		return false
	}
	return true
}
