package broker

// DeleteAcls, versions 0-3. v1 adds resource pattern types; v2 is
// flexible. Each filter deletes the entries it matches and lists them.
// Needs ALTER on the cluster.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
)

func init() { register(31, 0, 3, answer(handleDeleteACLs), authorizeDeleteACLs) }

func handleDeleteACLs(b *Broker, cc *clientConn, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	code := int16(0)
	if b.authz == nil {
		code = kerr.SecurityDisabled.Code
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	var acls []metastore.ACL
	if code == 0 {
		var err error
		if acls, err = b.meta.ACLs(ctx); err != nil {
			code = kerr.UnknownServerError.Code
		}
	}
	var gone []metastore.ACL
	for _, f := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = code
		if code == 0 {
			af := security.Filter{ResourceType: f.ResourceType, Name: f.ResourceName, Pattern: f.ResourcePatternType, Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType}
			for _, e := range acls {
				if !af.Matches(e) {
					continue
				}
				gone = append(gone, e)
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(e.ResourceType), e.ResourceName, kmsg.ACLResourcePatternType(e.PatternType)
				m.Principal, m.Host, m.Operation, m.PermissionType = e.Principal, e.Host, kmsg.ACLOperation(e.Operation), kmsg.ACLPermissionType(e.Permission)
				r.MatchingACLs = append(r.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if len(gone) > 0 {
		if err := b.meta.DeleteACLs(ctx, gone); err != nil {
			for i := range resp.Results {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
				resp.Results[i].MatchingACLs = nil
			}
		}
		b.reloadACLs(ctx)
	}
	syncIfAny(b, cc, len(resp.Results), func(i int) int16 {
		if len(resp.Results[i].MatchingACLs) == 0 {
			return -1 // nothing deleted
		}
		return resp.Results[i].ErrorCode
	})
	return resp
}

// authorizeDeleteACLs is the ACL rule of DeleteACLs.
func authorizeDeleteACLs(a access, r *kmsg.DeleteACLsRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(opAlter) {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode = errClusterAuthz
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
