package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// testDir holds the fake functions and the cloud assemblies of the tests.
var testDir string

// TestMain makes the fake functions and closes the jsii runtime at the
// end. (jsii captures the environment for Node while the packages
// initialize, so its Node 20 end-of-life banner is silenced only by the
// caller's environment: JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20.)
func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "strata-infra-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		testDir = dir
		if err := writeFakeFunctions(filepath.Join(dir, "functions")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	jsii.Close()
	os.Exit(code)
}

// writeFakeFunctions makes dir/<name>/bootstrap for every function (so the
// tests do not need `make lambdas`), plus a source file the asset must
// leave out.
func writeFakeFunctions(dir string) error {
	for _, name := range append(FunctionNames, ExampleFunctionName) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(d, "cmd"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "bootstrap"), []byte("#!/bin/sh\n# fake "+name+"\n"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "cmd", "main.go"), []byte("package main\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// synthesized is a stack built from context and its template.
type synthesized struct {
	stack    *Strata
	template assertions.Template
	json     map[string]any // the template as JSON
	outdir   string         // the cloud assembly
}

// synth builds the app from ctx (plus functionsDir pointing at the fake
// functions, unless ctx sets it) and synthesizes it.
func synth(t *testing.T, ctx map[string]any) *synthesized {
	t.Helper()
	outdir, err := os.MkdirTemp(testDir, "cdk.out-")
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]any{"functionsDir": filepath.Join(testDir, "functions")}
	for k, v := range ctx {
		c[k] = v
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &c, Outdir: jsii.String(outdir)})
	s, err := NewFromContext(app)
	if err != nil {
		t.Fatalf("build the app: %v", err)
	}
	tpl := assertions.Template_FromStack(s.Stack, nil)
	raw, err := json.Marshal(tpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return &synthesized{stack: s, template: tpl, json: m, outdir: outdir}
}

var (
	defaultOnce sync.Once
	defaultSyn  *synthesized
)

// defaultStack is the stack with every default, synthesized once for all
// the tests that only read it.
func defaultStack(t *testing.T) *synthesized {
	t.Helper()
	defaultOnce.Do(func() { defaultSyn = synth(t, nil) })
	if defaultSyn == nil {
		t.Fatal("the default stack did not synthesize")
	}
	return defaultSyn
}

// resources returns the template's resources of type typ, by logical id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	res, _ := s.json["Resources"].(map[string]any)
	for id, r := range res {
		r, _ := r.(map[string]any)
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

// props returns the Properties of a resource.
func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}
