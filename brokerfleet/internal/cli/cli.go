// Package cli is the command-line plumbing of brokerfleet's admin commands
// (groups, topics, brokers, partitions, users, lag, dlq): verbs, flag sets
// that take flags between arguments, usage errors that name the flag at
// fault, the Kafka admin client built from -bootstrap, -timeout and the
// TLS/SASL flags, and output as aligned tables or one JSON document.
//
// A verb reads as flags → client → call → render:
//
//	a := cli.NewAdmin("topics list", topicsListHelp) // -bootstrap, -json, -timeout, TLS, SASL
//	internal := a.Flags.Bool("internal", false, "include internal topics")
//	pos, err := a.Parse(args, stderr) // then check pos, e.g. cli.NoArgs(pos)
//	...
//	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
//		td, err := adm.ListTopicsWithInternal(ctx)
//		if err != nil {
//			return a.Fail("list topics", err) // names -timeout if the time ran out
//		}
//		return a.Print(stdout, doc, func() error { tw := cli.NewTable(stdout); ...; return tw.Flush() })
//	})
//
// brokerfleet exits 2 on a UsageError (made by Usagef, BadFlag, Invalid
// and the parsers here) and 1 on other errors.
package cli

import (
	"errors"
	"fmt"
	"time"
)

// UsageError marks a mistake in the command line or the environment; the
// command then exits 2 instead of 1.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }

func (e UsageError) Unwrap() error { return e.Err }

// IsUsage reports whether err is, or wraps, a UsageError.
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue)
}

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// Invalid returns the usage error for a value that source does not
// accept: "invalid value V for SOURCE: WHY". Source is "flag -NAME" or an
// environment variable; a string value is quoted.
func Invalid(source string, value any, why string) error {
	if s, ok := value.(string); ok {
		return Usagef("invalid value %q for %s: %s", s, source, why)
	}
	return Usagef("invalid value %v for %s: %s", value, source, why)
}

// BadFlag is Invalid for flag -name.
func BadFlag(name string, value any, why string) error {
	return Invalid("flag -"+name, value, why)
}

// Positive returns a usage error naming flag -name unless d is positive.
func Positive(name string, d time.Duration) error {
	if d <= 0 {
		return BadFlag(name, d, "must be positive")
	}
	return nil
}
