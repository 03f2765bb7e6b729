package broker

// SyncGroup, versions 0-5: the leader hands in the assignment, the others
// wait for theirs; v5 checks the protocol type and name.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(14, 0, 5, later(handleSyncGroup), authorizeSyncGroup) }

func handleSyncGroup(b *Broker, cc *clientConn, req *kmsg.SyncGroupRequest) func() kmsg.Response {
	wait := b.coord.Sync(cc.ctx, req)
	return func() kmsg.Response { return wait() }
}

// authorizeSyncGroup is the ACL rule of SyncGroup.
func authorizeSyncGroup(a access, r *kmsg.SyncGroupRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	return nil, nil
}
