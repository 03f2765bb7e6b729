package broker

// CreateAcls, versions 0-3. v1 adds resource pattern types (prefixed); v2
// is flexible. Needs ALTER on the cluster; answers SECURITY_DISABLED when
// ACLs are off.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
)

func init() { register(30, 0, 3, answer(handleCreateACLs), authorizeCreateACLs) }

func handleCreateACLs(b *Broker, cc *clientConn, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	code := int16(0)
	if b.authz == nil {
		code = kerr.SecurityDisabled.Code
	}
	var valid []metastore.ACL
	var at []int
	for i, c := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = code
		e := metastore.ACL{
			ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName, PatternType: int8(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: int8(c.Operation), Permission: int8(c.PermissionType),
		}
		if code == 0 {
			if err := security.CheckEntry(e); err != nil {
				r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			} else {
				valid, at = append(valid, e), append(at, i)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if len(valid) == 0 {
		return resp
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	if err := b.meta.CreateACLs(ctx, valid); err != nil {
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		}
	}
	b.reloadACLs(ctx)
	syncIfAny(b, cc, len(resp.Results), func(i int) int16 { return resp.Results[i].ErrorCode })
	return resp
}

// authorizeCreateACLs is the ACL rule of CreateACLs.
func authorizeCreateACLs(a access, r *kmsg.CreateACLsRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(opAlter) {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	for range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = errClusterAuthz
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
