package examples_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocIndex checks that the package documentation of rdq names
// every package of every module a program can import, so that
// "go doc github.com/srjn45/rdq" is an index of them.
func TestPackageDocIndex(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The workspace holds every module of the repository.
	cmd := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{.Name}}", "github.com/srjn45/rdq/...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	const module = "github.com/srjn45/rdq/"
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, name, _ := strings.Cut(line, " ")
		rel, ok := strings.CutPrefix(path, module)
		if !ok || name == "main" || rel == "examples" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") {
			continue
		}
		n++
		if !strings.Contains(doc, "  - "+rel+":") {
			t.Errorf("doc.go's package documentation does not list the importable package %s (add a line \"  - %s: ...\" under # Packages)", path, rel)
		}
	}
	if n < 10 {
		t.Fatalf("go list found %d importable packages; expected the module's packages", n)
	}
}
