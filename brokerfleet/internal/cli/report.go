package cli

import (
	"fmt"
	"io"
)

// Outcome is what a verb did to one of the things named on its command
// line: a group deleted, a topic created.
type Outcome struct {
	Name  string
	Done  bool
	Error string // why not, unless Done
	Text  string // printed instead of the verb when Done, if set
}

// Report prints doc as JSON with -json, else a line per outcome: "KIND
// NAME: VERB" (or its Text) when done, "KIND NAME: not VERB: ERROR" when
// not. It returns an error unless every outcome is done.
func (a *Admin) Report(w io.Writer, kind, verb string, outs []Outcome, doc any) error {
	if err := a.Print(w, doc, func() error {
		for _, o := range outs {
			switch {
			case o.Done && o.Text != "":
				fmt.Fprintf(w, "%s %s: %s\n", kind, o.Name, o.Text)
			case o.Done:
				fmt.Fprintf(w, "%s %s: %s\n", kind, o.Name, verb)
			default:
				fmt.Fprintf(w, "%s %s: not %s: %s\n", kind, o.Name, verb, o.Error)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	failed := 0
	for _, o := range outs {
		if !o.Done {
			failed++
		}
	}
	switch {
	case failed == 0:
		return nil
	case len(outs) == 1:
		return fmt.Errorf("%s %s not %s: %s", kind, outs[0].Name, verb, outs[0].Error)
	}
	return fmt.Errorf("%d of %d %ss not %s", failed, len(outs), kind, verb)
}
