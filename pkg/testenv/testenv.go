// Package testenv decides what a test does when an outside tool it needs
// is missing: locally it skips with a message naming the tool and the
// command that installs it; with STRATA_REQUIRE_ALL set (.ci/run sets it)
// it fails, so a suite skipped in CI is a failure. Every suite that needs
// a tool names it from Tools, and the README lists them all (checked by
// this package's tests). It imports testing and is used only from tests.
//
// The infra module (infra/go.mod) cannot import it and keeps a copy of
// the same rule in infra/stack/synth_test.go.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// RequireAllEnv is the variable that turns a missing tool into a test
// failure. Any value other than "", "0" or "false" counts as set.
const RequireAllEnv = "STRATA_REQUIRE_ALL"

// A Tool is something outside Go that a suite needs.
type Tool struct {
	Name     string   // as messages and the README name it
	Programs []string // executables, any one of which will do; empty when the suite finds it itself
	Install  string   // the command that installs it, from the repository root
	Suites   string   // the suites that need it
}

// The tools whose absence makes a suite skip.
var (
	Kcat = Tool{
		Name: "kcat", Programs: []string{"kcat"}, Install: "apt-get install -y kcat",
		Suites: "brokerfleet/internal/broker (kcat as a librdkafka client)",
	}
	Chromium = Tool{
		Name: "Chromium", Programs: []string{"chromium", "chromium-browser", "google-chrome"},
		Install: "apt-get install -y chromium",
		Suites:  "functions/dlqconsole (the console in a headless browser)",
	}
	PostgreSQL = Tool{
		Name: "PostgreSQL (initdb, postgres)", Install: "apt-get install -y postgresql",
		Suites: "e2e/orders (billing; or set STRATA_POSTGRES_URL)",
	}
	ClickHouse = Tool{
		Name: "ClickHouse (clickhouse-server)", Install: "apt-get install -y clickhouse-server",
		Suites: "e2e/orders (analytics; or set STRATA_CLICKHOUSE_URL)",
	}
	Burrow = Tool{
		Name: "Burrow", Programs: []string{"Burrow", "burrow"}, Install: "apt-get install -y burrow",
		Suites: "brokerfleet/internal/interop (TestBurrow: LinkedIn's lag checker reading __consumer_offsets)",
	}
	ZooKeeper = Tool{
		Name: "ZooKeeper (zookeeper.jar and java)", Install: "apt-get install -y zookeeper",
		Suites: "brokerfleet/internal/interop (TestBurrow: Burrow 1.2 keeps its own state in ZooKeeper)",
	}
	Promtool = Tool{
		Name: "promtool (Prometheus)", Programs: []string{"promtool"}, Install: "apt-get install -y prometheus",
		Suites: "brokerfleet (the alerting rules and dashboard of infra/observability)",
	}
	Node = Tool{
		Name: "Node.js (node, npm)", Programs: []string{"node"}, Install: "apt-get install -y nodejs npm",
		Suites: "pkg/metastore/dynamo (dynalite), infra/stack (the CDK CLI)",
	}
	Dynalite = Tool{
		Name: "dynalite", Install: "npm ci --prefix localstack",
		Suites: "pkg/metastore/dynamo (the conformance suite on a second DynamoDB implementation)",
	}
	Platformatic = Tool{
		Name: "@platformatic/kafka", Install: "npm ci --prefix brokerfleet/internal/interop/testdata/platformatic",
		Suites: "brokerfleet/internal/interop (TestPlatformatic: an independent Node.js Kafka client)",
	}
	CDK = Tool{
		Name: "the AWS CDK CLI", Install: "npm ci --prefix infra",
		Suites: "infra/stack (TestCDKSynth, in make infra-test)",
	}
)

// Tools is every tool above, in the order the README lists them.
var Tools = []Tool{Kcat, Chromium, PostgreSQL, ClickHouse, Burrow, ZooKeeper, Promtool, Node, Dynalite, Platformatic, CDK}

// RequireAll reports whether RequireAllEnv is set, so a missing tool is a
// failure.
func RequireAll() bool {
	switch os.Getenv(RequireAllEnv) {
	case "", "0", "false":
		return false
	}
	return true
}

// Missing ends the test because tool is missing (detail says how it was
// looked for): a skip, or a failure when RequireAll.
func Missing(t testing.TB, tool Tool, detail string) {
	t.Helper()
	msg := fmt.Sprintf("%s is missing (%s); install it with `%s`", tool.Name, detail, tool.Install)
	if RequireAll() {
		t.Fatalf("%s (%s=%s: a missing tool fails instead of skipping)", msg, RequireAllEnv, os.Getenv(RequireAllEnv))
	}
	t.Skipf("%s; skipping (CI sets %s=1 and fails here instead)", msg, RequireAllEnv)
}

// Path returns the path of the first of tool's programs on PATH, or ends
// the test through Missing.
func Path(t testing.TB, tool Tool) string {
	t.Helper()
	if len(tool.Programs) == 0 {
		t.Fatalf("testenv: %s has no program to look for", tool.Name)
	}
	for _, name := range tool.Programs {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, tool, "no "+strings.Join(tool.Programs, ", ")+" on PATH")
	return ""
}

// ByName returns the tool with a program called name; a test asking for a
// tool not in Tools fails, so every tool is listed (and documented).
func ByName(t testing.TB, name string) Tool {
	t.Helper()
	for _, tool := range Tools {
		for _, p := range tool.Programs {
			if p == name {
				return tool
			}
		}
	}
	t.Fatalf("testenv: no tool runs %q; add it to testenv.Tools and the README", name)
	return Tool{}
}
