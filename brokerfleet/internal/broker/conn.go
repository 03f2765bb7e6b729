package broker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/wire"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pendingDepth bounds the requests decoded ahead of their responses on one
// connection; a full queue stops the reader, pushing back on the client.
const pendingDepth = 32

// pending is a response slot, written in request order.
type pending struct {
	corr int32
	resp kmsg.Response        // ready response, or
	wait func() kmsg.Response // run by the writer, in order, to produce it
	raw  []byte               // a pre-encoded frame (unsupported version)
	last bool                 // close the connection after this one

	key   int16        // the request's API key, for metrics
	req   kmsg.Request // the request (nil if it could not be parsed)
	start time.Time    // when its frame was read
}

// clientConn is what handlers know about the connection.
type clientConn struct {
	ctx      context.Context // cancelled when the connection or broker closes
	clientID string
	remote   string
	sec      *security.Session // nil when security is off
}

func (b *Broker) serveConn(nc net.Conn) {
	var sec *security.Session
	if b.secured {
		nc, sec = b.cfg.Security.Accept(nc)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	queue := make(chan pending, pendingDepth)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		b.writeResponses(nc, queue, cancel)
	}()
	defer func() {
		close(queue)
		<-writerDone
		nc.Close()
	}()

	cc := &clientConn{ctx: ctx, remote: nc.RemoteAddr().String(), sec: sec}
	if sec != nil && !sec.Start(ctx, nc, b.log) {
		return
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	for {
		frame, err := wire.ReadFrame(br, cc.sec.FrameLimit(b.cfg.MaxRequestBytes))
		start := time.Now()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				b.log.Debug("closing connection", "remote", cc.remote, "err", err)
			}
			return
		}
		if cc.sec.RawTokens() {
			p := b.rawSASLToken(cc, frame, start)
			select {
			case queue <- p:
			case <-ctx.Done():
				return
			}
			if p.last {
				return
			}
			continue
		}
		hdr, req, err := wire.ParseRequest(frame, supportedVersions)
		if err != nil {
			b.log.Debug("closing connection on malformed request", "remote", cc.remote, "err", err)
			return
		}
		cc.clientID = hdr.ClientID
		p := pending{corr: hdr.CorrelationID, key: hdr.Key, req: req, start: start}
		b.metrics.Received(hdr.Key)
		switch {
		case req == nil && hdr.Key == 18:
			// KIP-511: answer an ApiVersions we cannot parse with v0,
			// UNSUPPORTED_VERSION and our ranges, so the client retries.
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ErrorCode = 35
			resp.ApiKeys = apiVersions
			p.resp = resp
		case req == nil:
			p.raw = wire.AppendUnsupported(nil, hdr.CorrelationID)
			p.last = true
		default:
			if !b.dispatchSecured(cc, req, &p) {
				b.metrics.Responded(p.key, req, nil, time.Since(start))
				continue // acks=0 produce: no response
			}
		}
		select {
		case queue <- p:
		case <-ctx.Done():
			return
		}
		if p.last {
			return
		}
	}
}

// dispatch runs the handler for req, filling p. It returns false when the
// request gets no response.
func (b *Broker) dispatch(cc *clientConn, req kmsg.Request, p *pending) bool {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		p.wait = b.handleProduce(cc, r)
		return p.wait != nil
	case *kmsg.FetchRequest:
		p.wait = b.handleFetch(cc, r)
	case *kmsg.ListOffsetsRequest:
		p.resp = b.handleListOffsets(r)
	case *kmsg.MetadataRequest:
		p.resp = b.handleMetadata(r)
	case *kmsg.ApiVersionsRequest:
		p.resp = b.handleApiVersions(r)
	case *kmsg.CreateTopicsRequest:
		p.resp = b.handleCreateTopics(r)
	case *kmsg.DeleteTopicsRequest:
		p.resp = b.handleDeleteTopics(r)
	case *kmsg.DeleteRecordsRequest:
		p.resp = b.handleDeleteRecords(r)
	case *kmsg.InitProducerIDRequest:
		p.resp = b.handleInitProducerID(r)
	case *kmsg.OffsetForLeaderEpochRequest:
		p.resp = b.handleOffsetForLeaderEpoch(r)
	case *kmsg.DescribeConfigsRequest:
		p.resp = b.handleDescribeConfigs(r)
	case *kmsg.AlterConfigsRequest:
		p.resp = b.handleAlterConfigs(r)
	case *kmsg.CreatePartitionsRequest:
		p.resp = b.handleCreatePartitions(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		p.resp = b.handleIncrementalAlterConfigs(r)
	case *kmsg.DescribeClusterRequest:
		p.resp = b.handleDescribeCluster(r)
	case *kmsg.OffsetCommitRequest:
		p.resp = b.handleOffsetCommit(cc, r)
	case *kmsg.OffsetFetchRequest:
		p.resp = b.handleOffsetFetch(cc, r)
	case *kmsg.FindCoordinatorRequest:
		p.resp = b.handleFindCoordinator(r)
	case *kmsg.JoinGroupRequest:
		p.wait = b.handleJoinGroup(cc, r)
	case *kmsg.HeartbeatRequest:
		p.resp = b.handleHeartbeat(cc, r)
	case *kmsg.LeaveGroupRequest:
		p.resp = b.handleLeaveGroup(cc, r)
	case *kmsg.SyncGroupRequest:
		p.wait = b.handleSyncGroup(cc, r)
	case *kmsg.DescribeGroupsRequest:
		p.resp = b.handleDescribeGroups(cc, r)
	case *kmsg.ListGroupsRequest:
		p.resp = b.handleListGroups(cc, r)
	case *kmsg.DeleteGroupsRequest:
		p.resp = b.handleDeleteGroups(cc, r)
	case *kmsg.OffsetDeleteRequest:
		p.resp = b.handleOffsetDelete(cc, r)
	case *kmsg.ElectLeadersRequest:
		p.resp = b.handleElectLeaders(cc, r)
	case *kmsg.AlterPartitionAssignmentsRequest:
		p.resp = b.handleAlterPartitionReassignments(cc, r)
	case *kmsg.ListPartitionReassignmentsRequest:
		p.resp = b.handleListPartitionReassignments(cc, r)
	default:
		if !b.dispatchSecurityAdmin(cc, req, p) {
			p.raw = wire.AppendUnsupported(nil, p.corr)
			p.last = true
		}
	}
	return true
}

// writeResponses encodes responses in request order. It batches writes
// while more responses are ready.
func (b *Broker) writeResponses(nc net.Conn, queue <-chan pending, cancel context.CancelFunc) {
	bw := bufio.NewWriterSize(nc, 64<<10)
	var buf []byte
	failed := false
	for p := range queue {
		if failed {
			continue // drain so the reader never blocks
		}
		resp := p.resp
		if p.wait != nil {
			resp = p.wait()
		}
		var err error
		fr, isFetch := resp.(*kmsg.FetchResponse)
		var pieces net.Buffers
		if isFetch && p.raw == nil {
			pieces, buf, isFetch = fetchFrame(buf, p.corr, fr)
		}
		if isFetch {
			// Record sets go from the buffers they were read into.
			if err = bw.Flush(); err == nil {
				_, err = pieces.WriteTo(nc)
			}
		} else {
			buf = buf[:0]
			if p.raw != nil {
				buf = append(buf, p.raw...)
			} else {
				buf = wire.AppendResponse(buf, p.corr, resp)
			}
			_, err = bw.Write(buf)
			if err == nil && (len(queue) == 0 || p.last) {
				err = bw.Flush()
			}
		}
		if p.raw != nil {
			resp = nil
		}
		b.metrics.Responded(p.key, p.req, resp, time.Since(p.start))
		if err != nil || p.last {
			failed = true
			cancel()
			nc.Close()
		}
		if cap(buf) > 4<<20 {
			buf = nil // do not pin a large fetch's buffer
		}
	}
}
