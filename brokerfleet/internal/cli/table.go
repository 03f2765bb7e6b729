package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Table aligns rows of cells in columns, two spaces apart, each as wide as
// its widest cell. An empty row ends a block of columns: the rows after it
// are aligned on their own. Nothing is written before Flush.
type Table struct{ tw *tabwriter.Writer }

// NewTable returns a table that writes to w.
func NewTable(w io.Writer) *Table {
	return &Table{tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
}

// Row adds a row; Row() adds an empty line.
func (t *Table) Row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// Flush writes the table.
func (t *Table) Flush() error { return t.tw.Flush() }

// Dash shows an empty cell as "-".
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Int64 shows a number, or a missing one as "-".
func Int64(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// Int32s shows ids as 1,2,3, or "-" for none.
func Int32s(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// WriteJSON writes v as one JSON document indented by two spaces, with a
// newline at the end.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Print writes doc to w with WriteJSON if asJSON (the -json flag), else
// calls text to print it.
func Print(w io.Writer, asJSON bool, doc any, text func() error) error {
	if asJSON {
		return WriteJSON(w, doc)
	}
	return text()
}
