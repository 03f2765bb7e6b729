package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultBootstrap is the broker contacted when neither -bootstrap nor
// STRATA_BOOTSTRAP is set.
const DefaultBootstrap = "127.0.0.1:9092"

// BootstrapVar defines -bootstrap on fs, stored in p: the brokers to
// contact, by default STRATA_BOOTSTRAP, else DefaultBootstrap.
func BootstrapVar(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "bootstrap", Getenv("STRATA_BOOTSTRAP", DefaultBootstrap), "brokers to contact, `host:port[,host:port...]`; STRATA_BOOTSTRAP sets the default")
}

// ParseBootstrap splits a host:port[,host:port...] list; source names the
// flag or variable it came from in errors (see Source).
func ParseBootstrap(list, source string) ([]string, error) {
	var seeds []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return nil, Invalid(source, list, fmt.Sprintf("%q is not host:port", s))
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, Invalid(source, list, "want host:port[,host:port...]")
	}
	return seeds, nil
}

// Admin is the command line of a verb that talks to a cluster through the
// Kafka admin API: its flag set, with -bootstrap, -json, -timeout and the
// TLS and SASL flags every such verb takes. The verb adds its own flags to
// Flags before Parse.
type Admin struct {
	Flags   *flag.FlagSet
	JSON    bool          // -json: one JSON document instead of text
	Timeout time.Duration // -timeout: the limit for the whole command

	bootstrap string
	seeds     []string // bootstrap, split and checked by Parse
	security  security
}

// NewAdmin returns the command line of `brokerfleet NAME`, whose -help
// prints help and then the flags.
func NewAdmin(name, help string) *Admin {
	a := &Admin{Flags: NewFlagSet(name, help)}
	BootstrapVar(a.Flags, &a.bootstrap)
	a.Flags.BoolVar(&a.JSON, "json", false, "print one indented JSON document instead of tables")
	a.Flags.DurationVar(&a.Timeout, "timeout", 10*time.Second, "limit for the whole command, connecting included")
	a.security.register(a.Flags)
	return a
}

// Parse parses args, which may mix flags and positional arguments, checks
// -bootstrap and -timeout, and returns the positional arguments.
func (a *Admin) Parse(args []string, stderr io.Writer) ([]string, error) {
	pos, err := Parse(a.Flags, args, stderr)
	if err != nil {
		return nil, err
	}
	if a.seeds, err = ParseBootstrap(a.bootstrap, Source(a.Flags, "bootstrap", "STRATA_BOOTSTRAP")); err != nil {
		return nil, err
	}
	if err := Positive("timeout", a.Timeout); err != nil {
		return nil, err
	}
	return pos, nil
}

// WaitTimeout raises -timeout to an hour, unless it was given, when wait
// is set: a verb that waits for data to move takes as long as that.
func (a *Admin) WaitTimeout(wait bool) {
	if wait && !IsSet(a.Flags, "timeout") {
		a.Timeout = time.Hour
	}
}

// Client returns an admin client for the bootstrap brokers whose requests
// ask the cluster to finish within -timeout. The caller closes it.
func (a *Admin) Client() (*kadm.Client, error) {
	sec, err := a.security.opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.seeds...), kgo.ClientID("brokerfleet-groups")}, sec...)...)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(a.Timeout.Milliseconds(), 1<<31-1)))
	return adm, nil
}

// Run calls call with a Client and a context bounded by -timeout, then
// closes the client: the verb's requests and output, after its flags and
// arguments are checked.
func (a *Admin) Run(ctx context.Context, call func(context.Context, *kadm.Client) error) error {
	adm, err := a.Client()
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	return call(ctx, adm)
}

// Fail wraps an error from a cluster request with what was being done
// and, when the time ran out, where and for how long (naming -timeout).
func (a *Admin) Fail(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer from %s within %s (flag -timeout): %w", what, a.bootstrap, a.Timeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Print writes doc as JSON with -json, else calls text to print it.
func (a *Admin) Print(w io.Writer, doc any, text func() error) error {
	return Print(w, a.JSON, doc, text)
}
