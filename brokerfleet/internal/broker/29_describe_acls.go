package broker

// DescribeAcls, versions 0-3. v1 adds resource pattern types (prefixed);
// v2 is flexible; v3 adds the user resource type (not served). Needs
// DESCRIBE on the cluster.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
)

func init() { register(29, 0, 3, answer(handleDescribeACLs), authorizeDescribeACLs) }

func handleDescribeACLs(b *Broker, cc *clientConn, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.authz == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		return resp
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	acls, err := b.meta.ACLs(ctx)
	if err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp
	}
	f := security.Filter{ResourceType: req.ResourceType, Name: req.ResourceName, Pattern: req.ResourcePatternType, Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	type resKey struct {
		rt   int8
		name string
		pt   int8
	}
	idx := map[resKey]int{}
	for _, e := range acls {
		if !f.Matches(e) {
			continue
		}
		k := resKey{e.ResourceType, e.ResourceName, e.PatternType}
		i, ok := idx[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(e.ResourceType), e.ResourceName, kmsg.ACLResourcePatternType(e.PatternType)
			resp.Resources = append(resp.Resources, r)
			i = len(resp.Resources) - 1
			idx[k] = i
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = e.Principal, e.Host, kmsg.ACLOperation(e.Operation), kmsg.ACLPermissionType(e.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp
}

// authorizeDescribeACLs is the ACL rule of DescribeACLs.
func authorizeDescribeACLs(a access, r *kmsg.DescribeACLsRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.cluster(opDescribe) {
		resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = errClusterAuthz
		return resp, nil
	}
	return nil, nil
}
