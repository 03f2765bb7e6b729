package main

import (
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
