package crosslang

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestJavaJarsCarryTheLicense: the SDK's jar, sources jar and javadoc jar,
// as the build that requireJava runs packs them, each hold the repository's
// LICENSE and NOTICE in META-INF, as Maven Central and the Apache License
// ask of every published artifact.
func TestJavaJarsCarryTheLicense(t *testing.T) {
	requireJava(t)
	jars, err := filepath.Glob(filepath.Join(javaDir, "rdq", "target", "rdq-*.jar"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"": false, "-sources": false, "-javadoc": false}
	for _, suffix := range []string{"", "-sources", "-javadoc"} {
		for _, j := range jars {
			if matched, _ := filepath.Match("rdq-*"+suffix+".jar", filepath.Base(j)); !matched {
				continue
			}
			if suffix == "" {
				if m1, _ := filepath.Match("rdq-*-sources.jar", filepath.Base(j)); m1 {
					continue
				}
				if m2, _ := filepath.Match("rdq-*-javadoc.jar", filepath.Base(j)); m2 {
					continue
				}
			}
			want[suffix] = true
			for _, name := range []string{"LICENSE", "NOTICE"} {
				repo, err := os.ReadFile(filepath.Join("..", "..", name))
				if err != nil {
					t.Fatal(err)
				}
				if got := zipEntry(t, j, "META-INF/"+name); !bytes.Equal(got, repo) {
					t.Errorf("%s: META-INF/%s is not the repository's %s (%d bytes)", filepath.Base(j), name, name, len(got))
				}
			}
		}
	}
	for suffix, found := range want {
		if !found {
			t.Errorf("no rdq-<version>%s.jar in java/rdq/target (found %v)", suffix, jars)
		}
	}
}

// zipEntry returns the content of the entry name of the zip file at path, or
// nil when it has none.
func zipEntry(t *testing.T, path, name string) []byte {
	t.Helper()
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, f := range r.File {
		if f.Name != name {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return nil
}
