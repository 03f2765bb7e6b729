// Package compat judges a run of franz-go's own kgo integration tests
// against Strata (make compat): which top-level tests passed, failed or
// were skipped, measured against a checked-in list of the tests expected
// to fail, each with its reason. A run is good only when every failure is
// expected and every expected failure still fails, so the list can only
// shrink as features land.
package compat

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Expectation is one line of the expected-failure list.
type Expectation struct {
	Test   string
	Reason string
}

// ParseExpected reads the expected-failure list: one test per line as
// "TestName: reason" or "TestName [hangs]: reason"; blank lines and lines
// starting with # are ignored. Every test needs a reason.
func ParseExpected(r io.Reader) ([]Expectation, error) {
	var out []Expectation
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, ok := strings.Cut(line, ":")
		reason = strings.TrimSpace(reason)
		if !ok || reason == "" {
			return nil, fmt.Errorf("line %d: want \"TestName: reason\", got %q", n, line)
		}
		name = strings.TrimSpace(name)
		e := Expectation{Test: name, Reason: reason}
		if base, ok := strings.CutSuffix(name, "[hangs]"); ok {
			e.Test = strings.TrimSpace(base) // an older list's marker: every listed test runs alone now
		}
		if !strings.HasPrefix(e.Test, "Test") || strings.ContainsAny(e.Test, " /") {
			return nil, fmt.Errorf("line %d: %q is not a top-level test name", n, e.Test)
		}
		if seen[e.Test] {
			return nil, fmt.Errorf("line %d: %s listed twice", n, e.Test)
		}
		seen[e.Test] = true
		out = append(out, e)
	}
	return out, sc.Err()
}

// Outcome of one top-level test.
type Outcome string

const (
	Pass Outcome = "pass"
	Fail Outcome = "fail"
	Skip Outcome = "skip"
)

// event is the part of a `go test -json` line read here.
type event struct {
	Action string
	Test   string
}

// Results reads `go test -json` output and returns each top-level test's
// outcome. A test that started and never ended (the binary panicked or
// timed out under it) counts as failed.
func Results(r io.Reader) (map[string]Outcome, error) {
	out := map[string]Outcome{}
	dec := json.NewDecoder(r)
	for {
		var e event
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return out, fmt.Errorf("go test -json output: %w", err)
		}
		if e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "run":
			if _, ok := out[e.Test]; !ok {
				out[e.Test] = Fail // until it ends
			}
		case "pass":
			out[e.Test] = Pass
		case "fail":
			out[e.Test] = Fail
		case "skip":
			out[e.Test] = Skip
		}
	}
	return out, nil
}

// Verdict compares a run with the list.
type Verdict struct {
	Passed, Failed, Skipped int
	Unexpected              []string // failed, not listed
	NowPassing              []string // listed, passed: take it off the list
	NotRun                  []string // listed, never ran: a renamed or removed test
}

// OK reports whether the run is good.
func (v Verdict) OK() bool {
	return len(v.Unexpected) == 0 && len(v.NowPassing) == 0 && len(v.NotRun) == 0
}

// Judge compares results with the expectations.
func Judge(results map[string]Outcome, expected []Expectation) Verdict {
	var v Verdict
	listed := map[string]bool{}
	for _, e := range expected {
		listed[e.Test] = true
		switch results[e.Test] {
		case Pass:
			v.NowPassing = append(v.NowPassing, e.Test)
		case "":
			v.NotRun = append(v.NotRun, e.Test)
		}
	}
	for name, o := range results {
		switch o {
		case Pass:
			v.Passed++
		case Skip:
			v.Skipped++
		case Fail:
			v.Failed++
			if !listed[name] {
				v.Unexpected = append(v.Unexpected, name)
			}
		}
	}
	slices.Sort(v.Unexpected)
	slices.Sort(v.NowPassing)
	slices.Sort(v.NotRun)
	return v
}

// Output returns the lines a test (and its subtests) printed, in order,
// from `go test -json` output.
func Output(r io.Reader, test string) []string {
	var out []string
	dec := json.NewDecoder(r)
	for {
		var e struct{ Action, Test, Output string }
		if err := dec.Decode(&e); err != nil {
			return out
		}
		if e.Action == "output" && (e.Test == test || strings.HasPrefix(e.Test, test+"/")) {
			out = append(out, e.Output)
		}
	}
}
