package crosslang

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/pgtest"
)

// The Java side is built once per test binary: the testkit module's jar and
// its runtime dependencies (java/testkit/target/lib). Maven runs offline
// first, so a machine that downloaded the dependencies once needs no
// network; it falls back to an online build.
var (
	javaOnce sync.Once
	javaCP   string
	javaErr  error
	javaMiss bool // java or mvn is not installed
)

const javaDir = "../../java"

func buildJava() {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			javaErr, javaMiss = fmt.Errorf("%s is not installed (install a JDK 17+ and Maven: apt-get install openjdk-17-jdk-headless maven): %w", tool, err), true
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	args := []string{"-q", "-B", "-f", filepath.Join(javaDir, "pom.xml"), "-pl", "testkit", "-am", "package", "-DskipTests"}
	out, err := exec.CommandContext(ctx, "mvn", append([]string{"-o"}, args...)...).CombinedOutput()
	if err != nil {
		out, err = exec.CommandContext(ctx, "mvn", args...).CombinedOutput()
	}
	if err != nil {
		javaErr = fmt.Errorf("building the Java testkit (mvn %s): %v\n%s", strings.Join(args, " "), err, out)
		return
	}
	target, err := filepath.Abs(filepath.Join(javaDir, "testkit", "target"))
	if err != nil {
		javaErr = err
		return
	}
	javaCP = filepath.Join(target, "rdq-testkit.jar") + string(os.PathListSeparator) + filepath.Join(target, "lib", "*")
}

// requireJava builds the Java testkit once and returns its classpath. Without
// Java or Maven the test is skipped on a developer's machine and fails in CI
// (CI=true), where the cross-language guarantees must be checked.
func requireJava(t testing.TB) string {
	t.Helper()
	javaOnce.Do(buildJava)
	if javaErr != nil {
		if javaMiss && os.Getenv("CI") != "true" {
			t.Skipf("cross-language test needs Java: %v", javaErr)
		}
		t.Fatal(javaErr)
	}
	return javaCP
}

// javaProc is a Java testkit process.
type javaProc struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  bytes.Buffer // after "ready", for WorkerMain
	errPath string
	done    chan struct{}
	waitErr error
	ready   chan struct{}
	killed  bool
}

// javaWorkerEnv is the environment of a Java worker on schema.
func javaWorkerEnv(schema, id, queues, logPath string, extra ...string) []string {
	return append([]string{
		"RDQ_DATABASE_URL=" + pgtest.URL(),
		"RDQ_SCHEMA=" + schema,
		"RDQ_WORKER_ID=" + id,
		"RDQ_QUEUES=" + queues,
		"RDQ_EXEC_LOG=" + logPath,
	}, extra...)
}

// startJava starts a testkit program (WorkerMain, SubmitMain, BenchMain) with
// env added to this process's environment. Output goes to a file in dir.
func startJava(t testing.TB, class, dir, name string, env []string, args ...string) *javaProc {
	t.Helper()
	cp := requireJava(t)
	p := &javaProc{name: name, errPath: filepath.Join(dir, name+".stderr"), done: make(chan struct{}), ready: make(chan struct{})}
	errFile, err := os.Create(p.errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	jargs := []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", cp, "io.github.srjn45.rdq.testkit." + class}
	p.cmd = exec.Command("java", append(jargs, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = errFile
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting java %s: %v", class, err)
	}
	var mu sync.Mutex
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sawReady := false
		for sc.Scan() {
			line := sc.Text()
			if !sawReady && line == "ready" {
				sawReady = true
				close(p.ready)
				continue
			}
			mu.Lock()
			p.stdout.WriteString(line + "\n")
			mu.Unlock()
		}
	}()
	go func() {
		<-readDone
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *javaProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *javaProc) stderr() string {
	b, err := os.ReadFile(p.errPath)
	if err != nil {
		return fmt.Sprintf("(reading its output: %v)", err)
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// waitReady waits until the worker printed "ready".
func (p *javaProc) waitReady(t testing.TB) {
	t.Helper()
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("java %s exited before it was ready (%v):\n%s", p.name, p.waitErr, p.stderr())
	case <-time.After(60 * time.Second):
		t.Fatalf("java %s not ready after 60s:\n%s", p.name, p.stderr())
	}
}

// stop closes the process's input (a graceful stop) and waits for a clean exit.
func (p *javaProc) stop(t testing.TB) {
	t.Helper()
	_ = p.stdin.Close() // the pipe may be closed already
	select {
	case <-p.done:
		if p.waitErr != nil {
			t.Errorf("java %s did not stop cleanly: %v\n%s", p.name, p.waitErr, p.stderr())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("java %s did not stop within 30s", p.name)
		p.kill()
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *javaProc) kill() {
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = err // exiting already
	}
	<-p.done
	_ = p.stdin.Close()
}

// run runs a Java program to completion with input and returns its output.
func runJava(t testing.TB, class, dir string, env []string, input string, args ...string) string {
	t.Helper()
	p := startJava(t, class, dir, strings.ToLower(class), env, args...)
	if _, err := io.WriteString(p.stdin, input); err != nil {
		t.Fatal(err)
	}
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Minute):
		p.kill()
		t.Fatalf("java %s did not finish in 5 minutes", class)
	}
	if p.waitErr != nil {
		t.Fatalf("java %s failed: %v\n%s", class, p.waitErr, p.stderr())
	}
	return p.stdout.String()
}
