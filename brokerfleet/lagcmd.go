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

	"github.com/stratamq/strata/brokerfleet/internal/cli"
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
	a := cli.NewAdmin("lag", lagHelp)
	a.Flags.Lookup("timeout").Usage = "limit for each view, connecting included"
	var groups cli.Strings
	a.Flags.Var(&groups, "group", "only group `G[,G...]`, repeatable (default: every group)")
	every := a.Flags.Duration("watch", 2*time.Second, "redraw every `interval`")
	once := a.Flags.Bool("once", false, "print the view once and exit")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q (groups are named with -group)", pos[0])
	}
	if err := cli.Positive("watch", *every); err != nil {
		return err
	}
	groups = cli.Distinct(groups)
	tty := cli.IsTerminal(stdout)
	loop := !*once && (tty || cli.IsSet(a.Flags, "watch"))

	adm, err := a.Client() // each view has its own -timeout
	if err != nil {
		return err
	}
	defer adm.Close()

	view := func() (lagJSON, error) {
		vctx, cancel := context.WithTimeout(ctx, a.Timeout)
		defer cancel()
		return lagView(vctx, adm, a, groups)
	}
	if !loop {
		doc, err := view()
		if err != nil {
			return err
		}
		return a.Print(stdout, doc, func() error { return printLag(stdout, doc) })
	}
	return watchLag(ctx, a.JSON, tty, *every, view, stdout, stderr)
}

// watchLag prints a view every interval until ctx ends (Ctrl-C): on a
// terminal it redraws the screen, else it appends; with -json (asJSON)
// each view is one document and errors go to stderr.
func watchLag(ctx context.Context, asJSON, tty bool, every time.Duration, view func() (lagJSON, error), stdout, stderr io.Writer) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		doc, err := view()
		var frame bytes.Buffer
		if tty && !asJSON {
			frame.WriteString(clearScreen)
		}
		switch {
		case ctx.Err() != nil:
			return nil // Ctrl-C
		case asJSON && err == nil:
			_ = cli.WriteJSON(&frame, doc)
		case asJSON:
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
func lagView(ctx context.Context, adm *kadm.Client, a *cli.Admin, named []string) (lagJSON, error) {
	doc := lagJSON{Time: time.Now().UTC(), Groups: []lagGroupJSON{}}
	names := named
	if len(names) == 0 {
		listed, err := adm.ListGroups(ctx)
		if se, ok := errors.AsType[*kadm.ShardErrors](err); err != nil && (!ok || se.AllFailed) {
			return doc, a.Fail("list groups", err)
		}
		names = listed.Groups()
	}
	if len(names) == 0 {
		return doc, nil
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return doc, a.Fail("describe groups", err)
	}
	for _, l := range lags.Sorted() {
		if groupMissing(l.Error(), l.State) {
			// A consumer-protocol group, which DescribeGroups says is Dead?
			if d, ok := describeConsumer(ctx, adm, l.Group); ok {
				g := lagGroupJSON{Group: d.Group, State: d.State, Members: len(d.Members), TotalLag: d.TotalLag, Partitions: []lagPartitionJSON{}, Error: d.Error}
				for _, p := range d.Partitions {
					g.Partitions = append(g.Partitions, lagPartitionJSON{Topic: p.Topic, Partition: p.Partition, CurrentOffset: p.CurrentOffset,
						LogEndOffset: p.LogEndOffset, Lag: p.Lag, Error: p.Error})
				}
				if g.TotalLag != nil {
					doc.TotalLag += *g.TotalLag
				}
				doc.Groups = append(doc.Groups, g)
				continue
			}
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
			p.CurrentOffset, p.Lag, p.Error = commitAndLag(pl)
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
	tw := cli.NewTable(w)
	tw.Row("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
	for _, g := range doc.Groups {
		for _, p := range g.Partitions {
			tw.Row(g.Group, p.Topic, strconv.Itoa(int(p.Partition)), cli.Int64(p.CurrentOffset), cli.Int64(p.LogEndOffset), cli.Int64(p.Lag))
		}
	}
	tw.Row()
	tw.Row("GROUP", "STATE", "MEMBERS", "TOTAL-LAG")
	for _, g := range doc.Groups {
		tw.Row(g.Group, cli.Dash(g.State), strconv.Itoa(g.Members), cli.Int64(g.TotalLag))
	}
	tw.Row("all groups", "", "", strconv.FormatInt(doc.TotalLag, 10))
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
