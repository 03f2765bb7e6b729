package broker

// DescribeConfigs, versions 0-4. v1 adds sources and synonyms; v3 config
// types and documentation; v4 is flexible. Topics show every config with
// its effective value; the broker shows its static settings, read-only.

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
)

func init() { register(32, 0, 4, answer(handleDescribeConfigs), authorizeDescribeConfigs) }

func handleDescribeConfigs(b *Broker, cc *clientConn, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		want := func(name string) bool { return rr.ConfigNames == nil || slices.Contains(rr.ConfigNames, name) }
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			ts := b.cat.Snapshot().Topic(rr.ResourceName)
			if ts == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if topic.ValidateName(rr.ResourceName) != nil {
					sr.ErrorCode = kerr.InvalidTopicException.Code
				}
				break
			}
			for _, e := range b.defaults.Describe(ts.Meta.Configs) {
				if !want(e.Name) {
					continue
				}
				source := kmsg.ConfigSourceDefaultConfig
				if !e.IsDefault {
					source = kmsg.ConfigSourceDynamicTopicConfig
				}
				sr.Configs = append(sr.Configs, describedConfig(req, e.Name, e.Value, e.Doc, kmsg.ConfigType(e.Kind), source, e.IsDefault, false))
			}
		case kmsg.ConfigResourceTypeBroker:
			id, err := strconv.ParseInt(rr.ResourceName, 10, 32)
			own := rr.ResourceName == "" || id == int64(b.cfg.NodeID)
			if !own && (err != nil || id < 0) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr("unknown broker " + rr.ResourceName)
				break
			}
			if own {
				id = int64(b.cfg.NodeID)
				for _, c := range brokerConfigs(b) {
					if want(c.name) {
						sr.Configs = append(sr.Configs, describedConfig(req, c.name, c.value, c.doc, c.kind, kmsg.ConfigSourceStaticBrokerConfig, false, true))
					}
				}
			}
			// Dynamic configs live in the metastore: any broker answers for
			// any broker id.
			ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
			dyn, set, err := b.admin.describeDynamicBrokerConfigs(ctx, int32(id))
			cancel()
			if err != nil {
				sr.ErrorCode, sr.ErrorMessage = errCodeOf(err), errorMessage(err)
				break
			}
			for _, c := range dyn {
				if want(c.name) {
					source := kmsg.ConfigSourceDefaultConfig
					if set {
						source = kmsg.ConfigSourceDynamicBrokerConfig
					}
					sr.Configs = append(sr.Configs, describedConfig(req, c.name, c.value, c.doc, c.kind, source, !set, false))
				}
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			describeGroupConfigs(b, req, rr, &sr, want)
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr("only topic, broker and group configs can be described")
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

func describedConfig(req *kmsg.DescribeConfigsRequest, name, value, doc string, kind kmsg.ConfigType, source kmsg.ConfigSource, isDefault, readOnly bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value = name, kmsg.StringPtr(value)
	c.IsDefault, c.ReadOnly = isDefault, readOnly
	c.Source, c.ConfigType = source, kind
	if req.IncludeDocumentation {
		c.Documentation = kmsg.StringPtr(doc)
	}
	if req.IncludeSynonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = name, kmsg.StringPtr(value), source
		c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn}
	}
	return c
}

type brokerConfig struct {
	name, value, doc string
	kind             kmsg.ConfigType
}

func brokerConfigs(b *Broker) []brokerConfig {
	return []brokerConfig{
		{"auto.create.topics.enable", strconv.FormatBool(b.cfg.AutoCreateTopics), "Whether Metadata requests create unknown topics.", kmsg.ConfigTypeBoolean},
		{"broker.id", strconv.Itoa(int(b.cfg.NodeID)), "This broker's node id.", kmsg.ConfigTypeInt},
		{"default.replication.factor", strconv.Itoa(int(b.cfg.DefaultReplicationFactor)), "Replication factor of auto-created topics and of topics created with -1.", kmsg.ConfigTypeInt},
		{"num.partitions", strconv.Itoa(int(b.cfg.DefaultPartitions)), "Partition count of auto-created topics.", kmsg.ConfigTypeInt},
		{"socket.request.max.bytes", strconv.Itoa(int(b.cfg.MaxRequestBytes)), "The largest request frame accepted.", kmsg.ConfigTypeInt},
		{"max.connections", strconv.Itoa(b.limits.max), "Connections of all listeners together; at the cap listeners wait for one to close (0: none).", kmsg.ConfigTypeInt},
		{"max.connections.per.ip", strconv.Itoa(b.cfg.MaxConnectionsPerIP), "Connections from one address; more are closed (0: none).", kmsg.ConfigTypeInt},
		{"connections.max.idle.ms", strconv.FormatInt(b.cfg.ConnectionsMaxIdle.Milliseconds(), 10), "Idle connections are closed after this long (0: never).", kmsg.ConfigTypeLong},
		{"queued.max.request.bytes", strconv.FormatInt(b.cfg.QueuedMaxRequestBytes, 10), "Request bytes held at once; further frames wait (0: no cap).", kmsg.ConfigTypeLong},
		{"fetch.max.bytes", strconv.Itoa(int(b.cfg.FetchMaxBytes)), "Record bytes of one Fetch response, whatever it asks.", kmsg.ConfigTypeInt},
	}
}

// authorizeDescribeConfigs is the ACL rule of DescribeConfigs.
func authorizeDescribeConfigs(a access, r *kmsg.DescribeConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Resources, func(res *kmsg.DescribeConfigsRequestResource) bool {
		return a.configAllowed(opDescribeConfigs, res.ResourceType, res.ResourceName)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DescribeConfigsResponse)
		for _, res := range denied {
			rr.Resources = append(rr.Resources, kmsg.DescribeConfigsResponseResource{ErrorCode: configAuthzCode(res.ResourceType), ResourceType: res.ResourceType, ResourceName: res.ResourceName})
		}
	}
}
