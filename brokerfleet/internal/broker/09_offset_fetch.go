package broker

// OffsetFetch, versions 1-8: one group (v1-7) or many at once (v8+).

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(9, 1, 8, answer(handleOffsetFetch), authorizeOffsetFetch) }

func handleOffsetFetch(b *Broker, cc *clientConn, req *kmsg.OffsetFetchRequest) kmsg.Response {
	return b.coord.FetchOffsets(cc.ctx, req)
}

// authorizeOffsetFetch is the ACL rule of OffsetFetch.
func authorizeOffsetFetch(a access, r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	return authorizeOffsetFetchGroups(a, r)
}
