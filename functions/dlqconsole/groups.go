package dlqconsole

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The consumer group pages: the list (ListGroups, then lag through
// OffsetFetch and ListOffsets), and one group: members, assignments, lag
// per partition, and lag over time drawn from the coordinator's lag
// history. The history is the broker's own (it samples every group it
// coordinates every -group-stats-interval), read from the coordinator at
// its Kafka host and the schema registry's port and scheme:
// GET /strata/v1/groups/{group}/lag, with the registry's credentials.

// GroupRow is one group in the list.
type GroupRow struct {
	Group, State, Protocol, ProtocolType string
	Coordinator                          int32
	Members                              int
	Lag                                  int64 // total; -1: unknown
	Err                                  string
}

// GroupsPage is the group list.
type GroupsPage struct {
	Groups    []GroupRow
	Truncated int
}

func (c *Console) groupsPage(ctx context.Context) (GroupsPage, error) {
	lg, err := c.adm.ListGroups(ctx)
	if err != nil {
		return GroupsPage{}, kafkaError("list groups", err)
	}
	names := lg.Groups()
	slices.Sort(names)
	var p GroupsPage
	if len(names) > maxListed {
		p.Truncated = len(names) - maxListed
		names = names[:maxListed]
	}
	if len(names) == 0 {
		return p, nil
	}
	lags, err := c.adm.Lag(ctx, names...)
	if err != nil {
		return p, kafkaError("describe groups", err)
	}
	for _, n := range names {
		l := lags[n]
		row := GroupRow{Group: n, State: l.State, Protocol: l.Protocol, ProtocolType: l.ProtocolType,
			Coordinator: l.Coordinator.NodeID, Members: len(l.Members), Lag: totalLag(l.Lag)}
		if err := l.Error(); err != nil {
			row.Err = err.Error()
		}
		if lg[n].GroupType == "consumer" && (l.State == "Dead" || l.State == "") {
			// A consumer-protocol group: ConsumerGroupDescribe (one request
			// per such group; lists stop at maxListed).
			if cp, ok, err := c.consumerGroup(ctx, n); err == nil && ok {
				row = GroupRow{Group: n, State: cp.State, Protocol: cp.Protocol, ProtocolType: cp.ProtocolType,
					Coordinator: cp.Coordinator, Members: len(cp.Members), Lag: cp.TotalLag}
			}
		}
		p.Groups = append(p.Groups, row)
	}
	return p, nil
}

func totalLag(gl kadm.GroupLag) int64 {
	var t int64
	for _, ps := range gl {
		for _, l := range ps {
			if l.Lag < 0 {
				return -1
			}
			t += l.Lag
		}
	}
	return t
}

// MemberRow is one member of a group, with its assignment.
type MemberRow struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Assigned                                   string // topic: partitions; ...
}

// LagRow is one partition's committed offset and lag.
type LagRow struct {
	Topic      string
	Partition  int32
	Committed  int64 // -1: none
	End        int64
	Lag        int64 // -1: unknown
	Member     string
	ClientHost string
	Err        string
}

// GroupPage is one group.
type GroupPage struct {
	Group, State, Protocol, ProtocolType string
	Coordinator                          int32
	Members                              []MemberRow
	Lag                                  []LagRow
	TotalLag                             int64
	Chart                                template.HTML
	Samples                              int    // the most samples of any partition in the history
	HistoryNote                          string // why there is no chart, or what it shows
}

func (c *Console) groupPage(ctx context.Context, group string) (GroupPage, error) {
	if group == "" || len(group) > 1024 {
		return GroupPage{}, errorf(http.StatusBadRequest, "invalid group name %q", group)
	}
	lags, err := c.adm.Lag(ctx, group)
	if err != nil {
		return GroupPage{}, kafkaError("describe group "+group, err)
	}
	l, ok := lags[group]
	if !ok || l.State == "Dead" || (l.State == "" && l.DescribeErr != nil) {
		p, ok, err := c.consumerGroup(ctx, group)
		if err != nil {
			return GroupPage{}, err
		}
		if !ok {
			return GroupPage{}, errorf(http.StatusNotFound, "unknown consumer group %q", group)
		}
		c.lagChartOf(ctx, &p, kadm.BrokerDetail{NodeID: p.Coordinator, Host: c.hostOf(ctx, p.Coordinator)})
		return p, nil
	}
	if l.DescribeErr != nil {
		return GroupPage{}, kafkaError("describe group "+group, l.DescribeErr)
	}
	p := GroupPage{Group: group, State: l.State, Protocol: l.Protocol, ProtocolType: l.ProtocolType,
		Coordinator: l.Coordinator.NodeID, TotalLag: totalLag(l.Lag)}
	for _, m := range l.Members {
		row := MemberRow{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		if m.InstanceID != nil {
			row.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			var parts []string
			for _, t := range a.Topics {
				ps := slices.Clone(t.Partitions)
				slices.Sort(ps)
				parts = append(parts, t.Topic+": "+ids(ps))
			}
			slices.Sort(parts)
			row.Assigned = strings.Join(parts, "; ")
		}
		p.Members = append(p.Members, row)
	}
	for _, ml := range l.Lag.Sorted() {
		row := LagRow{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At, End: ml.End.Offset, Lag: ml.Lag}
		if ml.Member != nil {
			row.Member, row.ClientHost = ml.Member.ClientID, ml.Member.ClientHost
		}
		if ml.Err != nil {
			row.Err = ml.Err.Error()
		}
		p.Lag = append(p.Lag, row)
	}
	c.lagChartOf(ctx, &p, l.Coordinator)
	return p, nil
}

// hostOf is broker id's Kafka host, "" when unknown.
func (c *Console) hostOf(ctx context.Context, id int32) string {
	md, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		return ""
	}
	for _, b := range md.Brokers {
		if b.NodeID == id {
			return b.Host
		}
	}
	return ""
}

// lagHistory is the coordinator's answer (brokerfleet/laghttp.go).
type lagHistory struct {
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Samples   []struct {
			AtMs      int64 `json:"atMs"`
			Committed int64 `json:"committed"`
			End       int64 `json:"end"`
		} `json:"samples"`
	} `json:"partitions"`
}

// lagChartOf draws p's lag over time from the coordinator's history: the
// group's total and, for up to seven partitions, each one's.
func (c *Console) lagChartOf(ctx context.Context, p *GroupPage, coord kadm.BrokerDetail) {
	if c.opts.RegistryURL == "" {
		p.HistoryNote = "no lag history: the console has no schema registry URL, beside which the brokers serve it"
		return
	}
	h, err := c.fetchLagHistory(ctx, p.Group, coord.Host)
	if err != nil {
		p.HistoryNote = "no lag history: " + err.Error()
		return
	}
	total := map[int64]int64{}
	var series []ChartSeries
	for _, part := range h.Partitions {
		s := ChartSeries{Name: fmt.Sprintf("%s/%d", part.Topic, part.Partition)}
		for _, x := range part.Samples {
			lag := sampleLag(x.Committed, x.End)
			if lag < 0 {
				continue
			}
			s.Points = append(s.Points, ChartPoint{At: time.UnixMilli(x.AtMs), Value: lag})
			if t := total[x.AtMs]; lag > math.MaxInt64-t {
				total[x.AtMs] = math.MaxInt64
			} else {
				total[x.AtMs] = t + lag
			}
		}
		p.Samples = max(p.Samples, len(s.Points))
		series = append(series, s)
	}
	ts := make([]int64, 0, len(total))
	for t := range total {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	tot := ChartSeries{Name: "total"}
	for _, t := range ts {
		tot.Points = append(tot.Points, ChartPoint{At: time.UnixMilli(t), Value: total[t]})
	}
	all := []ChartSeries{tot}
	if len(series) > 1 {
		all = append(all, series[:min(len(series), chartMaxSeries-1)]...)
	}
	p.Chart = lagChart("Consumer lag of "+p.Group, all)
	if p.Samples == 0 {
		p.HistoryNote = "the coordinator has no samples of this group yet"
	}
}

// sampleLag is a sample's lag: the log end minus the committed offset
// (the whole log end without a commit); -1 when the end is unknown.
func sampleLag(committed, end int64) int64 {
	if end < 0 {
		return -1
	}
	if committed < 0 {
		return end
	}
	return max(0, end-committed)
}

// maxHistoryBytes bounds the coordinator's answer (2048 series of 360
// samples is about 40 MB; a group's is far less).
const maxHistoryBytes = 16 << 20

func (c *Console) fetchLagHistory(ctx context.Context, group, coordHost string) (*lagHistory, error) {
	var h lagHistory
	if err := c.adminGet(ctx, coordHost, "/strata/v1/groups/"+url.PathEscape(group)+"/lag", &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// adminGet asks the broker at host (the registry's port and scheme) for
// the admin endpoint path (brokerfleet/adminhttp.go; escaped) and decodes
// its JSON answer into v.
func (c *Console) adminGet(ctx context.Context, host, path string, v any) error {
	u, err := url.Parse(c.opts.RegistryURL)
	if err != nil {
		return fmt.Errorf("registry URL: %w", err)
	}
	if host != "" {
		if port := u.Port(); port != "" {
			u.Host = net.JoinHostPort(host, port)
		} else {
			u.Host = host
		}
	}
	// path is escaped already (a group may hold '/' or spaces).
	u.RawPath = strings.TrimRight(u.EscapedPath(), "/") + path
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return fmt.Errorf("admin path %q: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return err
	}
	if c.opts.AdminUser != "" {
		req.SetBasicAuth(c.opts.AdminUser, c.opts.AdminPassword)
	}
	resp, err := c.adminHTTP.Do(req)
	if err != nil {
		return fmt.Errorf("ask broker %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHistoryBytes))
	if err != nil {
		return fmt.Errorf("read the answer of %s: %w", u.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		if e.Message == "" {
			e.Message = strconv.Quote(string(body[:min(len(body), 200)]))
		}
		return &adminError{status: resp.StatusCode, msg: fmt.Sprintf("%s answered %d: %s", u.Host, resp.StatusCode, e.Message)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: malformed answer: %w", u.Host, err)
	}
	return nil
}

// adminError is an admin endpoint's error answer.
type adminError struct {
	status int
	msg    string
}

func (e *adminError) Error() string { return e.msg }
