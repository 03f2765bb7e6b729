package broker

// AlterConfigs, versions 0-2. v2 is flexible. A topic's overrides are
// replaced by exactly the configs given (Kafka's non-incremental
// semantics). Broker configs are static flags and cannot be altered.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(33, 0, 2, answer(handleAlterConfigs), authorizeAlterConfigs) }

func handleAlterConfigs(b *Broker, cc *clientConn, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := alterResource(b, rr.ResourceType, rr.ResourceName, func(m map[string]string) error {
			clear(m)
			for _, c := range rr.Configs {
				if c.Value != nil {
					m[c.Name] = *c.Value
				}
			}
			return nil
		}, req.ValidateOnly)
		if err != nil {
			sr.ErrorCode, sr.ErrorMessage = errCodeOf(err), errorMessage(err)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	if !req.ValidateOnly {
		syncIfAny(b, cc, len(resp.Resources), func(i int) int16 { return resp.Resources[i].ErrorCode })
	}
	return resp
}

// alterResource edits the config overrides of a topic resource, the only
// kind that can be altered (AlterConfigs and IncrementalAlterConfigs).
func alterResource(b *Broker, t kmsg.ConfigResourceType, name string, edit func(map[string]string) error, validateOnly bool) error {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
		defer cancel()
		return b.admin.setTopicConfigs(ctx, name, edit, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		return b.admin.alterBrokerConfigs(name, edit, validateOnly)
	case kmsg.ConfigResourceTypeGroupConfig:
		ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
		defer cancel()
		return b.groupCfg.alter(ctx, name, edit, validateOnly)
	}
	return coded(kerr.InvalidRequest, "resource type %v cannot be altered; only topics", t)
}

// authorizeAlterConfigs is the ACL rule of AlterConfigs.
func authorizeAlterConfigs(a access, r *kmsg.AlterConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Resources, func(res *kmsg.AlterConfigsRequestResource) bool {
		return a.configAllowed(opAlterConfigs, res.ResourceType, res.ResourceName)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.AlterConfigsResponse)
		for _, res := range denied {
			rr.Resources = append(rr.Resources, kmsg.AlterConfigsResponseResource{ErrorCode: configAuthzCode(res.ResourceType), ResourceType: res.ResourceType, ResourceName: res.ResourceName})
		}
	}
}
