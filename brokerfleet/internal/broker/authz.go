package broker

// ACL enforcement glue: the authorizer is security.ACLs, reloaded on
// every metadata change.

import (
	"context"
	"crypto/tls"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
)

// Wire codes used by the authorization rules (kmsg's ACL enums).
const (
	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId

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

	clusterName = security.ClusterName
)

// initSecurity sets up what Config.Security asks for.
func (b *Broker) initSecurity(ctx context.Context) {
	b.secured = b.cfg.Security.Enabled()
	if !b.cfg.Security.Authorizer {
		return
	}
	b.authz = security.NewACLs(b.cfg.Security.SuperUsers)
	if ib := b.cfg.Security.InterBroker(); len(ib.SASLMechanisms) == 0 && (ib.TLS == nil || ib.TLS.ClientAuth < tls.VerifyClientCertIfGiven) && !b.authz.IsSuper(security.AnonymousUser) {
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
	b.authz.Set(acls)
}

// allowed checks op on a resource for the connection (always true without
// an authorizer).
func (b *Broker) allowed(cc *clientConn, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	return b.authz.Allowed(cc.sec.Principal(), cc.sec.Host(), op, rt, name)
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
