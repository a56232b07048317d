package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestReadmeSnippets compiles every ```go block of README.md, so that what
// a reader copies builds. The convention, which every block must follow:
//
//   - A block that starts with a package clause (after comments) is a whole
//     file and is compiled as it is: a main package, a library, or, when
//     the package name ends in _test, a test file.
//   - Any other block is a fragment of a file: an optional import
//     declaration followed by top-level declarations (functions, types,
//     variables). The test adds "package readme" above it.
//   - A fragment that does not parse as declarations is a run of
//     statements: the test puts its import declaration, if any, at the top
//     and the rest into the body of a function with no parameters and no
//     results.
//
// Nothing else is added: every name a block uses must be declared in it or
// imported by it, and every import and local variable must be used, as the
// compiler demands. Blocks are compiled in packages of their own inside the
// examples module (through a build overlay, so nothing is written to the
// tree), in the repository's workspace (go.work), which holds every module
// of rdq.
func TestReadmeSnippets(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(raw))
	if len(blocks) < 3 {
		t.Fatalf("README.md has %d go blocks; expected the core API, storeurl and storetest ones at least", len(blocks))
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	overlay := map[string]string{}
	var plain, tests []string
	for i, b := range blocks {
		src, isTest, err := snippetFile(b.text, b.line)
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		name := "snippet.go"
		if isTest {
			name = "snippet_test.go"
		}
		dir := fmt.Sprintf("_readme/block%02d_line%d", i+1, b.line)
		file := filepath.Join(tmp, fmt.Sprintf("block%02d_%s", i+1, name))
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(root, dir, name)] = file
		if isTest {
			tests = append(tests, "./"+dir)
		} else {
			plain = append(plain, "./"+dir)
		}
	}
	ov, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out") + string(filepath.Separator)
	compile := func(args ...string) {
		cmd := exec.Command(goTool, args...)
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "..", "go.work"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README.md snippets do not compile (go %s):\n%s", strings.Join(args, " "), b)
		}
	}
	if len(plain) > 0 {
		// -o os.DevNull compiles every package and keeps nothing; a
		// directory would make go build skip packages that are not main.
		compile(append([]string{"build", "-overlay=" + ovFile, "-o", os.DevNull}, plain...)...)
	}
	if len(tests) > 0 {
		// go vet cannot run on overlay-only directories; the compiler's
		// checks are what this test is about.
		compile(append([]string{"test", "-vet=off", "-c", "-overlay=" + ovFile, "-o", out}, tests...)...)
	}
}

// goBlock is one ```go block of a Markdown file and the line its code
// starts on.
type goBlock struct {
	text string
	line int
}

func goBlocks(md string) []goBlock {
	var blocks []goBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i + 1
		j := start
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		blocks = append(blocks, goBlock{text: strings.Join(lines[start:j], "\n") + "\n", line: start + 1})
		i = j
	}
	return blocks
}

// snippetFile turns a block that starts on README.md line into a Go source
// file by the convention of TestReadmeSnippets, and reports whether it is a
// test file. Line directives make compiler errors point into README.md.
func snippetFile(block string, line int) (src string, isTest bool, err error) {
	at := func(n int) string { return fmt.Sprintf("\n//line README.md:%d\n", n) }
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", block, parser.PackageClauseOnly); err == nil {
		return at(line) + block, strings.HasSuffix(f.Name.Name, "_test"), nil
	}
	asDecls := "package readme\n" + at(line) + block
	if _, err := parser.ParseFile(fset, "", asDecls, parser.AllErrors); err == nil {
		return asDecls, false, nil
	}
	imports, body := splitImports(block)
	bodyLine := line + strings.Count(imports, "\n")
	asFunc := "package readme\n" + at(line) + imports + "func _() {" + at(bodyLine) + body + "}\n"
	if _, err := parser.ParseFile(fset, "", asFunc, parser.AllErrors); err != nil {
		return "", false, fmt.Errorf("block is neither a file, nor declarations, nor statements: %v", err)
	}
	return asFunc, false, nil
}

// splitImports separates a fragment's leading import declarations (and the
// blank lines and comments before them) from the rest.
func splitImports(block string) (imports, rest string) {
	lines := strings.SplitAfter(block, "\n")
	i, inGroup := 0, false
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case inGroup:
			if l == ")" {
				inGroup = false
			}
		case l == "" || strings.HasPrefix(l, "//"):
		case l == "import (":
			inGroup = true
		case strings.HasPrefix(l, "import "):
		default:
			return strings.Join(lines[:i], ""), strings.Join(lines[i:], "")
		}
	}
	return block, ""
}

// TestExamplesImportNoInternal keeps the examples copyable into another
// module: none of their files, tests included, imports an internal package.
// (examples/kafka-consumer is a module of its own, outside this pattern.)
func TestExamplesImportNoInternal(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-f",
		`{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		"./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 {
		t.Fatalf("go list found %d example packages:\n%s", len(lines), out)
	}
	for _, l := range lines {
		pkg, imports, _ := strings.Cut(l, ": ")
		for _, imp := range strings.Fields(imports) {
			if strings.Contains(imp, "/internal/") || strings.HasSuffix(imp, "/internal") {
				t.Errorf("%s imports %s; examples must build in another module", pkg, imp)
			}
		}
	}
}

// TestReadmeProgram runs the README's complete program on the test database
// (RDQ_TEST_DATABASE_URL, else the local "test" database, as the other
// PostgreSQL tests), in a schema of its own, and checks that it shows what
// the README says it shows: one task succeeded on a retry, one dead.
func TestReadmeProgram(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var program string
	for _, b := range goBlocks(string(raw)) {
		if strings.HasPrefix(b.text, "package main\n") && strings.Contains(b.text, "worker.New(") {
			program = b.text
			break
		}
	}
	if program == "" {
		t.Fatal("README.md has no complete program (a ```go block of package main that starts a worker)")
	}
	const storeConfig = "pgstore.New(pool, pgstore.Config{})"
	if strings.Count(program, storeConfig) != 1 {
		t.Fatalf("the README's program does not build its store with %s, where this test puts its own schema", storeConfig)
	}
	schema := fmt.Sprintf("readme_%d", time.Now().UnixNano())
	program = strings.Replace(program, storeConfig, fmt.Sprintf("pgstore.New(pool, pgstore.Config{Schema: %q})", schema), 1)

	url := os.Getenv("RDQ_TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the schema is dropped: cleanups run last first
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})

	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	file := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(file, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	ov, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "_readme", "program", "main.go"): file}})
	if err != nil {
		t.Fatal(err)
	}
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, goTool, "run", "-overlay="+ovFile, "./_readme/program")
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "..", "go.work"), "RDQ_DATABASE_URL="+url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's program failed: %v\n%s", err, out)
	}
	// What it prints: each task's final state and its history.
	text := string(out)
	succeeded := regexp.MustCompile(`(?m)^\S+ SUCCEEDED after ([0-9]+) attempts$`).FindStringSubmatch(text)
	if succeeded == nil || succeeded[1] == "1" || !strings.Contains(text, "RETRYABLE_FAILURE rate limited") {
		t.Errorf("the README's program shows no task that succeeded on a retry:\n%s", text)
	}
	if !regexp.MustCompile(`(?m)^\S+ DEAD after [0-9]+ attempts$`).MatchString(text) || !strings.Contains(text, "PERMANENT_FAILURE card declined") {
		t.Errorf("the README's program shows no dead task:\n%s", text)
	}
}
