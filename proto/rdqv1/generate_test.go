package rdqv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buf is the pinned code generator, run with go run as the go:generate
// line of doc.go runs it; proto/buf.gen.yaml pins its three plugins.
const buf = "github.com/bufbuild/buf/cmd/buf@v1.75.0"

// generated are the files buf writes from proto/rdq/v1/*.proto, relative
// to this package.
var generated = []string{
	"rdq.pb.go", "rdq_grpc.pb.go", "handler.pb.go", "handler_grpc.pb.go",
	"rdqv1connect/rdq.connect.go", "rdqv1connect/handler.connect.go",
}

// The committed generated code is, byte for byte, what the pinned buf and
// plugins make of the .proto files today: a change to the contract without
// regenerating fails here. The first run downloads and builds them, and
// fetches the googleapis protos (proto/fetch-googleapis.sh); where that
// cannot be done (no network, no module cache, no pip) the test is
// skipped, except under CI=true.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the code generator")
	}
	out := t.TempDir()
	// The googleapis protos of the REST annotations, as go generate
	// fetches them (once: they are kept in proto/.googleapis).
	fetch := exec.Command("sh", filepath.Join("..", "fetch-googleapis.sh"))
	if b, err := fetch.CombinedOutput(); err != nil {
		msg := "fetch-googleapis.sh: " + err.Error() + "\n" + string(b)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command("go", "run", buf, "generate", "--template", filepath.Join("..", "buf.gen.yaml"), "--path", filepath.Join("..", "rdq"), "-o", out, "..")
	// The generator is a program of its own, outside the workspace.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		msg := "go run " + buf + " generate: " + err.Error() + "\n" + string(b)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, name := range generated {
		want, err := os.ReadFile(filepath.Join(out, "proto", "rdqv1", name))
		if err != nil {
			t.Fatalf("buf wrote no %s: %v", name, err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: it differs from what buf generates from the .proto files; run go generate ./proto/rdqv1", name)
		}
	}
}
