package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Verb is one verb of a command with verbs: list in `brokerfleet topics
// list`. Run gets the arguments after the verb.
type Verb struct {
	Name string
	Run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// RunVerbs runs the verb args[0] names with the rest of args, prints help
// for help/-h/-help/--help, and names the verbs on a missing or unknown
// one. Cmd is the command's name, for the messages.
func RunVerbs(ctx context.Context, cmd, help string, verbs []Verb, args []string, stdout, stderr io.Writer) error {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.Name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(args) == 0 {
		return Usagef("missing verb: want %s (see 'brokerfleet %s -help')", want, cmd)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, help)
		return nil
	}
	for _, v := range verbs {
		if v.Name == args[0] {
			return v.Run(ctx, args[1:], stdout, stderr)
		}
	}
	return Usagef("unknown verb %q: want %s", args[0], want)
}
