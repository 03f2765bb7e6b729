package broker

// OffsetCommit, versions 2-8: fenced by generation and member (and
// instance id, v7+); v8+ are flexible. The group coordinator does the work.

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleOffsetCommit(cc *clientConn, req *kmsg.OffsetCommitRequest) kmsg.Response {
	return b.coord.Commit(cc.ctx, req)
}
