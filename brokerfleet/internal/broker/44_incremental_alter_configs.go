package broker

// IncrementalAlterConfigs, versions 0-1. v1 is flexible. SET and DELETE
// apply to any topic config; APPEND and SUBTRACT to list configs.

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
)

func init() {
	register(44, 0, 1, answer(handleIncrementalAlterConfigs), authorizeIncrementalAlterConfigs)
}

func handleIncrementalAlterConfigs(b *Broker, cc *clientConn, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		isBroker := rr.ResourceType == kmsg.ConfigResourceTypeBroker || rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig
		err := alterResource(b, rr.ResourceType, rr.ResourceName, func(m map[string]string) error {
			for _, c := range rr.Configs {
				if isBroker {
					if err := applyBrokerIncremental(m, c); err != nil {
						return err
					}
					continue
				}
				if err := applyIncremental(b.defaults, m, c); err != nil {
					return err
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

func applyIncremental(defaults topic.Defaults, m map[string]string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	def, ok := topic.Lookup(c.Name)
	if !ok {
		return coded(kerr.InvalidConfig, "unknown topic config %q", c.Name)
	}
	value := ""
	if c.Value != nil {
		value = *c.Value
	}
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		if c.Value == nil {
			return coded(kerr.InvalidConfig, "config %q: SET needs a value", c.Name)
		}
		m[c.Name] = value
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(m, c.Name)
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		if def.Kind != topic.KindList {
			return coded(kerr.InvalidConfig, "config %q is not a list; APPEND and SUBTRACT apply to lists", c.Name)
		}
		cur, ok := m[c.Name]
		if !ok {
			cur = defaults[c.Name]
		}
		items := splitList(cur)
		for _, v := range splitList(value) {
			if c.Op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(items, v) {
				items = append(items, v)
			}
			if c.Op == kmsg.IncrementalAlterConfigOpSubtract {
				items = slices.DeleteFunc(items, func(s string) bool { return s == v })
			}
		}
		m[c.Name] = strings.Join(items, ",")
	default:
		return coded(kerr.InvalidRequest, "config %q: unknown operation %d", c.Name, c.Op)
	}
	return nil
}

// applyBrokerIncremental applies SET or DELETE to a broker's dynamic
// configs; which names and values are allowed is checked after.
func applyBrokerIncremental(m map[string]string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		if c.Value == nil {
			return coded(kerr.InvalidConfig, "config %q: SET needs a value", c.Name)
		}
		m[c.Name] = *c.Value
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(m, c.Name)
	default:
		return coded(kerr.InvalidConfig, "broker config %q: only SET and DELETE apply", c.Name)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// authorizeIncrementalAlterConfigs is the ACL rule of IncrementalAlterConfigs.
func authorizeIncrementalAlterConfigs(a access, r *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Resources, func(res *kmsg.IncrementalAlterConfigsRequestResource) bool {
		return a.configAllowed(opAlterConfigs, res.ResourceType, res.ResourceName)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, res := range denied {
			rr.Resources = append(rr.Resources, kmsg.IncrementalAlterConfigsResponseResource{ErrorCode: configAuthzCode(res.ResourceType), ResourceType: res.ResourceType, ResourceName: res.ResourceName})
		}
	}
}
