package main

// brokerfleet users: list, set and delete SASL/SCRAM users over the Kafka
// admin API (DescribeUserScramCredentials, AlterUserScramCredentials),
// against Strata or any Kafka-compatible cluster.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const usersHelp = `usage: brokerfleet users <verb> [flags] [USER...]

Administers SASL/SCRAM users through the Kafka admin API of any broker in
the cluster. Brokers keep only salted keys, never passwords.

verbs:
  list [USER...]       users with their SCRAM mechanisms and iterations
  set USER             create a user or change its password (-password or
                       STRATA_USER_PASSWORD) for each -mechanism
  delete USER...       delete users' credentials (every mechanism, or -mechanism)

Every verb takes -bootstrap (default: STRATA_BOOTSTRAP, else 127.0.0.1:9092),
-json, -timeout, and -tls, -tls-ca, -sasl-user, -sasl-password (default
STRATA_SASL_USER, STRATA_SASL_PASSWORD) to reach secured listeners.
`

const (
	usersListHelp = `usage: brokerfleet users list [flags] [USER...]

Lists SCRAM users (all, or the ones named): USER MECHANISM ITERATIONS.

flags:
`
	usersSetHelp = `usage: brokerfleet users set [flags] USER

Creates USER or changes its password, for SCRAM-SHA-512 and SCRAM-SHA-256
unless -mechanism names one. The password comes from -password or
STRATA_USER_PASSWORD.

flags:
`
	usersDeleteHelp = `usage: brokerfleet users delete [flags] USER [USER...]

Deletes the users' SCRAM credentials (every mechanism they have, unless
-mechanism names one).

flags:
`
)

func runUsers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.RunVerbs(ctx, "users", usersHelp, []cli.Verb{
		{Name: "list", Run: usersList},
		{Name: "set", Run: usersSet},
		{Name: "delete", Run: usersDelete},
	}, args, stdout, stderr)
}

// scramMechanisms parses -mechanism: empty means both.
func scramMechanisms(s string) ([]kadm.ScramMechanism, error) {
	switch strings.ToUpper(s) {
	case "":
		return []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256}, nil
	case "SCRAM-SHA-512":
		return []kadm.ScramMechanism{kadm.ScramSha512}, nil
	case "SCRAM-SHA-256":
		return []kadm.ScramMechanism{kadm.ScramSha256}, nil
	}
	return nil, cli.BadFlag("mechanism", s, "want SCRAM-SHA-512 or SCRAM-SHA-256")
}

type userJSON struct {
	User       string          `json:"user"`
	Mechanisms []mechanismJSON `json:"mechanisms"`
	Error      string          `json:"error,omitempty"`
}

type mechanismJSON struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func usersList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("users list", usersListHelp)
	names, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		described, err := adm.DescribeUserSCRAMs(ctx, names...)
		if err != nil {
			return a.Fail("describe users", err)
		}
		out := []userJSON{}
		for _, d := range described.Sorted() {
			u := userJSON{User: d.User, Mechanisms: []mechanismJSON{}}
			if d.Err != nil {
				u.Error = d.Err.Error()
				if errors.Is(d.Err, kerr.ResourceNotFound) {
					u.Error = "no such user"
				}
			}
			for _, c := range d.CredInfos {
				u.Mechanisms = append(u.Mechanisms, mechanismJSON{c.Mechanism.String(), c.Iterations})
			}
			out = append(out, u)
		}
		return a.Print(stdout, out, func() error { return printUsers(stdout, out) })
	})
}

// printUsers prints the users' table; it fails if some were not described.
func printUsers(w io.Writer, out []userJSON) error {
	tw := cli.NewTable(w)
	tw.Row("USER", "MECHANISM", "ITERATIONS")
	failed := 0
	for _, u := range out {
		if u.Error != "" {
			failed++
			tw.Row(u.User, "-", "-  ("+u.Error+")")
			continue
		}
		for _, m := range u.Mechanisms {
			tw.Row(u.User, m.Mechanism, strconv.Itoa(int(m.Iterations)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d users could not be described", failed, len(out))
	}
	return nil
}

func usersSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("users set", usersSetHelp)
	mech := a.Flags.String("mechanism", "", "only this mechanism: SCRAM-SHA-512 or SCRAM-SHA-256 (default: both)")
	password := a.Flags.String("password", os.Getenv("STRATA_USER_PASSWORD"), "the new password (prefer STRATA_USER_PASSWORD)")
	iterations := a.Flags.Int("iterations", 8192, "PBKDF2 iterations, 4096 to 16384")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cli.Usagef("name exactly one user")
	}
	if *password == "" {
		return cli.Usagef("no password: set -password or STRATA_USER_PASSWORD")
	}
	if *iterations < 4096 || *iterations > 16384 {
		return cli.BadFlag("iterations", *iterations, "want 4096 to 16384")
	}
	mechs, err := scramMechanisms(*mech)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		user := pos[0]
		// A user may appear once per request: one request per mechanism.
		for _, m := range mechs {
			res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: int32(*iterations), Password: *password}})
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				return a.Fail("set "+m.String()+" credential of "+user, err)
			}
		}
		return a.Print(stdout, map[string]any{"user": user, "set": mechNames(mechs)}, func() error {
			fmt.Fprintf(stdout, "set %s for %s\n", strings.Join(mechNames(mechs), ", "), user)
			return nil
		})
	})
}

func mechNames(ms []kadm.ScramMechanism) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out
}

func usersDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("users delete", usersDeleteHelp)
	mech := a.Flags.String("mechanism", "", "only this mechanism: SCRAM-SHA-512 or SCRAM-SHA-256 (default: every one the user has)")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	users, err := cli.Names(pos, "name at least one user")
	if err != nil {
		return err
	}
	only, err := scramMechanisms(*mech)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		described, err := adm.DescribeUserSCRAMs(ctx, users...)
		if err != nil {
			return a.Fail("describe users", err)
		}
		deleted, errs := deleteCredentials(ctx, adm, a, users, described, *mech, only)
		if err := a.Print(stdout, deleted, func() error {
			for _, user := range users {
				if len(deleted[user]) > 0 {
					fmt.Fprintf(stdout, "deleted %s of %s\n", strings.Join(deleted[user], ", "), user)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		return errors.Join(errs...)
	})
}

// deleteCredentials deletes the credentials of users, those of mechanism
// only[0] if mech is set, and returns the mechanisms deleted per user.
func deleteCredentials(ctx context.Context, adm *kadm.Client, a *cli.Admin, users []string, described kadm.DescribedUserSCRAMs, mech string, only []kadm.ScramMechanism) (map[string][]string, []error) {
	deleted := map[string][]string{}
	var errs []error
	for _, user := range users {
		d := described[user]
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", user, d.Err))
			continue
		}
		for _, c := range d.CredInfos {
			if mech != "" && c.Mechanism != only[0] {
				continue
			}
			res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: c.Mechanism}}, nil)
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				errs = append(errs, a.Fail("delete "+c.Mechanism.String()+" credential of "+user, err))
				continue
			}
			deleted[user] = append(deleted[user], c.Mechanism.String())
		}
	}
	return deleted, errs
}
