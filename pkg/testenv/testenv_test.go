package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeTB records how a test ended; Fatalf and Skipf stop the goroutine
// as the real ones do.
type fakeTB struct {
	testing.TB
	ended string // "fatal" or "skip"
	msg   string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.ended, f.msg = "fatal", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.ended, f.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func run(fn func(t testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestMissingSkipsLocallyAndFailsInCI(t *testing.T) {
	tool := Tool{Name: "frobnicator", Programs: []string{"strata-no-such-program"}, Install: "apt-get install -y frobnicator"}
	for _, c := range []struct {
		env   string
		ended string
	}{
		{"", "skip"}, {"0", "skip"}, {"false", "skip"}, {"1", "fatal"}, {"true", "fatal"}, {"yes", "fatal"},
	} {
		t.Run("STRATA_REQUIRE_ALL="+c.env, func(t *testing.T) {
			t.Setenv(RequireAllEnv, c.env)
			f := run(func(tb testing.TB) { Path(tb, tool) })
			if f.ended != c.ended {
				t.Fatalf("ended with %q (%s), want %q", f.ended, f.msg, c.ended)
			}
			for _, want := range []string{"frobnicator", "strata-no-such-program", "`apt-get install -y frobnicator`"} {
				if !strings.Contains(f.msg, want) {
					t.Errorf("message %q does not name %q", f.msg, want)
				}
			}
		})
	}
}

func TestPathFindsAnyProgram(t *testing.T) {
	t.Setenv(RequireAllEnv, "1")
	f := run(func(tb testing.TB) {
		if p := Path(tb, Tool{Name: "go", Programs: []string{"strata-no-such-program", "go"}}); p == "" {
			tb.Fatalf("no path")
		}
	})
	if f.ended != "" {
		t.Fatalf("ended with %q: %s", f.ended, f.msg)
	}
}

func TestByNameKnowsOnlyListedTools(t *testing.T) {
	if f := run(func(tb testing.TB) { ByName(tb, "kcat") }); f.ended != "" {
		t.Fatalf("kcat: %s", f.msg)
	}
	if f := run(func(tb testing.TB) { ByName(tb, "frobnicator") }); f.ended != "fatal" {
		t.Fatalf("an unlisted tool was accepted")
	}
}

// TestEveryToolIsDocumentedAndInstalledInCI keeps the README's tool list
// and .ci/run in step with Tools: each tool's name and install command
// are in the README, and .ci/run runs the install command.
func TestEveryToolIsDocumentedAndInstalledInCI(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, ci := read("README.md"), read(".ci/run")
	for _, tool := range Tools {
		if tool.Name == "" || tool.Install == "" || tool.Suites == "" {
			t.Errorf("%+v: a tool needs a name, an install command and its suites", tool)
		}
		if !strings.Contains(readme, tool.Name) || !strings.Contains(readme, "`"+tool.Install+"`") {
			t.Errorf("README.md does not list %s with `%s`", tool.Name, tool.Install)
		}
		if !strings.Contains(ci, tool.Install) {
			t.Errorf(".ci/run does not run %q (for %s)", tool.Install, tool.Name)
		}
	}
}
