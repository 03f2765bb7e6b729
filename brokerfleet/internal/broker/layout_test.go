package broker

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The layout rules of the restructuring (docs/design.md), checked
// mechanically so that they hold.

// repoRoot is the module root, three levels up from this package.
const repoRoot = "../../.."

// The components never import the broker: it composes them, not the
// other way round.
func TestComponentsDoNotImportTheBroker(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const broker = "github.com/stratamq/strata/brokerfleet/internal/broker"
	for _, c := range []string{"catalog", "controller", "replication", "tier", "security", "metrics", "group", "wire", "partition", "topic", "fetchsession"} {
		out, err := exec.Command("go", "list", "-deps", "../"+c).Output()
		require.NoError(t, err, c)
		for _, dep := range strings.Fields(string(out)) {
			require.NotEqual(t, broker, dep, "%s imports the broker", c)
		}
	}
}

// No non-test Go file in brokerfleet/, pkg/ or functions/ is over 800
// lines.
func TestNoFileOver800Lines(t *testing.T) {
	for _, dir := range []string{"brokerfleet", "pkg", "functions"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			n := 0
			for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
				n++
			}
			if n > 800 {
				t.Errorf("%s has %d lines (at most 800)", path, n)
			}
			return nil
		})
		require.NoError(t, err)
	}
}

// Broker has at most 40 methods: state and logic belong to the
// components.
func TestBrokerHasAtMost40Methods(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	var methods []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
					continue
				}
				if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Broker" {
						methods = append(methods, fd.Name.Name)
					}
				}
			}
		}
	}
	require.NotEmpty(t, methods)
	require.LessOrEqual(t, len(methods), 40, "Broker methods: %v", methods)
}
