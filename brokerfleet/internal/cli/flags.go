package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// NewFlagSet returns the flag set of `brokerfleet NAME` (NAME may hold a
// verb: "topics list"), whose -help prints help and then the flags.
func NewFlagSet(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args, which may mix flags and positional arguments ("--"
// ends the flags), and returns the positional ones. Flag errors, and the
// usage, go to stderr; the error is flag.ErrHelp for -help and a
// UsageError otherwise.
func Parse(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, error) {
	fs.SetOutput(stderr)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, err
			}
			return nil, UsageError{err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// IsSet reports whether flag name was given on the command line.
func IsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// Getenv returns the value of environment variable env, or def if it is
// unset or empty: the default of a flag that env may set.
func Getenv(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// Source names where the value of flag name came from, for Invalid: env
// if the flag was not given and env is set (see Getenv), else the flag.
func Source(fs *flag.FlagSet, name, env string) string {
	if !IsSet(fs, name) && os.Getenv(env) != "" {
		return env
	}
	return "flag -" + name
}

// NoArgs returns a usage error naming the first of pos, if any: for verbs
// that take no arguments.
func NoArgs(pos []string) error {
	if len(pos) > 0 {
		return Usagef("unexpected argument %q", pos[0])
	}
	return nil
}

// Names returns the positional names in pos in order, each once, or the
// usage error missing if there are none.
func Names(pos []string, missing string) ([]string, error) {
	if len(pos) == 0 {
		return nil, Usagef("%s", missing)
	}
	return Distinct(pos), nil
}

// Distinct returns ss in order without repeats: a name or flag given
// twice counts once.
func Distinct(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Strings collects a repeated flag, each value possibly comma-separated;
// empty values are dropped.
type Strings []string

func (f *Strings) String() string { return strings.Join(*f, ",") }

func (f *Strings) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*f = append(*f, v)
		}
	}
	return nil
}
