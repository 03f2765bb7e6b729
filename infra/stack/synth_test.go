package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireAllEnv turns a missing tool into a failure instead of a skip
// (.ci/run sets it). The rule and the messages are those of the broker
// module's pkg/testenv, which this module does not import (it does not
// depend on the broker's module); keep the two alike.
const requireAllEnv = "STRATA_REQUIRE_ALL"

func requireAll() bool {
	switch os.Getenv(requireAllEnv) {
	case "", "0", "false":
		return false
	}
	return true
}

// missingTool ends the test because a tool is missing, as testenv.Missing
// does: a skip, or a failure when requireAll.
func missingTool(t *testing.T, name, detail, install string) {
	t.Helper()
	msg := fmt.Sprintf("%s is missing (%s); install it with `%s`", name, detail, install)
	if requireAll() {
		t.Fatalf("%s (%s=%s: a missing tool fails instead of skipping)", msg, requireAllEnv, os.Getenv(requireAllEnv))
	}
	t.Skipf("%s; skipping (CI sets %s=1 and fails here instead)", msg, requireAllEnv)
}

// cdkCLI returns the repository root and the pinned CDK CLI
// (infra/node_modules/.bin/cdk), skipping the test without it or node.
func cdkCLI(t *testing.T) (root, cli string) {
	t.Helper()
	cfg, err := DefaultConfig().withPaths()
	if err != nil {
		t.Fatal(err)
	}
	cli = filepath.Join(cfg.RepoRoot, "infra", "node_modules", ".bin", "cdk")
	if _, err := os.Stat(cli); err != nil {
		missingTool(t, "the AWS CDK CLI", "no "+cli, "npm ci --prefix infra")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missingTool(t, "Node.js (node, npm)", "no node on PATH, needed to run the CDK CLI", "apt-get install -y nodejs npm")
	}
	return cfg.RepoRoot, cli
}

// runCDK runs the CLI at the repository root, where cdk.json is.
func runCDK(t *testing.T, root, cli string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(cli, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20",
		"CDK_DISABLE_VERSION_CHECK=true",
		"CDK_DISABLE_CLI_TELEMETRY=true",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("cdk %s: %v in %v", strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond))
	return out.String(), err
}

// TestCDKSynth runs `cdk synth` the way a user does (cdk.json: "cd infra
// && go run ."), offline, with fake bootstraps and a temporary output.
func TestCDKSynth(t *testing.T) {
	root, cli := cdkCLI(t)
	out := filepath.Join(t.TempDir(), "cdk.out")
	fns := filepath.Join(testDir, "functions")
	log, err := runCDK(t, root, cli, "synth", "--quiet", "--no-notices", "-c", "functionsDir="+fns, "--output", out)
	if err != nil {
		t.Fatalf("cdk synth: %v\n%s", err, log)
	}
	raw, err := os.ReadFile(filepath.Join(out, StackName+".template.json"))
	if err != nil {
		t.Fatalf("no template: %v\n%s", err, log)
	}
	var tpl map[string]any
	if err := json.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	if problems := iamProblems(tpl); len(problems) > 0 {
		t.Errorf("IAM:\n%s", strings.Join(problems, "\n"))
	}
	assets := readAssets(t, out)
	if len(assets.DockerImages) != 1 {
		t.Errorf("%d docker images, want 1", len(assets.DockerImages))
	}
	for _, img := range assets.DockerImages {
		if _, err := os.Stat(filepath.Join(out, img.Source.Directory, "brokerfleet", "Dockerfile")); err != nil {
			t.Errorf("image asset: %v", err)
		}
	}
	bootstraps := 0
	for _, f := range assets.Files {
		if _, err := os.Stat(filepath.Join(out, f.Source.Path, "bootstrap")); err == nil {
			bootstraps++
		}
	}
	if bootstraps == 0 {
		t.Errorf("no Lambda asset with a bootstrap in %s", out)
	}
	if _, err := os.Stat(filepath.Join(root, "infra", "cdk.out")); err == nil {
		t.Errorf("synth wrote infra/cdk.out")
	}
}

// TestCDKSynthBadContext checks that bad context fails synth with the
// key in the message (main exits non-zero).
func TestCDKSynthBadContext(t *testing.T) {
	root, cli := cdkCLI(t)
	out := filepath.Join(t.TempDir(), "cdk.out")
	fns := filepath.Join(testDir, "functions")
	log, err := runCDK(t, root, cli, "synth", "--quiet", "--no-notices", "-c", "functionsDir="+fns, "-c", "brokerCount=0", "--output", out)
	if err == nil {
		t.Fatalf("cdk synth with brokerCount=0 succeeded\n%s", log)
	}
	if !strings.Contains(log, "context brokerCount: must be at least 1, got 0") {
		t.Errorf("output does not name the setting:\n%s", log)
	}
}
