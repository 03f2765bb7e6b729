package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// groupsTestCluster starts an empty Strata broker for one test and returns
// its bootstrap address. Tests create their topics through the admin API.
func groupsTestCluster(t *testing.T) (bootstrap string) {
	t.Helper()
	return brokertest.Start(t).Addr
}

// groupsEnv is a cluster with an admin client for checking what the
// commands did, independently of them.
type groupsEnv struct {
	t         *testing.T
	ctx       context.Context
	bootstrap string
	adm       *kadm.Client
	producer  *kgo.Client
}

func newGroupsEnv(t *testing.T) *groupsEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e := &groupsEnv{t: t, ctx: ctx, bootstrap: groupsTestCluster(t)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	e.producer = cl
	e.adm = kadm.NewClient(cl)
	return e
}

// groups runs `brokerfleet groups VERB -bootstrap ... ARGS...`.
func (e *groupsEnv) groups(verb string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	return runGroupsCmd(append([]string{verb, "-bootstrap", e.bootstrap}, args...)...)
}

func runGroupsCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"groups"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func (e *groupsEnv) createTopic(topic string, partitions int32) {
	e.t.Helper()
	_, err := e.adm.CreateTopic(e.ctx, partitions, 1, nil, topic)
	require.NoError(e.t, err)
}

// produce appends n records to topic/partition; record i has timestamp
// ts(i) if ts is not nil.
func (e *groupsEnv) produce(topic string, partition int32, n int, ts func(i int) time.Time) {
	e.t.Helper()
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte{byte(i)}}
		if ts != nil {
			r.Timestamp = ts(i)
		}
		rs = append(rs, r)
	}
	require.NoError(e.t, e.producer.ProduceSync(e.ctx, rs...).FirstErr())
}

type offsets map[string]map[int32]int64

func (e *groupsEnv) commit(group string, os offsets) {
	e.t.Helper()
	var ko kadm.Offsets
	for t, ps := range os {
		for p, at := range ps {
			ko.AddOffset(t, p, at, -1)
		}
	}
	require.NoError(e.t, e.adm.CommitAllOffsets(e.ctx, group, ko))
}

// committed returns the group's committed offsets as the cluster has them.
func (e *groupsEnv) committed(group string) offsets {
	e.t.Helper()
	resps, err := e.adm.FetchOffsets(e.ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) { // some brokers answer so for a deleted group
		return offsets{}
	}
	require.NoError(e.t, err)
	require.NoError(e.t, resps.Error())
	got := offsets{}
	resps.Each(func(o kadm.OffsetResponse) {
		if o.At < 0 {
			return
		}
		if got[o.Topic] == nil {
			got[o.Topic] = map[int32]int64{}
		}
		got[o.Topic][o.Partition] = o.At
	})
	return got
}

func (e *groupsEnv) endOffsets(topic string) map[int32]int64 {
	e.t.Helper()
	l, err := e.adm.ListEndOffsets(e.ctx, topic)
	require.NoError(e.t, err)
	require.NoError(e.t, l.Error())
	got := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { got[o.Partition] = o.Offset })
	return got
}

// member joins group with a consumer that commits nothing and waits until
// the group is Stable with all wantPartitions assigned. It leaves the group
// when the test ends, or earlier if the caller closes it.
func (e *groupsEnv) member(group string, wantPartitions int, topics ...string) *kgo.Client {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...),
		kgo.ClientID("groupscmd-member"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(e.t, err)
	e.t.Cleanup(cl.Close)
	go func() { // consume so the client behaves like a real member
		for !cl.PollFetches(e.ctx).IsClientClosed() && e.ctx.Err() == nil {
		}
	}()
	require.Eventually(e.t, func() bool {
		ds, err := e.adm.DescribeGroups(e.ctx, group)
		if err != nil {
			return false
		}
		d := ds[group]
		n := 0
		d.AssignedPartitions().Each(func(string, int32) { n++ })
		return d.State == "Stable" && len(d.Members) == 1 && n == wantPartitions
	}, 20*time.Second, 50*time.Millisecond, "group %s never became Stable with %d partitions", group, wantPartitions)
	return cl
}

// firstOffsets joins group as a new consumer of topic and returns the
// offset of the first record it receives from each partition in want.
func (e *groupsEnv) firstOffsets(group, topic string, want []int32) map[int32]int64 {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(e.t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	got := map[int32]int64{}
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		require.NoError(e.t, ctx.Err(), "consumed only %v of partitions %v", got, want)
		fs.EachError(func(t string, p int32, err error) { require.NoError(e.t, err, "fetch %s/%d", t, p) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := got[r.Partition]; !ok {
				got[r.Partition] = r.Offset
			}
		})
	}
	return got
}

// tableRows returns the whitespace-separated fields of the lines of out
// whose first field is first.
func tableRows(out, first string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			rows = append(rows, f)
		}
	}
	return rows
}

func TestGroupsList(t *testing.T) {
	t.Parallel()
	e := newGroupsEnv(t)
	e.createTopic("orders", 2)
	e.produce("orders", 0, 10, nil)
	e.produce("orders", 1, 6, nil)
	e.commit("billing", offsets{"orders": {0: 4, 1: 6}}) // lag 6 + 0
	e.commit("audit", offsets{"orders": {0: 10}})        // lag 0
	e.member("live", 2, "orders")                        // no commits

	code, out, errOut := e.groups("list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "GROUP")
	require.Contains(t, out, "PROTOCOL-TYPE")
	require.Equal(t, [][]string{{"billing", "classic", "Empty", "-", "0", "6"}}, tableRows(out, "billing"))
	require.Equal(t, [][]string{{"audit", "classic", "Empty", "-", "0", "0"}}, tableRows(out, "audit"))
	require.Equal(t, [][]string{{"live", "classic", "Stable", "consumer", "1", "-"}}, tableRows(out, "live"))

	code, out, errOut = e.groups("list", "-state", "stable")
	require.Equal(t, 0, code, errOut)
	require.Len(t, tableRows(out, "live"), 1)
	require.Empty(t, tableRows(out, "billing"))
	require.Empty(t, tableRows(out, "audit"))

	code, out, errOut = e.groups("list", "-json", "-state", "EMPTY,dead")
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Groups []listedGroupJSON `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	six, zero := int64(6), int64(0)
	require.Equal(t, []listedGroupJSON{
		{Group: "audit", Type: "classic", State: "Empty", Lag: &zero},
		{Group: "billing", Type: "classic", State: "Empty", Lag: &six},
	}, doc.Groups)

	code, out, _ = e.groups("list", "-state", "Rebalancing")
	require.Equal(t, 2, code)
	require.Empty(t, out)
}

func TestGroupsBootstrapFromEnv(t *testing.T) {
	e := newGroupsEnv(t)
	e.createTopic("orders", 1)
	e.commit("billing", offsets{"orders": {0: 0}})
	t.Setenv("STRATA_BOOTSTRAP", e.bootstrap)
	code, out, errOut := runGroupsCmd("list")
	require.Equal(t, 0, code, errOut)
	require.Len(t, tableRows(out, "billing"), 1)

	t.Setenv("STRATA_BOOTSTRAP", "no-port")
	code, _, errOut = runGroupsCmd("list")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "STRATA_BOOTSTRAP")
}

func TestGroupsTimeout(t *testing.T) {
	t.Parallel()
	// A broker that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	start := time.Now()
	code, _, errOut := runGroupsCmd("list", "-bootstrap", ln.Addr().String(), "-timeout", "300ms")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no answer from "+ln.Addr().String()+" within 300ms (flag -timeout)")
	require.Less(t, time.Since(start), 5*time.Second)

	// Nothing listening: the dial error, at once.
	code, _, errOut = runGroupsCmd("describe", "g", "-bootstrap", "127.0.0.1:1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "connection refused")
}

func TestGroupsDescribe(t *testing.T) {
	t.Parallel()
	e := newGroupsEnv(t)
	e.createTopic("orders", 3)
	e.createTopic("payments", 1)
	e.produce("orders", 0, 7, nil)
	e.produce("orders", 1, 5, nil)
	e.produce("orders", 2, 4, nil)
	e.produce("payments", 0, 3, nil)
	e.commit("billing", offsets{"orders": {0: 2, 1: 5}})
	e.member("billing", 4, "orders", "payments")

	// The same numbers, computed here straight from kadm.
	lags, err := e.adm.Lag(e.ctx, "billing")
	require.NoError(t, err)
	require.NoError(t, lags.Error())
	want := lags["billing"]
	require.Len(t, want.Members, 1)
	memberID := want.Members[0].MemberID

	code, out, errOut := e.groups("describe", "billing", "-json")
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Groups []describedGroupJSON `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Groups, 1)
	g := doc.Groups[0]
	require.Equal(t, "billing", g.Group)
	require.Equal(t, "Stable", g.State)
	require.Equal(t, "consumer", g.ProtocolType)
	require.NotEmpty(t, g.Protocol)
	require.NotNil(t, g.Coordinator)
	require.Equal(t, want.Coordinator.NodeID, g.Coordinator.NodeID)
	require.Len(t, g.Members, 1)
	require.Equal(t, memberID, g.Members[0].MemberID)
	require.Equal(t, "groupscmd-member", g.Members[0].ClientID)
	require.Equal(t, []topicPartitionJSON{
		{Topic: "orders", Partitions: []int32{0, 1, 2}},
		{Topic: "payments", Partitions: []int32{0}},
	}, g.Members[0].Assigned)

	require.Len(t, g.Partitions, 4)
	for _, p := range g.Partitions {
		l, ok := want.Lag.Lookup(p.Topic, p.Partition)
		require.True(t, ok, "%s/%d not in kadm.Lag", p.Topic, p.Partition)
		require.Empty(t, p.Error)
		require.Equal(t, memberID, p.MemberID)
		require.NotNil(t, p.LogEndOffset)
		require.Equal(t, l.End.Offset, *p.LogEndOffset, "%s/%d", p.Topic, p.Partition)
		if l.Commit.At < 0 {
			require.Nil(t, p.CurrentOffset, "%s/%d", p.Topic, p.Partition)
			require.Nil(t, p.Lag, "%s/%d", p.Topic, p.Partition)
			continue
		}
		require.Equal(t, l.Commit.At, *p.CurrentOffset, "%s/%d", p.Topic, p.Partition)
		require.Equal(t, l.Lag, *p.Lag, "%s/%d", p.Topic, p.Partition)
	}
	require.NotNil(t, g.TotalLag)
	require.Equal(t, int64(5), *g.TotalLag) // orders/0: 7-2, orders/1: 5-5

	code, out, errOut = e.groups("describe", "billing")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "state Stable")
	require.Contains(t, out, "MEMBER-ID")
	require.Contains(t, out, "orders:0,1,2 payments:0")
	require.Equal(t, [][]string{
		{"orders", "0", "2", "7", "5", memberID},
		{"orders", "1", "5", "5", "0", memberID},
		{"orders", "2", "-", "4", "-", memberID},
	}, tableRows(out, "orders"))
	require.Equal(t, [][]string{{"payments", "0", "-", "3", "-", memberID}}, tableRows(out, "payments"))

	// A group of the consumer protocol (KIP-848): its epochs, its
	// members' epochs, protocols, assignments and targets.
	e.commit("modern", offsets{"orders": {0: 3}}) // before it has members
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...), kgo.ClientID("modern-member"),
		kgo.ConsumerGroup("modern"), kgo.ConsumeTopics("orders"), kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	go func() {
		for !cl.PollFetches(e.ctx).IsClientClosed() && e.ctx.Err() == nil {
		}
	}()
	require.Eventually(t, func() bool {
		code, out, _ = e.groups("describe", "modern", "-json")
		doc.Groups = nil
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Groups) != 1 {
			return false
		}
		g = doc.Groups[0]
		return g.State == "Stable" && len(g.Members) == 1 && len(g.Members[0].Assigned) == 1
	}, 20*time.Second, 100*time.Millisecond, "modern never Stable: %s", out)
	require.Equal(t, "consumer", g.Type)
	require.NotNil(t, g.Epoch)
	require.Equal(t, *g.Epoch, *g.AssignmentEpoch)
	require.Equal(t, "uniform", g.Assignor)
	m := g.Members[0]
	require.Equal(t, "consumer", m.Protocol)
	require.Equal(t, *g.Epoch, *m.MemberEpoch)
	require.Equal(t, "modern-member", m.ClientID)
	require.Equal(t, []topicPartitionJSON{{Topic: "orders", Partitions: []int32{0, 1, 2}}}, m.Assigned)
	require.Equal(t, m.Assigned, m.Target)
	require.Equal(t, int64(4), *g.TotalLag) // orders/0: 7-3
	require.Len(t, g.Partitions, 3)
	code, out, errOut = e.groups("describe", "modern")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "consumer protocol, state Stable")
	require.Contains(t, out, "orders:0,1,2")
	code, out, errOut = e.groups("list")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, [][]string{{"modern", "consumer", "Stable", "consumer", "1", "4"}}, tableRows(out, "modern"))
	// brokerfleet lag shows it too.
	var lb, le bytes.Buffer
	require.Equal(t, 0, run([]string{"lag", "-bootstrap", e.bootstrap, "-group", "modern", "-once", "-json"}, &lb, &le), le.String())
	var ld lagJSON
	require.NoError(t, json.Unmarshal(lb.Bytes(), &ld), lb.String())
	require.Len(t, ld.Groups, 1)
	require.Equal(t, "Stable", ld.Groups[0].State)
	require.Equal(t, 1, ld.Groups[0].Members)
	require.Equal(t, int64(4), ld.TotalLag)

	code, out, errOut = e.groups("describe", "nosuch")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "group nosuch does not exist")
}

// resetFixture is orders with two partitions: partition 0 holds offsets
// 2-9 (0 and 1 deleted) with record i at base+i minutes, partition 1
// holds 0-4 with record i at base+2i minutes. Group g has committed 5 and 3.
func resetFixture(t *testing.T) (*groupsEnv, time.Time) {
	e := newGroupsEnv(t)
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	e.createTopic("orders", 2)
	e.produce("orders", 0, 10, func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) })
	e.produce("orders", 1, 5, func(i int) time.Time { return base.Add(time.Duration(2*i) * time.Minute) })
	var del kadm.Offsets
	del.AddOffset("orders", 0, 2, -1)
	dr, err := e.adm.DeleteRecords(e.ctx, del)
	require.NoError(t, err)
	require.NoError(t, dr.Error())
	e.commit("g", offsets{"orders": {0: 5, 1: 3}})
	return e, base
}

func TestGroupsReset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		args  []string
		want  map[int32]int64
		notes []string // substrings of the plan
	}{
		{name: "earliest", args: []string{"-to-earliest"}, want: map[int32]int64{0: 2, 1: 0}},
		{name: "latest", args: []string{"-to-latest"}, want: map[int32]int64{0: 10, 1: 5}},
		{name: "offset", args: []string{"-to-offset", "7"}, want: map[int32]int64{0: 7, 1: 5},
			notes: []string{"note: orders/1: -to-offset 7 is past the log end offset; clamped to 5"}},
		{name: "offset below start", args: []string{"-to-offset", "1"}, want: map[int32]int64{0: 2, 1: 1},
			notes: []string{"note: orders/0: -to-offset 1 is before the log start offset; clamped to 2"}},
		{name: "datetime UTC", args: []string{"-to-datetime", "2026-11-30T10:04:00"}, want: map[int32]int64{0: 4, 1: 2}},
		{name: "datetime RFC3339 with zone", args: []string{"-to-datetime", "2026-11-30T12:05:30+02:00"}, want: map[int32]int64{0: 6, 1: 3}},
		{name: "datetime after the last record", args: []string{"-to-datetime", "2026-12-01T00:00:00Z"}, want: map[int32]int64{0: 10, 1: 5},
			notes: []string{"note: orders/0: no record at or after 2026-12-01T00:00:00Z; using the log end offset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, _ := resetFixture(t)
			code, out, errOut := e.groups("reset", append([]string{"g"}, tc.args...)...)
			require.Equal(t, 0, code, errOut)
			require.Equal(t, [][]string{
				{"orders", "0", "5", itoa(tc.want[0])},
				{"orders", "1", "3", itoa(tc.want[1])},
			}, tableRows(out, "orders"), out)
			require.Contains(t, out, "NEW-OFFSET")
			require.Contains(t, out, "committed new offsets for 2 partition(s) of group g")
			for _, n := range tc.notes {
				require.Contains(t, out, n)
			}
			require.Equal(t, offsets{"orders": tc.want}, e.committed("g"))

			// A new member starts exactly at the new offsets; where that
			// is the log end, give it a record to read there.
			end := e.endOffsets("orders")
			for p, at := range tc.want {
				if at == end[p] {
					e.produce("orders", p, 1, nil)
				}
			}
			require.Equal(t, tc.want, e.firstOffsets("g", "orders", []int32{0, 1}))
		})
	}
}

func TestGroupsResetJSONAndTopicSelection(t *testing.T) {
	t.Parallel()
	e, _ := resetFixture(t)
	code, out, errOut := e.groups("reset", "g", "-to-earliest", "-topic", "orders:1", "-json")
	require.Equal(t, 0, code, errOut)
	var doc resetJSON
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	three := int64(3)
	require.Equal(t, resetJSON{
		Group: "g", Target: "earliest", Committed: true,
		Partitions: []resetPartitionJSON{{Topic: "orders", Partition: 1, CurrentOffset: &three, NewOffset: 0}},
	}, doc)
	require.Equal(t, offsets{"orders": {0: 5, 1: 0}}, e.committed("g"))

	// A group with no commits needs -topic; with it, reset seeds offsets.
	code, _, errOut = e.groups("reset", "fresh", "-to-latest")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "group fresh has no committed offsets; name the topics with --topic")
	code, out, errOut = e.groups("reset", "fresh", "-to-latest", "-topic", "orders")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, [][]string{{"orders", "0", "-", "10"}, {"orders", "1", "-", "5"}}, tableRows(out, "orders"))
	require.Equal(t, offsets{"orders": {0: 10, 1: 5}}, e.committed("fresh"))

	code, _, errOut = e.groups("reset", "g", "-to-earliest", "-topic", "orders:7")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "topic orders has no partition 7")
	code, _, errOut = e.groups("reset", "g", "-to-earliest", "-topic", "nosuch")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "topic nosuch does not exist")
	require.Equal(t, offsets{"orders": {0: 5, 1: 0}}, e.committed("g"))
}

func TestGroupsResetDryRun(t *testing.T) {
	t.Parallel()
	e, _ := resetFixture(t)
	code, out, errOut := e.groups("reset", "g", "-to-earliest", "-dry-run")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, [][]string{{"orders", "0", "5", "2"}, {"orders", "1", "3", "0"}}, tableRows(out, "orders"))
	require.Contains(t, out, "dry run: nothing changed")
	require.NotContains(t, out, "committed new offsets")
	require.Equal(t, offsets{"orders": {0: 5, 1: 3}}, e.committed("g"))

	code, out, errOut = e.groups("reset", "g", "-to-offset", "0", "-dry-run", "-json")
	require.Equal(t, 0, code, errOut)
	var doc resetJSON
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.True(t, doc.DryRun)
	require.False(t, doc.Committed)
	require.Len(t, doc.Partitions, 2)
	require.Equal(t, offsets{"orders": {0: 5, 1: 3}}, e.committed("g"))
}

func TestGroupsResetRefusedWithMembers(t *testing.T) {
	t.Parallel()
	e, _ := resetFixture(t)
	m := e.member("g", 2, "orders")
	code, out, errOut := e.groups("reset", "g", "-to-earliest")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "group g has 1 active members; stop them before resetting offsets (state Stable)")
	require.Equal(t, offsets{"orders": {0: 5, 1: 3}}, e.committed("g"))

	// Once the member has left, the same reset goes through.
	m.Close()
	require.Eventually(t, func() bool {
		ds, err := e.adm.DescribeGroups(e.ctx, "g")
		return err == nil && len(ds["g"].Members) == 0
	}, 10*time.Second, 50*time.Millisecond)
	code, _, errOut = e.groups("reset", "g", "-to-earliest")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, offsets{"orders": {0: 2, 1: 0}}, e.committed("g"))
}

func TestGroupsDelete(t *testing.T) {
	t.Parallel()
	e := newGroupsEnv(t)
	e.createTopic("orders", 1)
	e.produce("orders", 0, 3, nil)
	e.commit("old", offsets{"orders": {0: 3}})
	e.member("busy", 1, "orders")

	code, out, errOut := e.groups("delete", "old")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "group old: deleted\n", out)
	code, out, errOut = e.groups("list")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, tableRows(out, "old"))
	require.Len(t, tableRows(out, "busy"), 1)
	require.Equal(t, offsets{}, e.committed("old"))

	code, out, errOut = e.groups("delete", "busy")
	require.Equal(t, 1, code)
	require.Contains(t, out, "group busy: not deleted: it has active members")
	require.Contains(t, errOut, "active members")

	code, out, errOut = e.groups("delete", "-json", "ghost", "busy")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "2 of 2 groups not deleted")
	var doc struct {
		Groups []deletedGroupJSON `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Groups, 2)
	require.Equal(t, "ghost", doc.Groups[0].Group)
	require.False(t, doc.Groups[0].Deleted)
	require.Contains(t, doc.Groups[0].Error, "does not exist")
	require.Equal(t, "busy", doc.Groups[1].Group)
	require.False(t, doc.Groups[1].Deleted)
	require.Contains(t, doc.Groups[1].Error, "active members")
}

func TestGroupsFlagErrors(t *testing.T) {
	t.Parallel()
	// Nothing listens here; a flag error must be reported before any
	// connection is tried.
	bs := []string{"-bootstrap", "127.0.0.1:1", "-timeout", "200ms"}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"two targets", []string{"reset", "g", "-to-earliest", "-to-latest"}, []string{"-to-earliest", "-to-latest", "cannot be combined"}},
		{"offset and datetime", []string{"reset", "g", "-to-offset", "3", "-to-datetime", "2026-11-30T10:00:00Z"}, []string{"-to-offset", "-to-datetime"}},
		{"no target", []string{"reset", "g"}, []string{"-to-earliest", "-to-latest", "-to-offset", "-to-datetime"}},
		{"bad datetime", []string{"reset", "g", "-to-datetime", "yesterday"}, []string{"-to-datetime", `"yesterday"`}},
		{"datetime before 1970", []string{"reset", "g", "-to-datetime", "1969-12-31T23:59:59Z"}, []string{"-to-datetime", "before 1970"}},
		{"bad offset", []string{"reset", "g", "-to-offset", "-5"}, []string{"-to-offset"}},
		{"bad topic", []string{"reset", "g", "-to-earliest", "-topic", "orders:x"}, []string{"-topic"}},
		{"no group", []string{"reset", "-to-earliest"}, []string{"name the group"}},
		{"two groups", []string{"reset", "a", "b", "-to-earliest"}, []string{"one group"}},
		{"unknown flag", []string{"list", "-nope"}, []string{"-nope"}},
		{"unknown flag after group", []string{"describe", "g", "--frob"}, []string{"-frob"}},
		{"bad state", []string{"list", "-state", "Happy"}, []string{"-state", "Happy"}},
		{"bad bootstrap", []string{"list", "-bootstrap", "nohost"}, []string{"-bootstrap", "nohost"}},
		{"bad timeout", []string{"list", "-timeout", "0s"}, []string{"-timeout"}},
		{"describe without group", []string{"describe"}, []string{"group"}},
		{"delete without group", []string{"delete"}, []string{"group"}},
		{"list argument", []string{"list", "g"}, []string{`unexpected argument "g"`}},
		{"unknown verb", []string{"frob"}, []string{`"frob"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{tc.args[0]}, bs...)
			args = append(args, tc.args[1:]...)
			if tc.name == "bad bootstrap" || tc.name == "bad timeout" {
				args = tc.args // their own -bootstrap/-timeout must be the one seen
			}
			code, out, errOut := runGroupsCmd(args...)
			require.Equal(t, 2, code, errOut) // a refused connection would be 1
			require.Empty(t, out)
			for _, w := range tc.want {
				require.Contains(t, errOut, w)
			}
		})
	}

	code, _, _ := runGroupsCmd()
	require.Equal(t, 2, code)
	code, out, _ := runGroupsCmd("-help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "brokerfleet groups <verb>")
	code, _, errOut := runGroupsCmd("reset", "-help")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "-to-datetime")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// A share group is described with its members and, per partition, its
// share start offset and backlog.
func TestGroupsDescribeShare(t *testing.T) {
	t.Parallel()
	e := newGroupsEnv(t)
	e.createTopic("tasks", 1)
	e.produce("tasks", 0, 10, nil)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "crew"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	alter.Resources = append(alter.Resources, res)
	_, err := alter.RequestWith(e.ctx, e.producer)
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...), kgo.ShareGroup("crew"), kgo.ConsumeTopics("tasks"),
		kgo.ClientID("groupscmd-share"))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	got := 0
	for got < 4 {
		recs := cl.PollRecords(e.ctx, 4-got).Records()
		for _, r := range recs {
			r.Ack(kgo.AckAccept)
		}
		got += len(recs)
	}
	require.NoError(t, cl.FlushAcks(e.ctx))

	var g describedGroupJSON
	require.Eventually(t, func() bool {
		code, out, _ := e.groups("describe", "crew", "-json")
		var doc struct {
			Groups []describedGroupJSON `json:"groups"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Groups) != 1 {
			return false
		}
		g = doc.Groups[0]
		return len(g.Partitions) == 1 && g.Partitions[0].CurrentOffset != nil && *g.Partitions[0].CurrentOffset >= 4
	}, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, "share", g.Type)
	require.Equal(t, "Stable", g.State)
	require.Equal(t, "simple", g.Assignor)
	require.Len(t, g.Members, 1)
	require.Equal(t, "groupscmd-share", g.Members[0].ClientID)
	require.Equal(t, []topicPartitionJSON{{Topic: "tasks", Partitions: []int32{0}}}, g.Members[0].Assigned)
	p := g.Partitions[0]
	require.EqualValues(t, 10, *p.LogEndOffset)
	require.NotNil(t, p.Lag)
	require.EqualValues(t, 10-*p.CurrentOffset, *p.Lag, "backlog past the start")

	code, out, errOut := e.groups("describe", "crew")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "share group")
	require.Contains(t, out, "START-OFFSET")
}
