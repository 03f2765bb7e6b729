package broker

// AlterClientQuotas, versions 0-1 (KIP-546; v1 is flexible): sets and
// removes quota values of user and client-id entities (a nil name is the
// default). One result per entry; entries that fail validation are not
// applied, the others are. Needs ALTER_CONFIGS on the cluster.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/quota"
	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(49, 0, 1, answer(handleAlterClientQuotas), authorizeAlterClientQuotas)
}

func handleAlterClientQuotas(b *Broker, cc *clientConn, req *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	var alts []metastore.QuotaAlteration
	var at []int
	for _, e := range req.Entries {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			rp := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rp.Type, rp.Name = p.Type, p.Name
			r.Entity = append(r.Entity, rp)
		}
		alt, msg := quotaAlteration(e)
		if msg != "" {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		} else if !req.ValidateOnly {
			alts = append(alts, alt)
			at = append(at, len(resp.Entries))
		}
		resp.Entries = append(resp.Entries, r)
	}
	if len(alts) == 0 {
		return resp
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	for i, err := range b.meta.AlterClientQuotas(ctx, alts) {
		if err != nil {
			resp.Entries[at[i]].ErrorCode, resp.Entries[at[i]].ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		}
	}
	b.reloadQuotas(ctx)
	syncIfAny(b, cc, len(resp.Entries), func(i int) int16 { return resp.Entries[i].ErrorCode })
	return resp
}

// quotaAlteration checks an entry as Kafka does and returns it as a
// metastore alteration, or why it is invalid.
func quotaAlteration(e kmsg.AlterClientQuotasRequestEntry) (metastore.QuotaAlteration, string) {
	var alt metastore.QuotaAlteration
	if len(e.Entity) == 0 {
		return alt, "invalid empty client quota entity"
	}
	types := map[string]bool{}
	for _, p := range e.Entity {
		switch {
		case types[p.Type]:
			return alt, "entity type " + p.Type + " is given twice"
		case p.Type == "ip":
			return alt, "ip quotas (connection_creation_rate) are not served; the broker bounds connections per address with -max-connections-per-ip"
		case p.Type != quota.EntityUser && p.Type != quota.EntityClientID:
			return alt, "unhandled client quota entity type " + p.Type
		}
		types[p.Type] = true
		alt.Entity = append(alt.Entity, metastore.QuotaEntityPart{Type: p.Type, Name: p.Name})
	}
	keys := map[string]bool{}
	for _, op := range e.Ops {
		if keys[op.Key] {
			return alt, "key " + op.Key + " is altered twice"
		}
		keys[op.Key] = true
		kind := -1
		for k, name := range quota.Keys {
			if name == op.Key {
				kind = k
			}
		}
		switch {
		case op.Key == "controller_mutation_rate":
			return alt, "controller_mutation_rate is not served: topic creations and deletions are not throttled"
		case kind < 0:
			return alt, "invalid configuration key " + op.Key
		case op.Remove:
			alt.Remove = append(alt.Remove, op.Key)
			continue
		case math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0:
			return alt, op.Key + " must be a positive number"
		case quota.Kind(kind) != quota.Request && (op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt64):
			return alt, op.Key + " must be a long"
		}
		if alt.Set == nil {
			alt.Set = map[string]float64{}
		}
		alt.Set[op.Key] = op.Value
	}
	return alt, ""
}

// authorizeAlterClientQuotas is the ACL rule of AlterClientQuotas.
func authorizeAlterClientQuotas(a access, r *kmsg.AlterClientQuotasRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(opAlterConfigs) {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range r.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode = errClusterAuthz
		for _, p := range e.Entity {
			rp := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rp.Type, rp.Name = p.Type, p.Name
			re.Entity = append(re.Entity, rp)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}
