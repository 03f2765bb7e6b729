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
	return runVerbs(ctx, "users", usersHelp, []verb{{"list", usersList}, {"set", usersSet}, {"delete", usersDelete}}, args, stdout, stderr)
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
	return nil, usageError{fmt.Errorf("invalid value %q for flag -mechanism: want SCRAM-SHA-512 or SCRAM-SHA-256", s)}
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
	var af adminFlags
	fs := newVerbFlags("list", usersListHelp)
	af.register(fs)
	names, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	defer adm.Close()
	described, err := adm.DescribeUserSCRAMs(ctx, names...)
	if err != nil {
		return af.fail("describe users", err)
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
	if af.json {
		return writeJSON(stdout, out)
	}
	w := newTable(stdout)
	row(w, "USER", "MECHANISM", "ITERATIONS")
	failed := 0
	for _, u := range out {
		if u.Error != "" {
			failed++
			row(w, u.User, "-", "-  ("+u.Error+")")
			continue
		}
		for _, m := range u.Mechanisms {
			row(w, u.User, m.Mechanism, strconv.Itoa(int(m.Iterations)))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d users could not be described", failed, len(out))
	}
	return nil
}

func usersSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af adminFlags
	var mech, password string
	var iterations int
	fs := newVerbFlags("set", usersSetHelp)
	af.register(fs)
	fs.StringVar(&mech, "mechanism", "", "only this mechanism: SCRAM-SHA-512 or SCRAM-SHA-256 (default: both)")
	fs.StringVar(&password, "password", os.Getenv("STRATA_USER_PASSWORD"), "the new password (prefer STRATA_USER_PASSWORD)")
	fs.IntVar(&iterations, "iterations", 8192, "PBKDF2 iterations, 4096 to 16384")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("name exactly one user")}
	}
	if password == "" {
		return usageError{errors.New("no password: set -password or STRATA_USER_PASSWORD")}
	}
	if iterations < 4096 || iterations > 16384 {
		return usageError{fmt.Errorf("invalid value %d for flag -iterations: want 4096 to 16384", iterations)}
	}
	mechs, err := scramMechanisms(mech)
	if err != nil {
		return err
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	defer adm.Close()
	user := pos[0]
	// A user may appear once per request: one request per mechanism.
	for _, m := range mechs {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: int32(iterations), Password: password}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return af.fail("set "+m.String()+" credential of "+user, err)
		}
	}
	if af.json {
		return writeJSON(stdout, map[string]any{"user": user, "set": mechNames(mechs)})
	}
	fmt.Fprintf(stdout, "set %s for %s\n", strings.Join(mechNames(mechs), ", "), user)
	return nil
}

func mechNames(ms []kadm.ScramMechanism) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out
}

func usersDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af adminFlags
	var mech string
	fs := newVerbFlags("delete", usersDeleteHelp)
	af.register(fs)
	fs.StringVar(&mech, "mechanism", "", "only this mechanism: SCRAM-SHA-512 or SCRAM-SHA-256 (default: every one the user has)")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	users, err := groupNames(pos)
	if err != nil {
		return usageError{errors.New("name at least one user")}
	}
	only, err := scramMechanisms(mech)
	if err != nil {
		return err
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	defer adm.Close()
	described, err := adm.DescribeUserSCRAMs(ctx, users...)
	if err != nil {
		return af.fail("describe users", err)
	}
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
				errs = append(errs, af.fail("delete "+c.Mechanism.String()+" credential of "+user, err))
				continue
			}
			deleted[user] = append(deleted[user], c.Mechanism.String())
		}
	}
	if af.json {
		if err := writeJSON(stdout, deleted); err != nil {
			return err
		}
	} else {
		for _, user := range users {
			if len(deleted[user]) > 0 {
				fmt.Fprintf(stdout, "deleted %s of %s\n", strings.Join(deleted[user], ", "), user)
			}
		}
	}
	return errors.Join(errs...)
}
