package broker

// OffsetFetch, versions 1-8: one group (v1-7) or many at once (v8+).

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleOffsetFetch(cc *clientConn, req *kmsg.OffsetFetchRequest) kmsg.Response {
	return b.coord.FetchOffsets(cc.ctx, req)
}
