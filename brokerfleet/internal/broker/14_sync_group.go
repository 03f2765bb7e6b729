package broker

// SyncGroup, versions 0-5: the leader hands in the assignment, the others
// wait for theirs; v5 checks the protocol type and name.

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleSyncGroup(cc *clientConn, req *kmsg.SyncGroupRequest) func() kmsg.Response {
	wait := b.coord.Sync(cc.ctx, req)
	return func() kmsg.Response { return wait() }
}
