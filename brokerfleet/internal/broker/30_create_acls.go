package broker

// CreateAcls, versions 0-3. v1 adds resource pattern types (prefixed); v2
// is flexible. Needs ALTER on the cluster; answers SECURITY_DISABLED when
// ACLs are off.

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// checkACL validates an entry to store.
func checkACL(e metastore.ACL) error {
	switch kmsg.ACLResourceType(e.ResourceType) {
	case resTopic, resGroup, resTxnID:
		if e.ResourceName == "" {
			return fmt.Errorf("empty resource name")
		}
	case resCluster:
		if e.ResourceName != clusterName {
			return fmt.Errorf("the cluster resource is named %q", clusterName)
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

func (b *Broker) handleCreateACLs(cc *clientConn, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	code := int16(0)
	switch {
	case b.authz == nil:
		code = kerr.SecurityDisabled.Code
	case !b.allowed(cc, opAlter, resCluster, clusterName):
		code = errClusterAuthz
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
			if err := checkACL(e); err != nil {
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
	return resp
}
