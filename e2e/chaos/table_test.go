//go:build chaos

package chaos

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// thist builds synthetic histories of the compacted topic.
type thist struct{ h *History }

func (h thist) write(key string, n int, tomb bool, typ string, p int32, o int64) {
	v := fmt.Sprintf("%s:%d", key, n)
	h.h.Add(Op{Type: Invoke, F: FTableSend, Key: key, Value: v, Tomb: tomb})
	h.h.Add(Op{Type: typ, F: FTableSend, Key: key, Value: v, Tomb: tomb, Partition: p, Offset: o})
}

func (h thist) final(p int32, end int64, recs ...Rec) {
	h.h.Add(Op{Type: OK, F: FTableFinal, Partition: p, End: end, Recs: recs})
}

func tval(p int32, o int64, key string, n int) Rec {
	return Rec{Partition: p, Offset: o, Key: key, Value: fmt.Sprintf("%s:%d", key, n)}
}

func ttomb(p int32, o int64, key string) Rec {
	return Rec{Partition: p, Offset: o, Key: key, Tomb: true}
}

// base: a written 0, 1 (acked); b written 0, then deleted (acked); c
// written 0 (acked), then 1 with an unknown outcome.
func baseTable() thist {
	h := thist{NewHistory()}
	h.write("a", 0, false, OK, 0, 0)
	h.write("b", 0, false, OK, 0, 1)
	h.write("a", 1, false, OK, 0, 2)
	h.write("b", 1, true, OK, 0, 3)
	h.write("c", 0, false, OK, 1, 0)
	h.write("c", 1, false, Info, 0, 0)
	return h
}

func TestCheckTableValid(t *testing.T) {
	for name, finals := range map[string][]Rec{
		"uncompacted":      {tval(0, 0, "a", 0), tval(0, 1, "b", 0), tval(0, 2, "a", 1), ttomb(0, 3, "b")},
		"compacted":        {tval(0, 2, "a", 1), ttomb(0, 3, "b")},
		"tombstone gone":   {tval(0, 2, "a", 1)},
		"with gaps, later": {tval(0, 2, "a", 1)},
	} {
		for _, c := range [][]Rec{{tval(1, 0, "c", 0)}, {tval(1, 0, "c", 0), tval(1, 1, "c", 1)}} {
			h := baseTable()
			h.final(0, 4, finals...)
			h.final(1, 2, c...)
			r := CheckTable(h.h.Ops(), map[int32][]Rec{0: {tval(0, 2, "a", 1)}, 1: c[len(c)-1:]})
			require.True(t, r.Valid, "%s: %s %v", name, r.Summary(), r.Examples)
			require.Equal(t, 2, r.Keys)
			require.Equal(t, 1, r.Deletes)
		}
	}
}

func TestCheckTableAnomalies(t *testing.T) {
	cases := []struct {
		name  string
		final []Rec
		clean map[int32][]Rec
		kind  string
	}{
		{"an older value", []Rec{tval(0, 0, "a", 0), ttomb(0, 3, "b")}, nil, TableLost},
		{"a key gone", []Rec{ttomb(0, 3, "b")}, nil, TableLost},
		{"a deleted key back", []Rec{tval(0, 1, "b", 0), tval(0, 2, "a", 1)}, nil, TableResurrected},
		{"a value never sent", []Rec{tval(0, 2, "a", 1), tval(0, 5, "a", 7)}, nil, TableInconsistent},
		{"values out of order", []Rec{tval(0, 2, "a", 1), tval(0, 3, "a", 0)}, nil, TableInconsistent},
		{"offsets repeated", []Rec{tval(0, 2, "a", 1), tval(0, 2, "a", 1)}, nil, TableInconsistent},
		{"a tombstone left", []Rec{tval(0, 2, "a", 1)}, map[int32][]Rec{0: {tval(0, 2, "a", 1), ttomb(0, 3, "b")}, 1: {tval(1, 0, "c", 0)}}, TableUncompacted},
		{"a key twice", []Rec{tval(0, 2, "a", 1)}, map[int32][]Rec{0: {tval(0, 0, "a", 0), tval(0, 2, "a", 1)}, 1: {tval(1, 0, "c", 0)}}, TableUncompacted},
		{"compacted to another state", []Rec{tval(0, 2, "a", 1)}, map[int32][]Rec{0: {}, 1: {tval(1, 0, "c", 0)}}, TableInconsistent},
	}
	for _, c := range cases {
		h := baseTable()
		h.final(0, 4, c.final...)
		h.final(1, 1, tval(1, 0, "c", 0))
		r := CheckTable(h.h.Ops(), c.clean)
		require.False(t, r.Valid, c.name)
		require.Positive(t, r.Count(c.kind), "%s: %s %v", c.name, r.Summary(), r.Examples)
	}
	// A partition with acknowledged writes and no final read.
	h := baseTable()
	h.final(0, 4, tval(0, 2, "a", 1))
	r := CheckTable(h.h.Ops(), nil)
	require.Positive(t, r.Count(TableIncomplete), r.Summary())
	require.Zero(t, r.Count(TableLost), "keys of the unread partition are not judged")
}
