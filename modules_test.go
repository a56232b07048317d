package rdq_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// forbidden are modules no program on PostgreSQL that only submits or runs
// tasks should find in its module graph: the server side, the browser,
// SQLite, Redis and rdq's test and lint tools.
var forbidden = []string{
	"google.golang.org/grpc",
	"github.com/chromedp/",
	"modernc.org/sqlite",
	"pgregory.net/rapid",
	"honnef.co/go/tools",
	"github.com/srjn45/rdq/server",
	"github.com/srjn45/rdq/proto",
	"github.com/srjn45/rdq/console",
	"github.com/srjn45/rdq/callback",
	"github.com/srjn45/rdq/sqlitestore",
	"github.com/srjn45/rdq/redisstore",
	"github.com/redis/go-redis/",
	"github.com/hibiken/asynq",
	"github.com/srjn45/rdq/storetest",
}

// viaPrometheus are modules the Prometheus client requires (its metric
// types are protobuf messages; its tests use goleak): they may be in the
// graph, required by Prometheus's modules or by rdq's core on their
// behalf, and are never compiled into the program.
var viaPrometheus = []string{"google.golang.org/protobuf", "go.uber.org/goleak"}

// userModule writes a module at Go 1.25 that imports pkgs of rdq (this
// checkout, through a replace directive), tidies it and returns its
// directory.
func userModule(t *testing.T, pkgs ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/user\n\ngo 1.25.0\n\nrequire github.com/srjn45/rdq v0.0.0\n\nreplace github.com/srjn45/rdq => " + root + "\n"
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ \"github.com/srjn45/rdq/" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	for name, body := range map[string]string{"go.mod": mod, "main.go": src.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, dir, goTool, "mod", "tidy")
	return dir
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	// The user's module stands alone: no workspace, and the Go 1.25
	// language version its go.mod states.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkInherits fails for every forbidden module in the module graph of a
// program that imports pkgs, and for the modules of viaPrometheus when
// anything else requires them or the program compiles them; and it builds
// the program.
func checkInherits(t *testing.T, pkgs ...string) {
	dir := userModule(t, pkgs...)
	graph := run(t, dir, "go", "mod", "graph")
	mods := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(graph), "\n") {
		from, to, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		from, _, _ = strings.Cut(from, "@")
		to, _, _ = strings.Cut(to, "@")
		mods[from], mods[to] = true, true
		if slices.Contains(viaPrometheus, to) && !strings.HasPrefix(from, "github.com/prometheus/") && from != "github.com/srjn45/rdq" && from != "example.com/user" {
			t.Errorf("a program importing %v inherits %s from %s (go mod graph)", pkgs, to, from)
		}
	}
	for m := range mods {
		for _, f := range forbidden {
			if m == f || strings.HasPrefix(m, f) && (strings.HasSuffix(f, "/") || strings.HasPrefix(m, f+"/")) {
				t.Errorf("a program importing %v inherits %s (go mod graph)", pkgs, m)
			}
		}
	}
	t.Logf("a program importing %v has %d modules in its graph", pkgs, len(mods))
	for _, dep := range strings.Fields(run(t, dir, "go", "list", "-deps", ".")) {
		if dep == "go.uber.org/goleak" || strings.HasPrefix(dep, "go.uber.org/goleak/") {
			t.Errorf("a program importing %v compiles %s", pkgs, dep)
		}
		if strings.HasPrefix(dep, "google.golang.org/protobuf/") && !slices.Contains(pkgs, "worker") {
			t.Errorf("a program importing %v compiles %s, which only the worker's Prometheus metrics need", pkgs, dep)
		}
	}
	run(t, dir, "go", "build", "-o", os.DevNull, ".")
}

// TestWhatAProducerInherits holds a producer on PostgreSQL to rdq's core:
// no server, browser, SQLite or test-tool module in its graph, and it
// builds at Go 1.25.
func TestWhatAProducerInherits(t *testing.T) {
	if testing.Short() {
		t.Skip("tidies a module")
	}
	checkInherits(t, "client", "pgstore")
}

// TestWhatAWorkerInherits: a worker, with the DLQ and the task listing,
// gets no server-side module either.
func TestWhatAWorkerInherits(t *testing.T) {
	if testing.Short() {
		t.Skip("tidies a module")
	}
	checkInherits(t, "worker", "pgstore", "dlq", "tasks", "envelope")
}

// TestReadingTheDLQNeedsNoMetrics keeps Prometheus and OpenTelemetry out of
// the packages that only read and manage dead tasks.
func TestReadingTheDLQNeedsNoMetrics(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	for _, pkg := range []string{"./dlq", "./tasks", "./store", "./envelope", "."} {
		out, err := exec.Command(goTool, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/prometheus/") || strings.HasPrefix(dep, "go.opentelemetry.io/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
