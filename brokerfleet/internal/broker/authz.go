package broker

// ACL enforcement, the part every rule shares. Each API key's rule lives
// beside its handler (NN_*.go) and runs before it when ACLs are on:
// resources a principal may not touch are taken out of the request and
// answered with the matching *_AUTHORIZATION_FAILED code afterwards, so
// handlers stay unaware of ACLs; a request the principal may not make at
// all gets a complete denying answer. Metadata lists only the topics the
// principal may describe.

import (
	"context"
	"crypto/tls"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
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

var (
	errTopicAuthz   = kerr.TopicAuthorizationFailed.Code
	errGroupAuthz   = kerr.GroupAuthorizationFailed.Code
	errClusterAuthz = kerr.ClusterAuthorizationFailed.Code
	errTxnAuthz     = kerr.TransactionalIDAuthorizationFailed.Code
)

// access is what an authorization rule may ask about one connection's
// principal. Rules run only when ACLs are on.
type access struct {
	b  *Broker
	cc *clientConn
}

// can reports whether the principal may do op on the resource of type rt
// named name.
func (a access) can(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return a.b.authz.Allowed(a.cc.sec.Principal(), a.cc.sec.Host(), op, rt, name)
}

// cluster reports whether the principal may do op on the cluster.
func (a access) cluster(op kmsg.ACLOperation) bool { return a.can(op, resCluster, clusterName) }

// mayWriteSomeTopic reports whether the principal holds an ALLOW for WRITE
// (or ALL) on some topic pattern, for idempotent producers (KIP-679).
func (a access) mayWriteSomeTopic() bool {
	return a.b.authz.AnyAllows(a.cc.sec.Principal(), a.cc.sec.Host(), opWrite, resTopic)
}

// topicName resolves a topic id.
func (a access) topicName(id [16]byte) (string, bool) {
	if t := a.b.cat.Snapshot().TopicByID(metastore.TopicID(id)); t != nil {
		return t.Meta.Name, true
	}
	return "", false
}

// topicExists reports whether a topic exists.
func (a access) topicExists(name string) bool { return a.b.cat.Snapshot().Topic(name) != nil }

// filter keeps the elements ok accepts, in place, and returns the others.
func filter[T any](s *[]T, ok func(*T) bool) (denied []T) {
	kept := (*s)[:0]
	for _, v := range *s {
		if ok(&v) {
			kept = append(kept, v)
		} else {
			denied = append(denied, v)
		}
	}
	*s = kept
	return denied
}

// initSecurity sets up what Config.Security asks for.
func (b *Broker) initSecurity(ctx context.Context) {
	b.secured = b.cfg.Security.Enabled()
	b.auth = security.NewAuthenticator(security.AuthOptions{
		Credentials: b.meta, FakeKey: fakeCredentialKey(ctx, b), FailureLimit: b.cfg.Security.AuthFailureLimit, Clock: b.clock,
	})
	ib := b.cfg.Security.InterBroker()
	b.replicaAuth = len(ib.SASLMechanisms) > 0 || (ib.TLS != nil && ib.TLS.ClientAuth == tls.RequireAndVerifyClientCert)
	if !b.cfg.Security.Authorizer {
		return
	}
	b.authz = security.NewACLs(b.cfg.Security.SuperUsers)
	if len(ib.SASLMechanisms) == 0 && (ib.TLS == nil || ib.TLS.ClientAuth < tls.VerifyClientCertIfGiven) && !b.authz.IsSuper(security.AnonymousUser) {
		b.log.Warn("acls are on but followers reach leaders as User:ANONYMOUS (the inter-broker listener has neither SASL nor client certificates): grant it CLUSTER_ACTION or replication is refused",
			"listener", ib.Name)
	}
	tctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	b.reloadACLs(tctx) // until this succeeds, only super users get through
}

// reloadQuotas refreshes the client quotas from the metastore; until it
// first succeeds, no quota is enforced.
func (b *Broker) reloadQuotas(ctx context.Context) {
	qs, err := b.meta.ClientQuotas(ctx)
	if err != nil {
		b.log.Warn("load client quotas", "err", err)
		return
	}
	b.quotas.Set(qs)
}

// fakeCredentialKey is the cluster-wide key of the fake SCRAM credentials
// unknown users get, so that every broker answers them alike; nil (a key
// of this process) without SASL or when the metastore cannot give it.
func fakeCredentialKey(ctx context.Context, b *Broker) []byte {
	if !b.cfg.Security.SASL() {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	key, err := b.meta.ClusterSecret(tctx, "fake-scram-credentials")
	if err != nil {
		b.log.Warn("load the key of fake SCRAM credentials: this broker's differ from the others'", "err", err)
		return nil
	}
	return key
}

// reloadSecurity applies a metadata change: the authorizer's cache, and
// the credentials (see credentialsChanged).
func (b *Broker) reloadSecurity(ctx context.Context) {
	b.reloadACLs(ctx)
	credentialsChanged(ctx, b)
}

// credentialsChanged drops the cached credentials and ends the sessions
// of users whose credential is gone (at their next request).
func credentialsChanged(ctx context.Context, b *Broker) {
	if n, err := b.auth.CredentialsChanged(ctx); err != nil {
		b.log.Warn("check the credentials of authenticated sessions", "err", err)
	} else if n > 0 {
		b.log.Info("ending the sessions of deleted credentials", "sessions", n)
	}
}

// mayManageCredentials decides whether cc may describe (op DESCRIBE) or
// alter (op ALTER) SCRAM credentials. With ACLs, the principal needs op on
// the cluster; without, wherever clients authenticate (SASL or client
// certificates) only super users may; with no authentication at all
// (dev), anyone may. It is both the ACL rule of Describe- and
// AlterUserScramCredentials and their handlers' own check, since rules
// run only with ACLs on: no authenticated user can change another's
// credentials unless allowed to.
func mayManageCredentials(b *Broker, cc *clientConn, op kmsg.ACLOperation) bool {
	switch {
	case b.authz != nil:
		return b.authz.Allowed(cc.sec.Principal(), cc.sec.Host(), op, resCluster, clusterName)
	case !b.cfg.Security.Authenticates():
		return true
	default:
		return b.cfg.Security.IsSuperUser(cc.sec.Principal())
	}
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

// authorizeMetadataTopics hides topics the principal may not describe and
// keeps it from auto-creating topics it may not create.
func authorizeMetadataTopics(a access, r *kmsg.MetadataRequest) func(kmsg.Response) {
	can := func(op kmsg.ACLOperation, name string) bool { return a.can(op, resTopic, name) }
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		return func(resp kmsg.Response) {
			rr := resp.(*kmsg.MetadataResponse)
			filter(&rr.Topics, func(t *kmsg.MetadataResponseTopic) bool { return t.Topic != nil && can(opDescribe, *t.Topic) })
		}
	}
	createCluster := a.cluster(opCreate)
	var denied, unknown []kmsg.MetadataRequestTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else if n, ok := a.topicName(t.TopicID); ok {
			name = n
		} else {
			kept = append(kept, t) // unknown id: UNKNOWN_TOPIC_ID
			continue
		}
		switch {
		case !can(opDescribe, name):
			denied = append(denied, t)
		case !a.topicExists(name) && !createCluster && !can(opCreate, name):
			unknown = append(unknown, t) // exists for nobody: no auto-creation
		default:
			kept = append(kept, t)
		}
	}
	r.Topics = kept
	dropAll := r.Version == 0 && len(kept) == 0 // v0: an empty list means every topic
	if len(r.Topics) == 0 && r.Version > 0 {
		r.Topics = []kmsg.MetadataRequestTopic{} // not nil: that would mean all topics
	}
	if len(denied)+len(unknown) == 0 {
		return nil
	}
	return func(resp kmsg.Response) {
		rr := resp.(*kmsg.MetadataResponse)
		if dropAll {
			rr.Topics = rr.Topics[:0]
		}
		add := func(ts []kmsg.MetadataRequestTopic, code int16) {
			for _, t := range ts {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID, mt.ErrorCode = t.Topic, t.TopicID, code
				rr.Topics = append(rr.Topics, mt)
			}
		}
		add(denied, errTopicAuthz)
		add(unknown, kerr.UnknownTopicOrPartition.Code)
	}
}

// authorizeOffsetFetchGroups checks DESCRIBE on the groups and hides or
// refuses topics the principal may not describe.
func authorizeOffsetFetchGroups(a access, r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	can := a.can
	if r.Version < 8 {
		if !can(opDescribe, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = errGroupAuthz
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errGroupAuthz
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		listed := r.Topics != nil
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.OffsetFetchResponse)
			if !listed {
				filter(&rr.Topics, func(t *kmsg.OffsetFetchResponseTopic) bool { return can(opDescribe, resTopic, t.Topic) })
				return
			}
			for i := range rr.Topics {
				if t := &rr.Topics[i]; !can(opDescribe, resTopic, t.Topic) {
					for j := range t.Partitions {
						t.Partitions[j].Offset, t.Partitions[j].Metadata, t.Partitions[j].ErrorCode = -1, nil, errTopicAuthz
					}
				}
			}
		}
	}
	denied := filter(&r.Groups, func(g *kmsg.OffsetFetchRequestGroup) bool { return can(opDescribe, resGroup, g.Group) })
	listed := map[string]bool{}
	for _, g := range r.Groups {
		listed[g.Group] = g.Topics != nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.OffsetFetchResponse)
		for i := range rr.Groups {
			g := &rr.Groups[i]
			if !listed[g.Group] {
				filter(&g.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) bool { return can(opDescribe, resTopic, t.Topic) })
				continue
			}
			for j := range g.Topics {
				if t := &g.Topics[j]; !can(opDescribe, resTopic, t.Topic) {
					for k := range t.Partitions {
						t.Partitions[k].Offset, t.Partitions[k].Metadata, t.Partitions[k].ErrorCode = -1, nil, errTopicAuthz
					}
				}
			}
		}
		for _, g := range denied {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, errGroupAuthz
			rr.Groups = append(rr.Groups, rg)
		}
	}
}

// configAllowed checks a config operation: topics by name, brokers as the
// cluster.
func (a access) configAllowed(op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) bool {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return a.can(op, resTopic, name)
	case kmsg.ConfigResourceTypeGroupConfig:
		return a.can(op, resGroup, name)
	}
	return a.cluster(op)
}

func configAuthzCode(rt kmsg.ConfigResourceType) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return errTopicAuthz
	case kmsg.ConfigResourceTypeGroupConfig:
		return errGroupAuthz
	}
	return errClusterAuthz
}
