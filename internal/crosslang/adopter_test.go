package crosslang

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/internal/pgtest"
)

// TestAMavenProjectAdoptsTheInstalledSDK is a Java team's first day, with no
// Go toolchain in its build: the SDK is installed in the local Maven
// repository as the Java README says (mvn install), and a new Maven project
// outside this repository's build (testdata/adopter: a POM naming only
// io.github.srjn45:rdq, and one class) migrates a schema, submits a task,
// works it on a handler that fails permanently, finds it dead with its
// group, redrives the group once the cause is fixed and sees it succeed, the
// redrive audited. The task's history is then read back from Go.
func TestAMavenProjectAdoptsTheInstalledSDK(t *testing.T) {
	requireJava(t) // Maven, a JDK, and the dependencies for an offline build
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	mvn(ctx, t, "", nil, "-q", "-f", filepath.Join(javaDir, "pom.xml"), "-pl", "rdq", "-am", "install",
		"-DskipTests", "-Dmaven.javadoc.skip=true", "-Dmaven.source.skip=true")

	dir := t.TempDir()
	writeAdopter(t, dir, sdkVersion(t))
	cpFile := filepath.Join(dir, "classpath.txt")
	mvn(ctx, t, dir, nil, "-q", "compile", "dependency:build-classpath", "-Dmdep.outputFile="+cpFile)
	deps, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}

	pool := pgtest.Pool(t)
	schema := pgtest.SchemaName()
	t.Cleanup(func() {
		if err := pgtest.DropSchema(pool, schema); err != nil {
			t.Error(err)
		}
	})
	jdbc, err := jdbcURL(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "java", "-cp",
		filepath.Join(dir, "target", "classes")+string(os.PathListSeparator)+strings.TrimSpace(string(deps)),
		"com.example.adopter.Main")
	cmd.Env = append(os.Environ(), "JDBC_URL="+jdbc, "RDQ_SCHEMA="+schema)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the adopter's Main: %v\n%s%s", err, out, stderr.Bytes())
	}
	t.Logf("the adopter's Main:\n%s", out)

	m := regexp.MustCompile(`(?m)^submitted: (\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no submitted task in the output:\n%s", out)
	}
	id, err := rdq.ParseID(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"dead: " + id.String() + " card declined",
		"group: card declined x1",
		"redriven: 1",
		"charged: " + id.String(),
		"audit: redrive by alice of 1: card issuer fixed",
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(out) {
			t.Errorf("the adopter's Main did not print %q:\n%s", want, out)
		}
	}

	st, closeStore, err := pgtest.Open(ctx, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closeStore(); err != nil {
			t.Error(err)
		}
	}()
	tk, history, err := st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != rdq.StatusSucceeded || tk.Life != 1 {
		t.Errorf("task %s is %s in life %d; want SUCCEEDED in life 1", id, tk.Status, tk.Life)
	}
	var got []string
	for _, a := range history {
		got = append(got, fmt.Sprintf("life %d attempt %d %s %s", a.Life, a.Number, a.Outcome, a.Message))
	}
	want := []string{
		"life 0 attempt 1 PERMANENT_FAILURE card declined",
		"life 1 attempt 2 SUCCESS ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// mvn runs Maven with args in dir (the current directory when empty) and
// env added to this process's environment, offline first, then online when
// the offline build lacks an artifact; it returns Maven's output.
func mvn(ctx context.Context, t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	run := func(extra ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "mvn", append(append(extra, "-B"), args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	}
	out, err := run("-o")
	if err != nil && strings.Contains(string(out), "offline") {
		out, err = run()
	}
	if err != nil {
		t.Fatalf("mvn %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// sdkVersion is the version the SDK's build installs (rdq-parent's).
func sdkVersion(t *testing.T) string {
	t.Helper()
	pom, err := os.ReadFile(filepath.Join(javaDir, "pom.xml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<artifactId>rdq-parent</artifactId>\s*<version>([^<]+)</version>`).FindSubmatch(pom)
	if m == nil {
		t.Fatal("no rdq-parent version in java/pom.xml")
	}
	return string(m[1])
}

// writeAdopter writes the adopting project (testdata/adopter) into dir.
func writeAdopter(t *testing.T, dir, version string) {
	t.Helper()
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "adopter", "pom.xml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	var pom bytes.Buffer
	if err := tmpl.Execute(&pom, struct{ Version string }{version}); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "adopter", "Main.java"))
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dir, "src", "main", "java", "com", "example", "adopter")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pom.xml"), pom.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "Main.java"), src, 0o644); err != nil {
		t.Fatal(err)
	}
}

// jdbcURL turns a postgres:// URL into pgjdbc's form, the user and password
// as parameters.
func jdbcURL(pg string) (string, error) {
	u, err := url.Parse(pg)
	if err != nil {
		return "", fmt.Errorf("parsing the database URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", fmt.Errorf("the database URL's scheme is %q; want postgres://", u.Scheme)
	}
	q := u.Query()
	if u.User != nil {
		q.Set("user", u.User.Username())
		if p, ok := u.User.Password(); ok {
			q.Set("password", p)
		}
	}
	return (&url.URL{Scheme: "jdbc:postgresql", Host: u.Host, Path: u.Path, RawQuery: q.Encode()}).String(), nil
}
