package rdq_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestLicense checks that the repository carries the Apache License 2.0
// verbatim, a NOTICE, and that the README and the Java POM name the
// license.
func TestLicense(t *testing.T) {
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v: the repository must ship it", err)
		}
		return string(b)
	}
	// The SHA-256 of the license text as the Apache Software Foundation
	// publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt).
	const apache2 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
	sum := sha256.Sum256([]byte(read("LICENSE")))
	if got := hex.EncodeToString(sum[:]); got != apache2 {
		t.Errorf("LICENSE is not the exact text of the Apache License 2.0 (sha256 %s, want %s)", got, apache2)
	}
	if notice := read("NOTICE"); !strings.HasPrefix(notice, "rdq\n") || !strings.Contains(notice, "Copyright 2026 The rdq Authors") {
		t.Errorf("NOTICE must name the project and carry \"Copyright 2026 The rdq Authors\":\n%s", notice)
	}
	if !strings.Contains(read("README.md"), "Apache License, Version 2.0") {
		t.Error("README.md does not name the license")
	}
	if pom := read("java/pom.xml"); !strings.Contains(pom, "<licenses>") || !strings.Contains(pom, "<name>Apache License, Version 2.0</name>") {
		t.Error("java/pom.xml has no <licenses> entry for the Apache License, Version 2.0")
	}
}
