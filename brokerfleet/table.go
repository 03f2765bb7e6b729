package main

// Helpers shared by the admin commands (topics, brokers, partitions, lag)
// on top of those in groupscmd.go (newTable, row, writeJSON, adminFlags):
// a text progress bar, terminal detection, and flag types.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// newCmdFlags returns the flag set of `brokerfleet CMD VERB`, whose -help
// prints help and then the flags.
func newCmdFlags(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

// isTerminal reports whether w is a terminal (a character device other
// than /dev/null).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// progressWidth is the number of cells between the brackets of a bar.
const progressWidth = 20

// progressBar draws done of total as [=========>          ].
func progressBar(done, total int) string {
	if total <= 0 || done >= total {
		return "[" + strings.Repeat("=", progressWidth) + "]"
	}
	done = max(done, 0)
	filled := done * progressWidth / total
	return "[" + strings.Repeat("=", filled) + ">" + strings.Repeat(" ", progressWidth-filled-1) + "]"
}

// progress shows a progress bar followed by a text: redrawn in place with
// \r on a terminal, otherwise printed as one line each time the text or
// the counts change, so logs and tests read every step.
type progress struct {
	w    io.Writer
	tty  bool
	last string // the line drawn last
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w)}
}

// update shows the bar, done/total, then text.
func (p *progress) update(done, total int, text string) {
	line := fmt.Sprintf("%s %d/%d %s", progressBar(done, total), done, total, text)
	if line == p.last {
		return
	}
	if p.tty {
		pad := max(len(p.last)-len(line), 0)
		fmt.Fprint(p.w, "\r"+line+strings.Repeat(" ", pad))
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.last = line
}

// finish ends the line redrawn on a terminal.
func (p *progress) finish() {
	if p.tty && p.last != "" {
		fmt.Fprintln(p.w)
	}
	p.last = ""
}

// int32List shows ids as 1,2,3, or "-" for none.
func int32List(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// parseBrokerIDs parses 1,2,3 into broker ids: non-negative, no repeats.
func parseBrokerIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a broker id", f)
		}
		for _, id := range ids {
			if id == int32(v) {
				return nil, fmt.Errorf("broker %d is listed twice", v)
			}
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

// parseTopicPartition parses TOPIC:PARTITION; the partition is after the
// last colon.
func parseTopicPartition(s string) (string, int32, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q is not TOPIC:PARTITION", s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", 0, fmt.Errorf("%q: %q is not a partition number", s, s[i+1:])
	}
	return s[:i], int32(p), nil
}

// configFlag collects repeated -config key=value flags in order. Unlike
// kvFlag it does not split on commas: list configs such as
// cleanup.policy=compact,delete hold them.
type configFlag struct {
	keys   []string
	values map[string]string
}

func (f *configFlag) String() string {
	if f == nil {
		return ""
	}
	kv := make([]string, len(f.keys))
	for i, k := range f.keys {
		kv[i] = k + "=" + f.values[k]
	}
	return strings.Join(kv, " ")
}

func (f *configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if f.values == nil {
		f.values = map[string]string{}
	}
	if _, seen := f.values[k]; !seen {
		f.keys = append(f.keys, k)
	}
	f.values[k] = v
	return nil
}
