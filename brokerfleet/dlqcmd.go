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
	"strconv"
	"strings"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
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
	fs      *flag.FlagSet
	console string
	json    bool
	timeout time.Duration
}

// newDLQFlags returns the flag set of `brokerfleet dlq NAME` with the
// flags every dlq verb takes.
func newDLQFlags(name, help string) *dlqFlags {
	f := &dlqFlags{fs: cli.NewFlagSet("dlq "+name, help)}
	f.fs.StringVar(&f.console, "console", cli.Getenv("STRATA_DLQ_CONSOLE", defaultDLQConsole), "base `URL` of the DLQ console; STRATA_DLQ_CONSOLE sets the default")
	f.fs.BoolVar(&f.json, "json", false, "print the API's JSON instead of tables")
	f.fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "limit for the whole command")
	return f
}

// parse parses args, which may mix flags and positional arguments, and
// returns the positional ones.
func (f *dlqFlags) parse(args []string, stderr io.Writer) ([]string, error) {
	pos, err := cli.Parse(f.fs, args, stderr)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(f.console)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, cli.Invalid(cli.Source(f.fs, "console", "STRATA_DLQ_CONSOLE"), f.console, "want an http(s) URL such as "+defaultDLQConsole)
	}
	f.console = strings.TrimRight(f.console, "/")
	if err := cli.Positive("timeout", f.timeout); err != nil {
		return nil, err
	}
	return pos, nil
}

// print writes doc as JSON with -json, else calls text to print it.
func (f *dlqFlags) print(w io.Writer, doc any, text func() error) error {
	return cli.Print(w, f.json, doc, text)
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
	return cli.RunVerbs(ctx, "dlq", dlqHelp, []cli.Verb{
		{Name: "list", Run: dlqList},
		{Name: "show", Run: dlqShow},
		{Name: "replay", Run: dlqReplay},
		{Name: "purge", Run: dlqPurge},
	}, args, stdout, stderr)
}

// parseDLQRef reads PARTITION:OFFSET.
func parseDLQRef(s, what string) (dlqconsole.LetterRef, error) {
	ps, offs, ok := strings.Cut(s, ":")
	p, perr := strconv.ParseInt(ps, 10, 32)
	o, oerr := strconv.ParseInt(offs, 10, 64)
	if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
		return dlqconsole.LetterRef{}, cli.Usagef("invalid %s %q: want PARTITION:OFFSET, both integers >= 0", what, s)
	}
	return dlqconsole.LetterRef{Partition: int32(p), Offset: o}, nil
}

// dlqTopicArg checks the topic argument.
func dlqTopicArg(pos []string) (string, []string, error) {
	if len(pos) == 0 {
		return "", nil, cli.Usagef("name the .dlq topic")
	}
	if !strings.HasSuffix(pos[0], ".dlq") {
		return "", nil, cli.Usagef("topic %q is not a dead-letter topic: its name must end in .dlq", pos[0])
	}
	return pos[0], pos[1:], nil
}

func dlqTopicPath(topic string) string { return "/api/topics/" + url.PathEscape(topic) }

// ---- list ----

func dlqList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	df := newDLQFlags("list", dlqListHelp)
	limit := df.fs.Int("limit", 100, "letters per page, 1 to 1000 (with TOPIC)")
	after := df.fs.String("after", "", "list the letters after `PARTITION:OFFSET` (the next page; with TOPIC)")
	pos, err := df.parse(args, stderr)
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return cli.BadFlag("limit", *limit, "want 1 to 1000")
	}
	if *after != "" {
		if _, err := parseDLQRef(*after, "value for flag -after"); err != nil {
			return err
		}
	}
	switch len(pos) {
	case 0:
		if cli.IsSet(df.fs, "limit") || cli.IsSet(df.fs, "after") {
			return cli.Usagef("flags -limit and -after need a TOPIC")
		}
		return dlqListTopics(ctx, df, stdout)
	case 1:
	default:
		return cli.Usagef("list takes at most one topic, got %q", pos)
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
	return df.print(stdout, page, func() error { return printLetters(stdout, topic, page) })
}

// dlqListTopics lists the DLQ topics.
func dlqListTopics(ctx context.Context, df *dlqFlags, stdout io.Writer) error {
	var doc struct {
		Topics []dlqconsole.TopicSummary `json:"topics"`
	}
	if err := df.call(ctx, "GET", "/api/topics", nil, &doc); err != nil {
		return fmt.Errorf("list DLQ topics: %w", err)
	}
	return df.print(stdout, doc, func() error {
		if len(doc.Topics) == 0 {
			fmt.Fprintln(stdout, "no DLQ topics")
			return nil
		}
		tw := cli.NewTable(stdout)
		tw.Row("TOPIC", "ORIGIN", "LETTERS", "PARTITIONS")
		for _, t := range doc.Topics {
			tw.Row(t.Topic, t.OriginTopic, strconv.FormatInt(t.Letters, 10), strconv.Itoa(len(t.Partitions)))
		}
		return tw.Flush()
	})
}

func printLetters(w io.Writer, topic string, page dlqconsole.LetterPage) error {
	if len(page.Letters) == 0 {
		fmt.Fprintf(w, "no dead letters left in %s\n", topic)
		return nil
	}
	tw := cli.NewTable(w)
	tw.Row("PARTITION", "OFFSET", "TIME", "ORIGIN", "ATTEMPTS", "REPLAYS", "LAST-ERROR", "VALUE")
	for _, l := range page.Letters {
		tw.Row(strconv.Itoa(int(l.Partition)), strconv.FormatInt(l.Offset, 10), l.Timestamp.Format(time.RFC3339),
			fmt.Sprintf("%s/%d@%d", cli.Dash(l.OriginTopic), l.OriginPartition, l.OriginOffset),
			strconv.Itoa(l.Attempts), strconv.Itoa(l.Replays), cli.Dash(dlqOneLine(l.LastError, 60)), dlqOneLine(dlqShown(l.Value), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: brokerfleet dlq list %s -after %s\n", topic, page.Next)
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
	df := newDLQFlags("show", dlqShowHelp)
	pos, err := df.parse(args, stderr)
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
		return cli.Usagef("show takes TOPIC PARTITION OFFSET")
	}
	var l dlqconsole.Letter
	if err := df.call(ctx, "GET", fmt.Sprintf("%s/letters/%d/%d", dlqTopicPath(topic), ref.Partition, ref.Offset), nil, &l); err != nil {
		return fmt.Errorf("show letter %s %d@%d: %w", topic, ref.Partition, ref.Offset, err)
	}
	return df.print(stdout, l, func() error { return printLetter(stdout, l) })
}

func printLetter(stdout io.Writer, l dlqconsole.Letter) error {
	tw := cli.NewTable(stdout)
	tw.Row("letter:", fmt.Sprintf("%s %d@%d", l.Topic, l.Partition, l.Offset))
	tw.Row("time:", l.Timestamp.Format(time.RFC3339Nano))
	tw.Row("origin:", fmt.Sprintf("%s partition %d offset %d", cli.Dash(l.OriginTopic), l.OriginPartition, l.OriginOffset))
	tw.Row("attempts:", strconv.Itoa(l.Attempts))
	if l.FirstFailure != nil {
		tw.Row("first failure:", l.FirstFailure.Format(time.RFC3339Nano))
	}
	tw.Row("function:", cli.Dash(l.Function))
	tw.Row("last error:", cli.Dash(dlqOneLine(l.LastError, 500)))
	replays := strconv.Itoa(l.Replays)
	if l.ReplayedAt != nil {
		replays += " (last " + l.ReplayedAt.Format(time.RFC3339Nano) + ")"
	}
	tw.Row("replays:", replays)
	if l.Handled {
		tw.Row("handled:", "yes (the console already replayed or purged it)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.HeaderError != "" {
		fmt.Fprintf(stdout, "unusable retry headers: %s\n", l.HeaderError)
	}
	if len(l.History) > 0 {
		fmt.Fprintln(stdout, "\nfailure history:")
		tw := cli.NewTable(stdout)
		tw.Row("  ATTEMPT", "AT", "ERROR")
		for _, f := range l.History {
			tw.Row("  "+strconv.Itoa(f.Attempt), f.At.Format(time.RFC3339Nano), dlqOneLine(f.Error, 200))
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
	df := newDLQFlags("replay", dlqReplayHelp)
	force := df.fs.Bool("force", false, "replay letters that were already replayed")
	pos, err := df.parse(args, stderr)
	if err != nil {
		return err
	}
	topic, rest, err := dlqTopicArg(pos)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return cli.Usagef("name the letters to replay as PARTITION:OFFSET")
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
	return df.print(stdout, doc, func() error { return printReplayed(stdout, doc.Replayed) })
}

func printReplayed(stdout io.Writer, replayed []dlqconsole.ReplayResult) error {
	tw := cli.NewTable(stdout)
	tw.Row("PARTITION", "OFFSET", "TO-TOPIC", "TO-PARTITION", "TO-OFFSET", "REPLAYS")
	for _, r := range replayed {
		tw.Row(strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10), r.OriginTopic,
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
	df := newDLQFlags("purge", dlqPurgeHelp)
	var upTo dlqRefsFlag
	all := df.fs.Bool("all", false, "purge every letter of the topic")
	df.fs.Var(&upTo, "up-to", "purge the letters of a partition up to and including `PARTITION:OFFSET`, repeatable")
	pos, err := df.parse(args, stderr)
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
		return cli.Usagef("name what to purge: -all, -up-to PARTITION:OFFSET, or letters as PARTITION:OFFSET")
	case n > 1:
		return cli.Usagef("-all, -up-to and letters cannot be combined: give one of them")
	}
	var doc struct {
		Purged bool `json:"purged"`
	}
	if err := df.call(ctx, "POST", dlqTopicPath(topic)+"/purge", req, &doc); err != nil {
		return fmt.Errorf("purge %s: %w", topic, err)
	}
	return df.print(stdout, doc, func() error {
		printPurged(stdout, topic, req)
		return nil
	})
}

func printPurged(stdout io.Writer, topic string, req dlqconsole.PurgeRequest) {
	switch {
	case req.All:
		fmt.Fprintf(stdout, "purged every letter of %s\n", topic)
	case len(req.UpTo) > 0:
		for _, r := range req.UpTo {
			fmt.Fprintf(stdout, "purged the letters of %s partition %d up to offset %d\n", topic, r.Partition, r.Offset)
		}
	default:
		fmt.Fprintf(stdout, "purged %d letter(s) of %s\n", len(req.Letters), topic)
	}
}
