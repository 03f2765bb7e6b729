package main

// brokerfleet lag: a live view of consumer group lag per group, topic and
// partition, with totals (kadm Lag).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const lagHelp = `usage: brokerfleet lag [flags]

Shows the lag of consumer groups: per group, topic and partition, the
committed offset, the log end offset (high watermark) and their difference,
then each group's total and the total of all groups. A partition without a
commit shows "-" and does not count in the totals.

On a terminal the view is redrawn every -watch interval until Ctrl-C; with
-once, or when standard output is not a terminal (and -watch is not given),
it is printed once. With -json each view is one JSON document.

flags:
`

// clearScreen moves the cursor home and clears a terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

type lagPartitionJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"currentOffset"` // null: nothing committed
	LogEndOffset  *int64 `json:"logEndOffset"`  // null: unknown
	Lag           *int64 `json:"lag"`           // null: nothing committed, or unknown
	Error         string `json:"error,omitempty"`
}

type lagGroupJSON struct {
	Group      string             `json:"group"`
	State      string             `json:"state"`
	Members    int                `json:"members"`
	TotalLag   *int64             `json:"totalLag"` // null: no committed offsets
	Partitions []lagPartitionJSON `json:"partitions"`
	Error      string             `json:"error,omitempty"`
}

type lagJSON struct {
	Time     time.Time      `json:"time"`
	Groups   []lagGroupJSON `json:"groups"`
	TotalLag int64          `json:"totalLag"`
}

func runLag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		af     adminFlags
		groups stringsFlag
		every  time.Duration
		once   bool
	)
	fs := newCmdFlags("lag", lagHelp)
	af.register(fs)
	fs.Lookup("timeout").Usage = "limit for each view, connecting included"
	fs.Var(&groups, "group", "only group `G[,G...]`, repeatable (default: every group)")
	fs.DurationVar(&every, "watch", 2*time.Second, "redraw every `interval`")
	fs.BoolVar(&once, "once", false, "print the view once and exit")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (groups are named with -group)", pos[0])}
	}
	if every <= 0 {
		return usageError{fmt.Errorf("invalid value %s for flag -watch: must be positive", every)}
	}
	groups = dedupe(groups)
	tty := isTerminal(stdout)
	loop := !once && (tty || flagSet(fs, "watch"))

	adm, _, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	cancel() // each view has its own -timeout

	view := func() (lagJSON, error) {
		vctx, cancel := context.WithTimeout(ctx, af.timeout)
		defer cancel()
		return lagView(vctx, adm, &af, groups)
	}
	if !loop {
		doc, err := view()
		if err != nil {
			return err
		}
		if af.json {
			return writeJSON(stdout, doc)
		}
		return printLag(stdout, doc)
	}

	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		doc, err := view()
		var frame bytes.Buffer
		if tty && !af.json {
			frame.WriteString(clearScreen)
		}
		switch {
		case ctx.Err() != nil:
			return nil // Ctrl-C
		case af.json && err == nil:
			_ = writeJSON(&frame, doc)
		case af.json:
			fmt.Fprintf(stderr, "brokerfleet lag: %v\n", err)
		default:
			fmt.Fprintf(&frame, "lag every %s at %s (Ctrl-C to stop)\n\n", every, time.Now().UTC().Format("15:04:05 UTC"))
			if err != nil {
				fmt.Fprintf(&frame, "error: %v\n", err)
			} else {
				_ = printLag(&frame, doc)
			}
			if !tty {
				frame.WriteString("\n")
			}
		}
		if _, err := stdout.Write(frame.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// lagView describes the lag of groups, or of every group if none is named.
func lagView(ctx context.Context, adm *kadm.Client, af *adminFlags, named []string) (lagJSON, error) {
	doc := lagJSON{Time: time.Now().UTC(), Groups: []lagGroupJSON{}}
	names := named
	if len(names) == 0 {
		listed, err := adm.ListGroups(ctx)
		if se, ok := errors.AsType[*kadm.ShardErrors](err); err != nil && (!ok || se.AllFailed) {
			return doc, af.fail("list groups", err)
		}
		names = listed.Groups()
	}
	if len(names) == 0 {
		return doc, nil
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return doc, af.fail("describe groups", err)
	}
	for _, l := range lags.Sorted() {
		if groupMissing(l.Error(), l.State) {
			if len(named) > 0 {
				return doc, fmt.Errorf("group %s does not exist (flag -group)", l.Group)
			}
			continue // deleted since it was listed
		}
		g := lagGroupJSON{Group: l.Group, State: l.State, Members: len(l.Members), Partitions: []lagPartitionJSON{}}
		if err := l.Error(); err != nil {
			g.Error = err.Error()
			doc.Groups = append(doc.Groups, g)
			continue
		}
		for _, pl := range l.Lag.Sorted() {
			p := lagPartitionJSON{Topic: pl.Topic, Partition: pl.Partition}
			if pl.End.Err == nil && pl.End.Offset >= 0 {
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
			g.Partitions = append(g.Partitions, p)
		}
		g.TotalLag = committedLag(l.Lag)
		if g.TotalLag != nil {
			doc.TotalLag += *g.TotalLag
		}
		doc.Groups = append(doc.Groups, g)
	}
	return doc, nil
}

func printLag(w io.Writer, doc lagJSON) error {
	if len(doc.Groups) == 0 {
		fmt.Fprintln(w, "no groups")
		return nil
	}
	tw := newTable(w)
	row(tw, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
	for _, g := range doc.Groups {
		for _, p := range g.Partitions {
			row(tw, g.Group, p.Topic, strconv.Itoa(int(p.Partition)), i64Dash(p.CurrentOffset), i64Dash(p.LogEndOffset), i64Dash(p.Lag))
		}
	}
	fmt.Fprintln(tw)
	row(tw, "GROUP", "STATE", "MEMBERS", "TOTAL-LAG")
	for _, g := range doc.Groups {
		row(tw, g.Group, orDash(g.State), strconv.Itoa(g.Members), i64Dash(g.TotalLag))
	}
	row(tw, "all groups", "", "", strconv.FormatInt(doc.TotalLag, 10))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range doc.Groups {
		if g.Error != "" {
			fmt.Fprintf(w, "error: group %s: %s\n", g.Group, g.Error)
		}
		for _, p := range g.Partitions {
			if p.Error != "" {
				fmt.Fprintf(w, "error: group %s: %s/%d: %s\n", g.Group, p.Topic, p.Partition, p.Error)
			}
		}
	}
	return nil
}
