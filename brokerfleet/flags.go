package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// envName is the environment variable that may set flag name:
// STRATA_ plus the name upper-cased with '-' as '_'.
func envName(name string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseFlags applies STRATA_* environment variables to fs's flags, then the
// command line, which wins. Errors name the flag or variable at fault.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, withEnv bool) error {
	fs.SetOutput(stderr)
	if withEnv {
		var err error
		fs.VisitAll(func(f *flag.Flag) {
			if err != nil {
				return
			}
			if v, ok := os.LookupEnv(envName(f.Name)); ok {
				if e := fs.Set(f.Name, v); e != nil {
					err = usageError{fmt.Errorf("invalid value %q for %s (flag -%s): %v", v, envName(f.Name), f.Name, e)}
				}
			}
		})
		if err != nil {
			return err
		}
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// kvFlag collects repeated key=value flags.
type kvFlag map[string]string

func (f kvFlag) String() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k+"="+f[k])
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// Set accepts key=value, or several separated by commas (the form an
// environment variable uses).
func (f kvFlag) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", kv)
		}
		f[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

// verb is one subcommand of a command with verbs (groups, topics, ...).
type verb struct {
	name string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// runVerbs runs the verb args[0] names with the rest of args, prints help
// for help/-h/-help/--help, and names the verbs on a missing or unknown one.
func runVerbs(ctx context.Context, cmd, help string, verbs []verb, args []string, stdout, stderr io.Writer) error {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(args) == 0 {
		return usageError{fmt.Errorf("missing verb: want %s (see 'brokerfleet %s -help')", want, cmd)}
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, help)
		return nil
	}
	for _, v := range verbs {
		if v.name == args[0] {
			return v.run(ctx, args[1:], stdout, stderr)
		}
	}
	return usageError{fmt.Errorf("unknown verb %q: want %s", args[0], want)}
}
