package schemaregistry

import (
	"strings"
	"testing"
)

// compatCase is a schema history and a new schema, with the outcome
// expected at each level listed.
type compatCase struct {
	name string
	prev []string // oldest first
	next string
	want map[string]bool // level name -> compatible
}

// B, F, FU and the T forms make the tables short.
const (
	B   = "BACKWARD"
	BT  = "BACKWARD_TRANSITIVE"
	F   = "FORWARD"
	FT  = "FORWARD_TRANSITIVE"
	FU  = "FULL"
	FUT = "FULL_TRANSITIVE"
	N   = "NONE"
)

func runCompatCases(t *testing.T, f format, cases []compatCase) {
	t.Helper()
	parse := func(t *testing.T, text string) parsed {
		t.Helper()
		c, err := f.canonical(text, false)
		if err != nil {
			t.Fatalf("canonical %s: %v", text, err)
		}
		p, err := f.parse(c, nil)
		if err != nil {
			t.Fatalf("parse %s: %v", text, err)
		}
		return p
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prev := make([]versioned, len(c.prev))
			for i, s := range c.prev {
				prev[i] = versioned{int64(i + 1), parse(t, s)}
			}
			next := parse(t, c.next)
			for lname, want := range c.want {
				l, ok := parseLevel(lname)
				if !ok {
					t.Fatalf("level %q", lname)
				}
				msgs := checkLevel(l, next, prev)
				if got := len(msgs) == 0; got != want {
					t.Errorf("%s: compatible=%v, want %v; messages: %s", lname, got, want, strings.Join(msgs, "; "))
				}
			}
		})
	}
}

func TestLevels(t *testing.T) {
	for _, n := range levelNames {
		l, ok := parseLevel(strings.ToLower(n))
		if !ok || l.String() != n {
			t.Fatalf("level %q parsed as %v %v", n, l, ok)
		}
	}
	if _, ok := parseLevel("SIDEWAYS"); ok {
		t.Fatal("an unknown level parsed")
	}
	for l, want := range map[level][2]bool{
		levelNone: {false, false}, levelBackward: {true, false}, levelForward: {false, true}, levelFull: {true, true},
		levelBackwardTransitive: {true, false}, levelForwardTransitive: {false, true}, levelFullTransitive: {true, true},
	} {
		if l.backward() != want[0] || l.forward() != want[1] {
			t.Errorf("%v: backward %v forward %v", l, l.backward(), l.forward())
		}
	}
}
