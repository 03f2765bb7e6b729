package broker

// DescribeAcls, versions 0-3. v1 adds resource pattern types (prefixed);
// v2 is flexible; v3 adds the user resource type (not served). Needs
// DESCRIBE on the cluster.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// aclFilter selects ACL entries, as DescribeAcls and DeleteAcls do: nil
// strings and the ANY codes match everything; pattern MATCH selects the
// entries that apply to the named resource.
type aclFilter struct {
	rt      kmsg.ACLResourceType
	name    *string
	pattern kmsg.ACLResourcePatternType
	princ   *string
	host    *string
	op      kmsg.ACLOperation
	perm    kmsg.ACLPermissionType
}

func (f aclFilter) matches(e metastore.ACL) bool {
	if f.rt != kmsg.ACLResourceTypeAny && int8(f.rt) != e.ResourceType {
		return false
	}
	pt := kmsg.ACLResourcePatternType(e.PatternType)
	switch f.pattern {
	case kmsg.ACLResourcePatternTypeAny:
		if f.name != nil && *f.name != e.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.name != nil {
			n := *f.name
			ok := (pt == kmsg.ACLResourcePatternTypeLiteral && (e.ResourceName == n || e.ResourceName == "*")) ||
				(pt == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(n, e.ResourceName))
			if !ok {
				return false
			}
		}
	default:
		if pt != f.pattern || (f.name != nil && *f.name != e.ResourceName) {
			return false
		}
	}
	return (f.princ == nil || *f.princ == e.Principal) &&
		(f.host == nil || *f.host == e.Host) &&
		(f.op == kmsg.ACLOperationAny || int8(f.op) == e.Operation) &&
		(f.perm == kmsg.ACLPermissionTypeAny || int8(f.perm) == e.Permission)
}

func (b *Broker) handleDescribeACLs(cc *clientConn, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.authz == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		return resp
	}
	if !b.allowed(cc, opDescribe, resCluster, clusterName) {
		resp.ErrorCode = errClusterAuthz
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
	f := aclFilter{req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType}
	type resKey struct {
		rt   int8
		name string
		pt   int8
	}
	idx := map[resKey]int{}
	for _, e := range acls {
		if !f.matches(e) {
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
