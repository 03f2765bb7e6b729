package trigger

// Queue mode (Config.Queue, STRATA_QUEUE=true): the trigger reads through
// a share group (KIP-932) instead of a consumer group and acknowledges
// every record by itself from the function's answer, in the shape of
// AWS's partial batch responses:
//
//	{"batchItemFailures": [{"itemIdentifier": "orders-3:1042"}, ...]}
//
// an item naming a record as "topic-partition:offset" (or as the object
// {"partition": "orders-3", "offset": 1042}). Records not named are
// ACCEPTed; named ones, and all of a batch whose invocation failed, are
// RELEASEd for redelivery, or REJECTed once delivered Policy.MaxAttempts
// times (the share group archives them, and copies them to its
// dead-letter topic when it has one: errors.deadletterqueue.enable). So a
// failing record holds up only itself: the others of its partition go on
// to other invocations while it waits for its redelivery.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/functions/internal/kafkaevent"
)

// batchResponse is a partial batch response.
type batchResponse struct {
	BatchItemFailures []struct {
		ItemIdentifier json.RawMessage `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
}

// ItemID is how a queue-mode function names a failed record.
func ItemID(r *kgo.Record) string {
	return kafkaevent.Key(r.Topic, r.Partition) + ":" + strconv.FormatInt(r.Offset, 10)
}

// failedItems parses a function's answer into the ids of the records it
// failed; an answer that is no partial batch response fails none.
func failedItems(payload []byte) map[string]bool {
	var resp batchResponse
	if len(payload) == 0 || json.Unmarshal(payload, &resp) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		var s string
		if json.Unmarshal(f.ItemIdentifier, &s) == nil {
			out[s] = true
			continue
		}
		var obj struct {
			Partition string `json:"partition"`
			Offset    int64  `json:"offset"`
		}
		if json.Unmarshal(f.ItemIdentifier, &obj) == nil && obj.Partition != "" {
			out[obj.Partition+":"+strconv.FormatInt(obj.Offset, 10)] = true
		}
	}
	return out
}

// queueOpts are the client options of queue mode.
func queueOpts(cfg Config) []kgo.Opt {
	return []kgo.Opt{kgo.ShareGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topics...), kgo.ShareMaxRecords(int32(cfg.BatchSize))}
}

// deliverQueue invokes the function with recs (payload-sized pieces) and
// acknowledges each record from the answer.
func (t *Trigger) deliverQueue(ctx context.Context, recs []*kgo.Record) error {
	payload, err := json.Marshal(kafkaevent.New(recs, strings.Join(t.cfg.Bootstrap, ","), t.cfg.EventSourceARN))
	if err != nil {
		return fmt.Errorf("trigger: encode event: %w", err)
	}
	if len(payload) > t.cfg.MaxPayload && len(recs) > 1 {
		mid := len(recs) / 2
		if err := t.deliverQueue(ctx, recs[:mid]); err != nil {
			return err
		}
		return t.deliverQueue(ctx, recs[mid:])
	}
	var failed map[string]bool
	all := false
	if len(payload) > t.cfg.MaxPayload {
		all = true // one record over the limit: it can never be delivered
	} else {
		t.stats.Invocations++
		out, err := kafkaevent.Invoke(ctx, t.inv, t.cfg.Function, payload)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			t.stats.Failures++
			all = true
		}
		failed = failedItems(out)
	}
	for _, r := range recs {
		switch {
		case !all && !failed[ItemID(r)]:
			r.Ack(kgo.AckAccept)
		case int(r.DeliveryCount()) >= t.cfg.Policy.MaxAttempts || len(payload) > t.cfg.MaxPayload:
			r.Ack(kgo.AckReject)
			t.stats.Routed++
		default:
			r.Ack(kgo.AckRelease)
		}
	}
	if failed != nil && len(failed) > 0 {
		t.stats.Failures++
	}
	return t.cl.FlushAcks(ctx)
}
