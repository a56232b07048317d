package crosslang

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/pgtest"
)

// TestJavaVirtualThreadsOnJava21: on a JDK 21 or newer, the worker runs its
// handlers on virtual threads (WorkerTest.handlersRunOnVirtualThreadsOnJava21)
// and the virtual-threads example (java/examples, built by its java21
// profile) runs a queue's whole concurrency at once on them. The JDK is the
// one RDQ_JDK21_HOME names, else the java on PATH if it is 21 or newer;
// without one the test is skipped on a developer's machine and fails in CI
// (CI=true), whose .ci/run provides one.
func TestJavaVirtualThreadsOnJava21(t *testing.T) {
	home := jdk21Home(t)
	requireJava(t) // Maven, and the dependencies for an offline build
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out := mvn(ctx, t, "", []string{"JAVA_HOME=" + home, "RDQ_TEST_DATABASE_URL=" + pgtest.URL()},
		"-f", filepath.Join(javaDir, "pom.xml"), "-pl", "examples", "-am", "test",
		"-Dtest=WorkerTest#handlersRunOnVirtualThreadsOnJava21,VirtualThreadsWorkerTest",
		"-Dsurefire.failIfNoSpecifiedTests=false")
	for _, class := range []string{"io.github.srjn45.rdq.WorkerTest", "io.github.srjn45.rdq.examples.VirtualThreadsWorkerTest"} {
		re := regexp.MustCompile(`Tests run: (\d+), Failures: 0, Errors: 0, Skipped: 0, .* in ` + regexp.QuoteMeta(class) + `\n`)
		m := re.FindSubmatch(out)
		if m == nil || string(m[1]) != "1" {
			t.Errorf("%s: not one test run and passed on %s:\n%s", class, home, out)
		}
	}
}

// jdk21Home returns the home of a JDK 21 or newer: RDQ_JDK21_HOME, else the
// java on PATH when it is one. Without one it skips the test, or fails it
// under CI=true.
func jdk21Home(t *testing.T) string {
	t.Helper()
	if home := os.Getenv("RDQ_JDK21_HOME"); home != "" {
		major, err := javaMajor(filepath.Join(home, "bin", "java"))
		if err != nil {
			t.Fatalf("RDQ_JDK21_HOME=%s: %v", home, err)
		}
		if major < 21 {
			t.Fatalf("RDQ_JDK21_HOME=%s is a JDK %d; name a JDK 21 or newer", home, major)
		}
		return home
	}
	if java, err := exec.LookPath("java"); err == nil {
		if major, err := javaMajor(java); err == nil && major >= 21 {
			out, err := exec.Command(java, "-XshowSettings:properties", "-version").CombinedOutput()
			if m := regexp.MustCompile(`java\.home = (.+)`).FindSubmatch(out); err == nil && m != nil {
				return strings.TrimSpace(string(m[1]))
			}
		}
	}
	const why = "no JDK 21 or newer: set RDQ_JDK21_HOME to one (the java on PATH is older)"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// javaMajor returns the major version of the java executable at path.
func javaMajor(path string) (int, error) {
	out, err := exec.Command(path, "-version").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s -version: %v\n%s", path, err, out)
	}
	m := regexp.MustCompile(`version "(\d+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s -version: no version in %q", path, out)
	}
	return strconv.Atoi(string(m[1]))
}
