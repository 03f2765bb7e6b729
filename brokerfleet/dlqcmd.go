package main

// brokerfleet dlq: list, show, replay and purge dead letters through the
// DLQ console's JSON API (functions/dlqconsole), locally or in AWS.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stratamq/strata/functions/dlqconsole"
)

const dlqHelp = `usage: brokerfleet dlq <verb> [flags] [args]

Inspects and handles dead letters (records in <topic>.dlq topics) through
the DLQ console's JSON API.

verbs:
  list [TOPIC]                      DLQ topics with their letter counts; with TOPIC, its letters
  show TOPIC PARTITION OFFSET       one letter: headers, failure history, decoded value
  replay TOPIC P:O [P:O...]         produce letters back to their origin topic and partition
  purge TOPIC (-all | -up-to P:O... | P:O...)
                                    hide letters from the console (commit its group past them)

Every verb takes -console (default: STRATA_DLQ_CONSOLE, else
http://127.0.0.1:8081/console), -json and -timeout. Run
'brokerfleet dlq <verb> -help' for its flags.
`

const (
	dlqListHelp = `usage: brokerfleet dlq list [flags] [TOPIC]

Without TOPIC, lists the DLQ topics and how many letters each has left.
With TOPIC (a .dlq topic), lists its letters in partition then offset
order, -limit at a time; the last line says how to get the next page.

flags:
`
	dlqShowHelp = `usage: brokerfleet dlq show [flags] TOPIC PARTITION OFFSET

Shows one letter: origin, attempts, failure history, headers, key and
value (decoded through the schema registry when the value has a Confluent
header, else text or hex).

flags:
`
	dlqReplayHelp = `usage: brokerfleet dlq replay [flags] TOPIC PARTITION:OFFSET [PARTITION:OFFSET...]

Produces the letters back to their origin topic and partition with their
key, value and headers, adding strata.dlq.replayed-at and incrementing
strata.dlq.replays, and hides them from the console. A letter that was
already replayed is refused unless -force.

flags:
`
	dlqPurgeHelp = `usage: brokerfleet dlq purge [flags] TOPIC (-all | -up-to PARTITION:OFFSET... | PARTITION:OFFSET...)

Hides letters from the console by moving its consumer group past them:
every letter of the topic (-all), every letter of a partition up to and
including an offset (-up-to, repeatable), or exactly the letters named.

flags:
`
)

const defaultDLQConsole = "http://127.0.0.1:8081/console"

// dlqFlags are the flags every dlq verb takes.
type dlqFlags struct {
	console string
	json    bool
	timeout time.Duration
}

func (f *dlqFlags) register(fs *flag.FlagSet) {
	f.console = defaultDLQConsole
	if v := os.Getenv("STRATA_DLQ_CONSOLE"); v != "" {
		f.console = v
	}
	fs.StringVar(&f.console, "console", f.console, "base `URL` of the DLQ console; STRATA_DLQ_CONSOLE sets the default")
	fs.BoolVar(&f.json, "json", false, "print the API's JSON instead of tables")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "limit for the whole command")
}

// parse parses args, which may mix flags and positional arguments, and
// returns the positional ones.
func (f *dlqFlags) parse(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, error) {
	pos, err := parseInterspersed(fs, args, stderr)
	if err != nil {
		return nil, err
	}
	source := "flag -console"
	if !flagSet(fs, "console") && os.Getenv("STRATA_DLQ_CONSOLE") != "" {
		source = "STRATA_DLQ_CONSOLE"
	}
	u, err := url.Parse(f.console)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Errorf("invalid value %q for %s: want an http(s) URL such as %s", f.console, source, defaultDLQConsole)}
	}
	f.console = strings.TrimRight(f.console, "/")
	if f.timeout <= 0 {
		return nil, usageError{fmt.Errorf("invalid value %s for flag -timeout: must be positive", f.timeout)}
	}
	return pos, nil
}

// dlqAPIError is an error answer of the console.
type dlqAPIError struct {
	status int
	msg    string
}

func (e *dlqAPIError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.msg, e.status) }

// call sends one API request; into receives the JSON answer.
func (f *dlqFlags) call(ctx context.Context, method, path string, body, into any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.console+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer from the console at %s within %s (flag -timeout): %w", f.console, f.timeout, err)
		}
		return fmt.Errorf("reach the console at %s (flag -console): %w", f.console, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the console's answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
			if len(e.Error) > 200 || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
				e.Error = fmt.Sprintf("%s %s: not a DLQ console API answer (is -console %s right?)", method, f.console+path, f.console)
			}
		}
		return &dlqAPIError{status: resp.StatusCode, msg: e.Error}
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s %s: not a DLQ console API answer (is -console %s right?): %w", method, f.console+path, f.console, err)
	}
	return nil
}

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runVerbs(ctx, "dlq", dlqHelp, []verb{{"list", dlqList}, {"show", dlqShow}, {"replay", dlqReplay}, {"purge", dlqPurge}}, args, stdout, stderr)
}

func newDLQFlags(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("dlq "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

// parseDLQRef reads PARTITION:OFFSET.
func parseDLQRef(s, what string) (dlqconsole.LetterRef, error) {
	ps, offs, ok := strings.Cut(s, ":")
	p, perr := strconv.ParseInt(ps, 10, 32)
	o, oerr := strconv.ParseInt(offs, 10, 64)
	if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
		return dlqconsole.LetterRef{}, usageError{fmt.Errorf("invalid %s %q: want PARTITION:OFFSET, both integers >= 0", what, s)}
	}
	return dlqconsole.LetterRef{Partition: int32(p), Offset: o}, nil
}

// dlqTopicArg checks the topic argument.
func dlqTopicArg(pos []string) (string, []string, error) {
	if len(pos) == 0 {
		return "", nil, usageError{errors.New("name the .dlq topic")}
	}
	if !strings.HasSuffix(pos[0], ".dlq") {
		return "", nil, usageError{fmt.Errorf("topic %q is not a dead-letter topic: its name must end in .dlq", pos[0])}
	}
	return pos[0], pos[1:], nil
}

func dlqTopicPath(topic string) string { return "/api/topics/" + url.PathEscape(topic) }

// ---- list ----

func dlqList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var df dlqFlags
	fs := newDLQFlags("list", dlqListHelp)
	df.register(fs)
	limit := fs.Int("limit", 100, "letters per page, 1 to 1000 (with TOPIC)")
	after := fs.String("after", "", "list the letters after `PARTITION:OFFSET` (the next page; with TOPIC)")
	pos, err := df.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usageError{fmt.Errorf("invalid value %d for flag -limit: want 1 to 1000", *limit)}
	}
	if *after != "" {
		if _, err := parseDLQRef(*after, "value for flag -after"); err != nil {
			return err
		}
	}
	switch len(pos) {
	case 0:
		if flagSet(fs, "limit") || flagSet(fs, "after") {
			return usageError{errors.New("flags -limit and -after need a TOPIC")}
		}
		var doc struct {
			Topics []dlqconsole.TopicSummary `json:"topics"`
		}
		if err := df.call(ctx, "GET", "/api/topics", nil, &doc); err != nil {
			return fmt.Errorf("list DLQ topics: %w", err)
		}
		if df.json {
			return writeJSON(stdout, doc)
		}
		if len(doc.Topics) == 0 {
			fmt.Fprintln(stdout, "no DLQ topics")
			return nil
		}
		tw := newTable(stdout)
		row(tw, "TOPIC", "ORIGIN", "LETTERS", "PARTITIONS")
		for _, t := range doc.Topics {
			row(tw, t.Topic, t.OriginTopic, strconv.FormatInt(t.Letters, 10), strconv.Itoa(len(t.Partitions)))
		}
		return tw.Flush()
	case 1:
	default:
		return usageError{fmt.Errorf("list takes at most one topic, got %q", pos)}
	}
	topic, _, err := dlqTopicArg(pos)
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	if *after != "" {
		q.Set("after", *after)
	}
	var page dlqconsole.LetterPage
	if err := df.call(ctx, "GET", dlqTopicPath(topic)+"/letters?"+q.Encode(), nil, &page); err != nil {
		return fmt.Errorf("list letters of %s: %w", topic, err)
	}
	if df.json {
		return writeJSON(stdout, page)
	}
	if len(page.Letters) == 0 {
		fmt.Fprintf(stdout, "no dead letters left in %s\n", topic)
		return nil
	}
	tw := newTable(stdout)
	row(tw, "PARTITION", "OFFSET", "TIME", "ORIGIN", "ATTEMPTS", "REPLAYS", "LAST-ERROR", "VALUE")
	for _, l := range page.Letters {
		row(tw, strconv.Itoa(int(l.Partition)), strconv.FormatInt(l.Offset, 10), l.Timestamp.Format(time.RFC3339),
			fmt.Sprintf("%s/%d@%d", orDash(l.OriginTopic), l.OriginPartition, l.OriginOffset),
			strconv.Itoa(l.Attempts), strconv.Itoa(l.Replays), orDash(dlqOneLine(l.LastError, 60)), dlqOneLine(dlqShown(l.Value), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(stdout, "more: brokerfleet dlq list %s -after %s\n", topic, page.Next)
	}
	return nil
}

// dlqShown renders a key or value in one string.
func dlqShown(s dlqconsole.Shown) string {
	switch s.Encoding {
	case "null":
		return "null"
	case "text":
		return strconv.Quote(s.Data)
	case "hex":
		return "0x" + s.Data
	}
	return s.Data
}

// dlqOneLine keeps a table cell on one line and at most n runes.
func dlqOneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// ---- show ----

func dlqShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var df dlqFlags
	fs := newDLQFlags("show", dlqShowHelp)
	df.register(fs)
	pos, err := df.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	topic, rest, err := dlqTopicArg(pos)
	if err != nil {
		return err
	}
	var ref dlqconsole.LetterRef
	switch len(rest) {
	case 1: // PARTITION:OFFSET
		if ref, err = parseDLQRef(rest[0], "letter"); err != nil {
			return err
		}
	case 2:
		if ref, err = parseDLQRef(rest[0]+":"+rest[1], "PARTITION OFFSET"); err != nil {
			return err
		}
	default:
		return usageError{errors.New("show takes TOPIC PARTITION OFFSET")}
	}
	var l dlqconsole.Letter
	if err := df.call(ctx, "GET", fmt.Sprintf("%s/letters/%d/%d", dlqTopicPath(topic), ref.Partition, ref.Offset), nil, &l); err != nil {
		return fmt.Errorf("show letter %s %d@%d: %w", topic, ref.Partition, ref.Offset, err)
	}
	if df.json {
		return writeJSON(stdout, l)
	}
	tw := newTable(stdout)
	row(tw, "letter:", fmt.Sprintf("%s %d@%d", l.Topic, l.Partition, l.Offset))
	row(tw, "time:", l.Timestamp.Format(time.RFC3339Nano))
	row(tw, "origin:", fmt.Sprintf("%s partition %d offset %d", orDash(l.OriginTopic), l.OriginPartition, l.OriginOffset))
	row(tw, "attempts:", strconv.Itoa(l.Attempts))
	if l.FirstFailure != nil {
		row(tw, "first failure:", l.FirstFailure.Format(time.RFC3339Nano))
	}
	row(tw, "function:", orDash(l.Function))
	row(tw, "last error:", orDash(dlqOneLine(l.LastError, 500)))
	replays := strconv.Itoa(l.Replays)
	if l.ReplayedAt != nil {
		replays += " (last " + l.ReplayedAt.Format(time.RFC3339Nano) + ")"
	}
	row(tw, "replays:", replays)
	if l.Handled {
		row(tw, "handled:", "yes (the console already replayed or purged it)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.HeaderError != "" {
		fmt.Fprintf(stdout, "malformed retry headers: %s\n", l.HeaderError)
	}
	if len(l.History) > 0 {
		fmt.Fprintln(stdout, "\nfailure history:")
		tw := newTable(stdout)
		row(tw, "  ATTEMPT", "AT", "ERROR")
		for _, f := range l.History {
			row(tw, "  "+strconv.Itoa(f.Attempt), f.At.Format(time.RFC3339Nano), dlqOneLine(f.Error, 200))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "\nheaders:")
	for _, h := range l.Headers {
		fmt.Fprintf(stdout, "  %s: %s\n", h.Key, dlqShown(h.Value))
	}
	for _, kv := range []struct {
		name string
		s    dlqconsole.Shown
	}{{"key", l.Key}, {"value", l.Value}} {
		fmt.Fprintf(stdout, "\n%s (%s", kv.name, kv.s.Encoding)
		if kv.s.SchemaID != 0 {
			fmt.Fprintf(stdout, ", schema %d %s", kv.s.SchemaID, kv.s.SchemaType)
		}
		fmt.Fprintf(stdout, ", %d bytes):\n%s\n", kv.s.Size, kv.s.Data)
		if kv.s.Note != "" {
			fmt.Fprintf(stdout, "note: %s\n", kv.s.Note)
		}
	}
	return nil
}

// ---- replay ----

func dlqReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var df dlqFlags
	fs := newDLQFlags("replay", dlqReplayHelp)
	df.register(fs)
	force := fs.Bool("force", false, "replay letters that were already replayed")
	pos, err := df.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	topic, rest, err := dlqTopicArg(pos)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return usageError{errors.New("name the letters to replay as PARTITION:OFFSET")}
	}
	req := dlqconsole.ReplayRequest{Force: *force}
	for _, s := range rest {
		ref, err := parseDLQRef(s, "letter")
		if err != nil {
			return err
		}
		req.Letters = append(req.Letters, ref)
	}
	var doc struct {
		Replayed []dlqconsole.ReplayResult `json:"replayed"`
	}
	if err := df.call(ctx, "POST", dlqTopicPath(topic)+"/replay", req, &doc); err != nil {
		return fmt.Errorf("replay %s: %w", topic, err)
	}
	if df.json {
		return writeJSON(stdout, doc)
	}
	tw := newTable(stdout)
	row(tw, "PARTITION", "OFFSET", "TO-TOPIC", "TO-PARTITION", "TO-OFFSET", "REPLAYS")
	for _, r := range doc.Replayed {
		row(tw, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10), r.OriginTopic,
			strconv.Itoa(int(r.OriginPartition)), strconv.FormatInt(r.ReplayedOffset, 10), strconv.Itoa(r.Replays))
	}
	return tw.Flush()
}

// ---- purge ----

// dlqRefsFlag collects repeated PARTITION:OFFSET flag values.
type dlqRefsFlag struct{ refs []dlqconsole.LetterRef }

func (f *dlqRefsFlag) String() string { return "" }

func (f *dlqRefsFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		ref, err := parseDLQRef(strings.TrimSpace(v), "value")
		if err != nil {
			return errors.New("want PARTITION:OFFSET, both integers >= 0")
		}
		f.refs = append(f.refs, ref)
	}
	return nil
}

func dlqPurge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var df dlqFlags
	var upTo dlqRefsFlag
	fs := newDLQFlags("purge", dlqPurgeHelp)
	df.register(fs)
	all := fs.Bool("all", false, "purge every letter of the topic")
	fs.Var(&upTo, "up-to", "purge the letters of a partition up to and including `PARTITION:OFFSET`, repeatable")
	pos, err := df.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	topic, rest, err := dlqTopicArg(pos)
	if err != nil {
		return err
	}
	req := dlqconsole.PurgeRequest{All: *all, UpTo: upTo.refs}
	for _, s := range rest {
		ref, err := parseDLQRef(s, "letter")
		if err != nil {
			return err
		}
		req.Letters = append(req.Letters, ref)
	}
	n := 0
	for _, given := range []bool{*all, len(upTo.refs) > 0, len(rest) > 0} {
		if given {
			n++
		}
	}
	switch {
	case n == 0:
		return usageError{errors.New("name what to purge: -all, -up-to PARTITION:OFFSET, or letters as PARTITION:OFFSET")}
	case n > 1:
		return usageError{errors.New("-all, -up-to and letters cannot be combined: give one of them")}
	}
	var doc struct {
		Purged bool `json:"purged"`
	}
	if err := df.call(ctx, "POST", dlqTopicPath(topic)+"/purge", req, &doc); err != nil {
		return fmt.Errorf("purge %s: %w", topic, err)
	}
	if df.json {
		return writeJSON(stdout, doc)
	}
	switch {
	case *all:
		fmt.Fprintf(stdout, "purged every letter of %s\n", topic)
	case len(upTo.refs) > 0:
		for _, r := range upTo.refs {
			fmt.Fprintf(stdout, "purged the letters of %s partition %d up to offset %d\n", topic, r.Partition, r.Offset)
		}
	default:
		fmt.Fprintf(stdout, "purged %d letter(s) of %s\n", len(req.Letters), topic)
	}
	return nil
}
