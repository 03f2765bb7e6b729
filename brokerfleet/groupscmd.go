package main

// brokerfleet groups: list, describe, delete and reset consumer groups over
// the Kafka admin API (kadm), against Strata or any Kafka-compatible cluster.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const groupsHelp = `usage: brokerfleet groups <verb> [flags] [GROUP...]

Administers consumer groups through the Kafka admin API of any broker in
the cluster (Strata or Kafka).

verbs:
  list                 groups with their state, protocol type, members and total lag
  describe GROUP...    members, assignments, and committed offset, log end offset
                       and lag of every partition
  delete GROUP...      delete groups that have no active members
  reset GROUP -to-earliest | -to-latest | -to-offset N | -to-datetime T
                       move the committed offsets of a group with no active members

Every verb takes -bootstrap (default: STRATA_BOOTSTRAP, else 127.0.0.1:9092),
-json and -timeout. Run 'brokerfleet groups <verb> -help' for its flags.
`

const (
	groupsListHelp = `usage: brokerfleet groups list [flags]

Lists consumer groups. LAG is the sum, over the partitions the group has
committed offsets for, of the log end offset minus the committed offset;
"-" if the group has no committed offsets.

flags:
`
	groupsDescribeHelp = `usage: brokerfleet groups describe [flags] GROUP [GROUP...]

Describes groups like kafka-consumer-groups.sh --describe: state, protocol,
coordinator, members and their assignments, and one row per partition the
group is assigned or has committed offsets for. LAG is the log end offset
(high watermark) minus the committed offset; a partition without a commit
shows "-" for CURRENT-OFFSET and LAG.

flags:
`
	groupsDeleteHelp = `usage: brokerfleet groups delete [flags] GROUP [GROUP...]

Deletes groups and their committed offsets. A group with active members is
not deleted.

flags:
`
	groupsResetHelp = `usage: brokerfleet groups reset [flags] GROUP (-to-earliest | -to-latest | -to-offset N | -to-datetime T)

Moves the committed offsets of a group that has no active members. Without
-topic it resets every partition the group has committed offsets for. The
plan (TOPIC PARTITION CURRENT-OFFSET NEW-OFFSET) is printed; with -dry-run
nothing is committed.

flags:
`
)

// defaultBootstrap is used when neither -bootstrap nor STRATA_BOOTSTRAP is set.
const defaultBootstrap = "127.0.0.1:9092"

// groupStates are the classic group states ListGroups filters on.
var groupStates = []string{"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead"}

func runGroups(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runVerbs(ctx, "groups", groupsHelp, []verb{{"list", groupsList}, {"describe", groupsDescribe}, {"delete", groupsDelete}, {"reset", groupsReset}}, args, stdout, stderr)
}

// adminFlags are the flags every groups verb takes.
type adminFlags struct {
	bootstrap string
	json      bool
	timeout   time.Duration
	security  clientSecurityFlags // TLS and SASL (clientsecurity.go)

	seeds []string // bootstrap, split and checked by parse
}

func (f *adminFlags) register(fs *flag.FlagSet) {
	f.bootstrap = defaultBootstrap
	if v := os.Getenv("STRATA_BOOTSTRAP"); v != "" {
		f.bootstrap = v
	}
	fs.StringVar(&f.bootstrap, "bootstrap", f.bootstrap, "brokers to contact, `host:port[,host:port...]`; STRATA_BOOTSTRAP sets the default")
	fs.BoolVar(&f.json, "json", false, "print one indented JSON document instead of tables")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "limit for the whole command, connecting included")
	f.security.register(fs)
}

// parse parses args, which may mix flags and positional arguments, and
// returns the positional ones.
func (f *adminFlags) parse(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, error) {
	pos, err := parseInterspersed(fs, args, stderr)
	if err != nil {
		return nil, err
	}
	source := "flag -bootstrap"
	if !flagSet(fs, "bootstrap") && os.Getenv("STRATA_BOOTSTRAP") != "" {
		source = "STRATA_BOOTSTRAP"
	}
	if f.seeds, err = parseBootstrap(f.bootstrap, source); err != nil {
		return nil, err
	}
	if f.timeout <= 0 {
		return nil, usageError{fmt.Errorf("invalid value %s for flag -timeout: must be positive", f.timeout)}
	}
	return pos, nil
}

// connect returns an admin client for the bootstrap brokers and a context
// bounded by -timeout; the caller closes the client and cancels.
func (f *adminFlags) connect(ctx context.Context) (*kadm.Client, context.Context, context.CancelFunc, error) {
	sec, err := f.security.opts()
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.seeds...), kgo.ClientID("brokerfleet-groups")}, sec...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(f.timeout.Milliseconds(), 1<<31-1)))
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	return adm, ctx, cancel, nil
}

// fail wraps an error from a cluster request with what was being done and,
// when the time ran out, where and for how long.
func (f *adminFlags) fail(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer from %s within %s (flag -timeout): %w", what, f.bootstrap, f.timeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func newVerbFlags(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("groups "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

// groupNames returns the positional group names in order, without
// duplicates, or a usage error if there are none.
func groupNames(pos []string) ([]string, error) {
	if len(pos) == 0 {
		return nil, usageError{errors.New("name at least one group")}
	}
	seen := map[string]bool{}
	var names []string
	for _, g := range pos {
		if !seen[g] {
			seen[g] = true
			names = append(names, g)
		}
	}
	return names, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

func row(w io.Writer, cols ...string) {
	fmt.Fprintln(w, strings.Join(cols, "\t"))
}

// orDash shows an empty string, or a missing number, as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func i64Dash(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func i64p(v int64) *int64 { return &v }

// groupMissing reports whether a describe result says the group does not
// exist: GROUP_ID_NOT_FOUND from DescribeGroups v6+, state Dead before.
func groupMissing(err error, state string) bool {
	return errors.Is(err, kerr.GroupIDNotFound) || (err == nil && state == "Dead")
}

// ---- list ----

type listedGroupJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocolType"`
	Members      int    `json:"members"`
	Lag          *int64 `json:"lag"` // null: no committed offsets, or lag unknown
	Error        string `json:"error,omitempty"`
}

func groupsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af adminFlags
	var states []string
	fs := newVerbFlags("list", groupsListHelp)
	af.register(fs)
	fs.Func("state", "only groups in `STATE[,STATE...]`, repeatable: "+strings.Join(groupStates, ", ")+" (any case)", func(s string) error {
		for _, v := range strings.Split(s, ",") {
			st, ok := canonicalState(strings.TrimSpace(v))
			if !ok {
				return fmt.Errorf("unknown group state %q: want %s", v, strings.Join(groupStates, ", "))
			}
			states = append(states, st)
		}
		return nil
	})
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", pos[0])}
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	listed, err := adm.ListGroups(ctx, states...)
	var partial error
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && !se.AllFailed {
		partial = af.fail("list groups (some brokers did not answer)", err)
	} else if err != nil {
		return af.fail("list groups", err)
	}
	out := make([]listedGroupJSON, 0, len(listed))
	if names := listed.Groups(); len(names) > 0 {
		lags, err := adm.Lag(ctx, names...)
		if err != nil {
			return af.fail("describe groups", err)
		}
		for _, lg := range listed.Sorted() {
			g := listedGroupJSON{Group: lg.Group, State: lg.State, ProtocolType: lg.ProtocolType}
			l, ok := lags[lg.Group]
			switch {
			case !ok:
				g.Error = "not described"
			case l.Error() != nil:
				g.Error = l.Error().Error()
			default:
				g.Members = len(l.Members)
				g.Lag = committedLag(l.Lag)
			}
			out = append(out, g)
		}
	}

	if af.json {
		if err := writeJSON(stdout, struct {
			Groups []listedGroupJSON `json:"groups"`
		}{out}); err != nil {
			return err
		}
		return partial
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no groups")
		return partial
	}
	tw := newTable(stdout)
	row(tw, "GROUP", "STATE", "PROTOCOL-TYPE", "MEMBERS", "LAG")
	for _, g := range out {
		row(tw, g.Group, orDash(g.State), orDash(g.ProtocolType), strconv.Itoa(g.Members), i64Dash(g.Lag))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range out {
		if g.Error != "" {
			fmt.Fprintf(stderr, "group %s: %s\n", g.Group, g.Error)
		}
	}
	return partial
}

func canonicalState(s string) (string, bool) {
	for _, st := range groupStates {
		if strings.EqualFold(s, st) {
			return st, true
		}
	}
	return "", false
}

// committedLag sums the lag of the partitions that have a committed offset
// (the numbers describe prints in its LAG column). It returns nil if there
// are none.
func committedLag(l kadm.GroupLag) *int64 {
	var total int64
	var n int
	for _, pl := range l.Sorted() {
		if pl.Commit.At < 0 || pl.Err != nil {
			continue
		}
		total += pl.Lag
		n++
	}
	if n == 0 {
		return nil
	}
	return &total
}

// ---- describe ----

type describedGroupJSON struct {
	Group        string             `json:"group"`
	State        string             `json:"state,omitempty"`
	ProtocolType string             `json:"protocolType,omitempty"`
	Protocol     string             `json:"protocol,omitempty"`
	Coordinator  *coordinatorJSON   `json:"coordinator,omitempty"`
	Members      []memberJSON       `json:"members"`
	Partitions   []partitionLagJSON `json:"partitions"`
	TotalLag     *int64             `json:"totalLag"` // over partitions with a commit
	Error        string             `json:"error,omitempty"`
}

type coordinatorJSON struct {
	NodeID int32  `json:"nodeId"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
}

type memberJSON struct {
	MemberID   string               `json:"memberId"`
	InstanceID *string              `json:"instanceId"`
	ClientID   string               `json:"clientId"`
	Host       string               `json:"host"`
	Assigned   []topicPartitionJSON `json:"assigned"`
}

type topicPartitionJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type partitionLagJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"currentOffset"` // null: nothing committed
	LogEndOffset  *int64 `json:"logEndOffset"`
	Lag           *int64 `json:"lag"` // null: nothing committed, or an error
	MemberID      string `json:"memberId,omitempty"`
	Error         string `json:"error,omitempty"`
}

func groupsDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af adminFlags
	fs := newVerbFlags("describe", groupsDescribeHelp)
	af.register(fs)
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	names, err := groupNames(pos)
	if err != nil {
		return err
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return af.fail("describe groups", err)
	}
	var out []describedGroupJSON
	var errs []error
	for _, name := range names {
		d := describeOne(name, lags)
		if d.Error != "" {
			errs = append(errs, errors.New(d.Error))
		}
		out = append(out, d)
	}

	if af.json {
		if err := writeJSON(stdout, struct {
			Groups []describedGroupJSON `json:"groups"`
		}{out}); err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	first := true
	for _, d := range out {
		if d.Error != "" {
			continue
		}
		if !first {
			fmt.Fprintln(stdout)
		}
		first = false
		if err := printDescribed(stdout, d); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func describeOne(name string, lags kadm.DescribedGroupLags) describedGroupJSON {
	d := describedGroupJSON{Group: name, Members: []memberJSON{}, Partitions: []partitionLagJSON{}}
	l, ok := lags[name]
	switch {
	case !ok:
		d.Error = fmt.Sprintf("group %s: not in the describe response", name)
		return d
	case groupMissing(l.DescribeErr, l.State):
		d.Error = fmt.Sprintf("group %s does not exist", name)
		return d
	case l.DescribeErr != nil:
		d.Error = fmt.Sprintf("describe group %s: %v", name, l.DescribeErr)
		return d
	case l.FetchErr != nil:
		d.Error = fmt.Sprintf("fetch committed offsets of group %s: %v", name, l.FetchErr)
		return d
	}
	d.State, d.ProtocolType, d.Protocol = l.State, l.ProtocolType, l.Protocol
	d.Coordinator = &coordinatorJSON{NodeID: l.Coordinator.NodeID, Host: l.Coordinator.Host, Port: l.Coordinator.Port}
	for _, m := range l.Members {
		mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []topicPartitionJSON{}}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				ps := append([]int32(nil), t.Partitions...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				mj.Assigned = append(mj.Assigned, topicPartitionJSON{Topic: t.Topic, Partitions: ps})
			}
			sort.Slice(mj.Assigned, func(i, j int) bool { return mj.Assigned[i].Topic < mj.Assigned[j].Topic })
		}
		d.Members = append(d.Members, mj)
	}
	for _, pl := range l.Lag.Sorted() {
		p := partitionLagJSON{Topic: pl.Topic, Partition: pl.Partition}
		if pl.Member != nil {
			p.MemberID = pl.Member.MemberID
		}
		if pl.End.Err == nil {
			p.LogEndOffset = i64p(pl.End.Offset)
		}
		if pl.Commit.At >= 0 {
			p.CurrentOffset = i64p(pl.Commit.At)
			if pl.Err == nil {
				p.Lag = i64p(pl.Lag)
			}
		}
		if pl.Err != nil {
			p.Error = pl.Err.Error()
		}
		d.Partitions = append(d.Partitions, p)
	}
	d.TotalLag = committedLag(l.Lag)
	return d
}

func printDescribed(w io.Writer, d describedGroupJSON) error {
	protocol := orDash(d.ProtocolType)
	if d.Protocol != "" {
		protocol += " (" + d.Protocol + ")"
	}
	fmt.Fprintf(w, "group %s: state %s, protocol %s, coordinator %d at %s, %d member(s), total lag %s\n",
		d.Group, d.State, protocol, d.Coordinator.NodeID,
		net.JoinHostPort(d.Coordinator.Host, strconv.Itoa(int(d.Coordinator.Port))), len(d.Members), i64Dash(d.TotalLag))
	tw := newTable(w)
	if len(d.Members) > 0 {
		fmt.Fprintln(tw)
		row(tw, "MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNED")
		for _, m := range d.Members {
			var assigned []string
			for _, a := range m.Assigned {
				ps := make([]string, len(a.Partitions))
				for i, p := range a.Partitions {
					ps[i] = strconv.Itoa(int(p))
				}
				assigned = append(assigned, a.Topic+":"+strings.Join(ps, ","))
			}
			instance := "-"
			if m.InstanceID != nil {
				instance = *m.InstanceID
			}
			row(tw, m.MemberID, instance, orDash(m.ClientID), orDash(m.Host), orDash(strings.Join(assigned, " ")))
		}
	}
	if len(d.Partitions) > 0 {
		fmt.Fprintln(tw)
		row(tw, "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER")
		for _, p := range d.Partitions {
			row(tw, p.Topic, strconv.Itoa(int(p.Partition)), i64Dash(p.CurrentOffset), i64Dash(p.LogEndOffset), i64Dash(p.Lag), orDash(p.MemberID))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range d.Partitions {
		if p.Error != "" {
			fmt.Fprintf(w, "error: %s/%d: %s\n", p.Topic, p.Partition, p.Error)
		}
	}
	return nil
}

// ---- delete ----

type deletedGroupJSON struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

func groupsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af adminFlags
	fs := newVerbFlags("delete", groupsDeleteHelp)
	af.register(fs)
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	names, err := groupNames(pos)
	if err != nil {
		return err
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	resps, err := adm.DeleteGroups(ctx, names...)
	var shardErr error // why groups missing from resps got no answer
	if _, ok := errors.AsType[*kadm.ShardErrors](err); ok {
		shardErr = err
	} else if err != nil {
		return af.fail("delete groups", err)
	}
	var out []deletedGroupJSON
	failed := 0
	for _, name := range names {
		g := deletedGroupJSON{Group: name}
		r, ok := resps[name]
		switch {
		case !ok && shardErr != nil:
			g.Error = af.fail("no answer", shardErr).Error()
		case !ok:
			g.Error = "not in the delete response"
		case r.Err == nil:
			g.Deleted = true
		case errors.Is(r.Err, kerr.NonEmptyGroup):
			g.Error = "it has active members; stop them before deleting the group (" + r.Err.Error() + ")"
		case errors.Is(r.Err, kerr.GroupIDNotFound):
			g.Error = "it does not exist"
		default:
			g.Error = r.Err.Error()
			if r.ErrMessage != "" {
				g.Error += ": " + r.ErrMessage
			}
		}
		if !g.Deleted {
			failed++
		}
		out = append(out, g)
	}

	if af.json {
		if err := writeJSON(stdout, struct {
			Groups []deletedGroupJSON `json:"groups"`
		}{out}); err != nil {
			return err
		}
	} else {
		for _, g := range out {
			if g.Deleted {
				fmt.Fprintf(stdout, "group %s: deleted\n", g.Group)
			} else {
				fmt.Fprintf(stdout, "group %s: not deleted: %s\n", g.Group, g.Error)
			}
		}
	}
	switch {
	case failed == 0:
		return nil
	case len(out) == 1:
		return fmt.Errorf("group %s not deleted: %s", out[0].Group, out[0].Error)
	}
	return fmt.Errorf("%d of %d groups not deleted", failed, len(out))
}

// ---- reset ----

// topicFlag collects -topic T[:P,P...] values; a nil partition list means
// every partition of the topic.
type topicFlag struct {
	order []string
	parts map[string][]int32
}

func (f *topicFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(f.order, " ")
}

func (f *topicFlag) Set(s string) error {
	topic, list, hasList := strings.Cut(s, ":")
	if topic == "" {
		return fmt.Errorf("%q: want TOPIC or TOPIC:PARTITION[,PARTITION...]", s)
	}
	var ps []int32
	if hasList {
		for _, p := range strings.Split(list, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || v < 0 {
				return fmt.Errorf("%q: %q is not a partition number", s, p)
			}
			ps = append(ps, int32(v))
		}
	}
	if f.parts == nil {
		f.parts = map[string][]int32{}
	}
	prev, seen := f.parts[topic]
	switch {
	case !seen:
		f.order = append(f.order, topic)
		f.parts[topic] = ps
	case prev == nil || ps == nil:
		f.parts[topic] = nil // all partitions wins
	default:
		f.parts[topic] = append(prev, ps...)
	}
	return nil
}

// resetTarget is where reset moves offsets to.
type resetTarget struct {
	kind   string // "earliest", "latest", "offset" or "datetime"
	offset int64
	at     time.Time
}

// resetTimeLayouts are the accepted -to-datetime forms; the second is UTC.
var resetTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05"}

func parseResetTime(s string) (time.Time, error) {
	for _, layout := range resetTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			if t.UnixMilli() < 0 { // negative timestamps mean latest or earliest to ListOffsets
				return time.Time{}, fmt.Errorf("%q is before 1970", s)
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC3339 (2026-11-30T10:00:00Z) or 2026-11-30T10:00:00 (UTC)", s)
}

type resetPartitionJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"currentOffset"` // null: nothing committed
	NewOffset     int64  `json:"newOffset"`
	Note          string `json:"note,omitempty"`
	Error         string `json:"error,omitempty"` // the commit failed
}

type resetJSON struct {
	Group      string               `json:"group"`
	Target     string               `json:"target"`
	DryRun     bool                 `json:"dryRun"`
	Committed  bool                 `json:"committed"` // every partition committed
	Partitions []resetPartitionJSON `json:"partitions"`
}

func groupsReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		af                   adminFlags
		toEarliest, toLatest bool
		target               resetTarget
		targets              []string
		topics               topicFlag
		dryRun               bool
	)
	fs := newVerbFlags("reset", groupsResetHelp)
	af.register(fs)
	fs.BoolVar(&toEarliest, "to-earliest", false, "reset to the log start offset")
	fs.BoolVar(&toLatest, "to-latest", false, "reset to the log end offset (high watermark)")
	fs.Func("to-offset", "reset to offset `N`, clamped per partition to [log start, log end]", func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not an offset (an integer >= 0)", s)
		}
		target.kind, target.offset = "offset", v
		targets = append(targets, "-to-offset")
		return nil
	})
	fs.Func("to-datetime", "reset to the first record at or after `T` (RFC3339, or 2026-11-30T10:00:00 as UTC); the log end offset if there is none", func(s string) error {
		t, err := parseResetTime(s)
		if err != nil {
			return err
		}
		target.kind, target.at = "datetime", t
		targets = append(targets, "-to-datetime")
		return nil
	})
	fs.Var(&topics, "topic", "reset only `TOPIC[:P,P...]`, repeatable (default: the partitions the group has committed offsets for)")
	fs.BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 0:
		return usageError{errors.New("name the group to reset")}
	case 1:
	default:
		return usageError{fmt.Errorf("reset takes one group, got %q", pos)}
	}
	group := pos[0]
	if toEarliest {
		target.kind = "earliest"
		targets = append(targets, "-to-earliest")
	}
	if toLatest {
		target.kind = "latest"
		targets = append(targets, "-to-latest")
	}
	switch targets = dedupe(targets); len(targets) {
	case 0:
		return usageError{errors.New("name a target: one of -to-earliest, -to-latest, -to-offset or -to-datetime")}
	case 1:
	default:
		return usageError{fmt.Errorf("%s cannot be combined: give exactly one of -to-earliest, -to-latest, -to-offset or -to-datetime", strings.Join(targets, " and "))}
	}

	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	plan, err := planReset(ctx, adm, &af, group, target, topics)
	if err != nil {
		return err
	}
	doc := resetJSON{Group: group, Target: target.kind, DryRun: dryRun, Partitions: plan}
	var failed []string
	if !dryRun {
		offsets := make(kadm.Offsets)
		for _, p := range plan {
			offsets.AddOffset(p.Topic, p.Partition, p.NewOffset, -1)
		}
		resps, err := adm.CommitOffsets(ctx, group, offsets)
		if err != nil {
			return af.fail(fmt.Sprintf("commit offsets of group %s (nothing committed)", group), err)
		}
		for i, p := range plan {
			r, ok := resps.Lookup(p.Topic, p.Partition)
			switch {
			case !ok:
				plan[i].Error = "not in the commit response"
			case r.Err != nil:
				plan[i].Error = r.Err.Error()
			}
			if plan[i].Error != "" {
				failed = append(failed, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, plan[i].Error))
			}
		}
		doc.Committed = len(failed) == 0
	}

	if af.json {
		if err := writeJSON(stdout, doc); err != nil {
			return err
		}
	} else if err := printResetPlan(stdout, doc); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("commit offsets of group %s: %d of %d partitions failed: %s", group, len(failed), len(plan), strings.Join(failed, "; "))
	}
	return nil
}

// dedupe drops repeats of a flag given more than once.
func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// planReset checks the group has no members, picks the partitions and
// computes each one's new offset.
func planReset(ctx context.Context, adm *kadm.Client, af *adminFlags, group string, target resetTarget, sel topicFlag) ([]resetPartitionJSON, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, af.fail("describe group "+group, err)
	}
	d, ok := described[group]
	switch {
	case !ok:
		return nil, fmt.Errorf("describe group %s: not in the response", group)
	case d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound):
		return nil, fmt.Errorf("describe group %s: %w", group, d.Err)
	case len(d.Members) > 0:
		return nil, fmt.Errorf("group %s has %d active members; stop them before resetting offsets (state %s)", group, len(d.Members), d.State)
	}

	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, af.fail("fetch committed offsets of group "+group, err)
	}
	if err := committed.Error(); err != nil {
		return nil, fmt.Errorf("fetch committed offsets of group %s: %w", group, err)
	}

	want := make(kadm.TopicsSet)
	if len(sel.order) == 0 {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.At >= 0 {
				want.Add(o.Topic, o.Partition)
			}
		})
		if len(want) == 0 {
			return nil, fmt.Errorf("group %s has no committed offsets; name the topics with --topic", group)
		}
	} else {
		listed, err := adm.ListTopics(ctx, sel.order...)
		if err != nil {
			return nil, af.fail("list topics", err)
		}
		for _, topic := range sel.order {
			td, ok := listed[topic]
			switch {
			case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
				return nil, fmt.Errorf("topic %s does not exist (flag -topic)", topic)
			case td.Err != nil:
				return nil, fmt.Errorf("topic %s: %w", topic, td.Err)
			}
			ps := sel.parts[topic]
			if ps == nil {
				for p := range td.Partitions {
					want.Add(topic, p)
				}
				continue
			}
			for _, p := range ps {
				if _, ok := td.Partitions[p]; !ok {
					return nil, fmt.Errorf("topic %s has no partition %d; it has %d (flag -topic)", topic, p, len(td.Partitions))
				}
				want.Add(topic, p)
			}
		}
	}

	names := want.Topics()
	start, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, af.fail("list log start offsets", err)
	}
	end, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, af.fail("list log end offsets", err)
	}
	var at kadm.ListedOffsets
	if target.kind == "datetime" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, target.at.UnixMilli(), names...); err != nil {
			return nil, af.fail("list offsets by time", err)
		}
	}

	var plan []resetPartitionJSON
	for _, tp := range want.Sorted() {
		for _, p := range tp.Partitions {
			lo, err := listedOffset(start, tp.Topic, p)
			if err != nil {
				return nil, fmt.Errorf("log start offset of %s/%d: %w", tp.Topic, p, err)
			}
			hi, err := listedOffset(end, tp.Topic, p)
			if err != nil {
				return nil, fmt.Errorf("log end offset of %s/%d: %w", tp.Topic, p, err)
			}
			r := resetPartitionJSON{Topic: tp.Topic, Partition: p}
			if c, ok := committed.Lookup(tp.Topic, p); ok && c.At >= 0 {
				r.CurrentOffset = i64p(c.At)
			}
			switch target.kind {
			case "earliest":
				r.NewOffset = lo.Offset
			case "latest":
				r.NewOffset = hi.Offset
			case "offset":
				r.NewOffset = target.offset
				if target.offset < lo.Offset {
					r.NewOffset = lo.Offset
					r.Note = fmt.Sprintf("-to-offset %d is before the log start offset; clamped to %d", target.offset, lo.Offset)
				} else if target.offset > hi.Offset {
					r.NewOffset = hi.Offset
					r.Note = fmt.Sprintf("-to-offset %d is past the log end offset; clamped to %d", target.offset, hi.Offset)
				}
			case "datetime":
				o, err := listedOffset(at, tp.Topic, p)
				if err != nil {
					return nil, fmt.Errorf("offset by time of %s/%d: %w", tp.Topic, p, err)
				}
				r.NewOffset = o.Offset
				if o.Offset < 0 || o.Timestamp < target.at.UnixMilli() {
					// ListOffsetsAfterMilli answers the log end offset when
					// no record is at or after the time.
					r.NewOffset = hi.Offset
					r.Note = "no record at or after " + target.at.UTC().Format(time.RFC3339Nano) + "; using the log end offset"
				}
			}
			plan = append(plan, r)
		}
	}
	return plan, nil
}

func listedOffset(l kadm.ListedOffsets, topic string, p int32) (kadm.ListedOffset, error) {
	o, ok := l.Lookup(topic, p)
	if !ok {
		if miss, ok := l.Lookup(topic, -1); ok && miss.Err != nil {
			return o, miss.Err
		}
		return o, errors.New("no answer for the partition")
	}
	return o, o.Err
}

func printResetPlan(w io.Writer, doc resetJSON) error {
	tw := newTable(w)
	row(tw, "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
	for _, p := range doc.Partitions {
		row(tw, p.Topic, strconv.Itoa(int(p.Partition)), i64Dash(p.CurrentOffset), strconv.FormatInt(p.NewOffset, 10))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range doc.Partitions {
		if p.Note != "" {
			fmt.Fprintf(w, "note: %s/%d: %s\n", p.Topic, p.Partition, p.Note)
		}
	}
	switch {
	case doc.DryRun:
		fmt.Fprintln(w, "dry run: nothing changed")
	case doc.Committed:
		fmt.Fprintf(w, "committed new offsets for %d partition(s) of group %s\n", len(doc.Partitions), doc.Group)
	default:
		for _, p := range doc.Partitions {
			if p.Error != "" {
				fmt.Fprintf(w, "failed: %s/%d: %s\n", p.Topic, p.Partition, p.Error)
			}
		}
	}
	return nil
}

// parseInterspersed parses args, which may mix flags and positional
// arguments ("--" ends the flags), and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, error) {
	fs.SetOutput(stderr)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, err
			}
			return nil, usageError{err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseBootstrap splits a host:port[,host:port...] list; source names the
// flag or variable it came from in errors.
func parseBootstrap(list, source string) ([]string, error) {
	var seeds []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return nil, usageError{fmt.Errorf("invalid value %q for %s: %q is not host:port", list, source, s)}
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, usageError{fmt.Errorf("invalid value %q for %s: want host:port[,host:port...]", list, source)}
	}
	return seeds, nil
}
