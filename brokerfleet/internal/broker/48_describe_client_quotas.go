package broker

// DescribeClientQuotas, versions 0-1 (KIP-546; v1 is flexible): the quotas
// stored for the entities a filter matches. A component matches an entity
// that has its type with the name given (match type 0), with the default
// name (1), or with any name (2); with strict set, the entity may have no
// other types. Needs DESCRIBE_CONFIGS on the cluster.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/quota"
	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(48, 0, 1, answer(handleDescribeClientQuotas), authorizeDescribeClientQuotas)
}

const (
	quotaMatchExact   = 0
	quotaMatchDefault = 1
	quotaMatchAny     = 2
)

func handleDescribeClientQuotas(b *Broker, cc *clientConn, req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	invalid := func(msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		return resp
	}
	seen := map[string]bool{}
	for _, c := range req.Components {
		switch {
		case seen[c.EntityType]:
			return invalid("entity type " + c.EntityType + " is filtered twice")
		case c.MatchType == quotaMatchExact && c.Match == nil:
			return invalid("an exact match needs a name")
		case c.MatchType != quotaMatchExact && c.Match != nil:
			return invalid("a default or any match takes no name")
		case c.MatchType < quotaMatchExact || c.MatchType > quotaMatchAny:
			return invalid("unknown match type")
		}
		seen[c.EntityType] = true
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	qs, err := b.meta.ClientQuotas(ctx)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		return resp
	}
	for _, q := range qs {
		if !quotaFilterMatches(req, q.Entity) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			ep := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ep.Type, ep.Name = p.Type, p.Name
			e.Entity = append(e.Entity, ep)
		}
		for _, k := range quota.Keys {
			if v, ok := q.Values[k]; ok {
				ev := kmsg.NewDescribeClientQuotasResponseEntryValue()
				ev.Key, ev.Value = k, v
				e.Values = append(e.Values, ev)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp
}

func quotaFilterMatches(req *kmsg.DescribeClientQuotasRequest, entity []metastore.QuotaEntityPart) bool {
	byType := map[string]*string{}
	for _, p := range entity {
		byType[p.Type] = p.Name
	}
	for _, c := range req.Components {
		name, ok := byType[c.EntityType]
		switch {
		case !ok:
			return false
		case c.MatchType == quotaMatchExact && (name == nil || *name != *c.Match):
			return false
		case c.MatchType == quotaMatchDefault && name != nil:
			return false
		}
	}
	return !req.Strict || len(entity) == len(req.Components)
}

// authorizeDescribeClientQuotas is the ACL rule of DescribeClientQuotas.
func authorizeDescribeClientQuotas(a access, r *kmsg.DescribeClientQuotasRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(opDescribeConfigs) {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.ErrorCode = errClusterAuthz
	return resp, nil
}
