package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// IsTerminal reports whether w is a terminal (a character device other
// than /dev/null).
func IsTerminal(w io.Writer) bool {
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

// Progress shows a progress bar followed by a text: redrawn in place with
// \r on a terminal, otherwise printed as one line each time the text or
// the counts change, so logs and tests read every step.
type Progress struct {
	w    io.Writer
	tty  bool
	last string // the line drawn last
}

// NewProgress returns a progress bar drawn on w.
func NewProgress(w io.Writer) *Progress {
	return &Progress{w: w, tty: IsTerminal(w)}
}

// Update shows the bar, done/total, then text.
func (p *Progress) Update(done, total int, text string) {
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

// Finish ends the line redrawn on a terminal; the next Update starts a
// new one.
func (p *Progress) Finish() {
	if p.tty && p.last != "" {
		fmt.Fprintln(p.w)
	}
	p.last = ""
}
