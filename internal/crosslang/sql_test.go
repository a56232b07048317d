package crosslang

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/srjn45/rdq/pgstore"
)

var update = flag.Bool("update", false, "rewrite the Java SDK's copy of pgstore's SQL")

// javaSQLPath is the Java SDK's copy of the pgstore statements it runs,
// generated from pgstore/sql.go by TestJavaSQLIsPgstoreSQL -update.
const javaSQLPath = "../../java/rdq/src/main/resources/io/github/srjn45/rdq/pgstore-sql.json"

// javaStatements are the pgstore statements the Java SDK runs, by the name
// of their constant in pgstore/sql.go.
var javaStatements = []string{
	"sqlMigrateLock",
	"sqlSchemaExists",
	"sqlCreateSchema",
	"sqlCreateMigrationsTable",
	"sqlCurrentVersion",
	"sqlRecordVersion",
	"sqlEnqueue",
	"sqlEnqueueLookup",
	"sqlKeyLookup",
	"sqlPruneKeys",
	"sqlClaimQueueHandlers",
	"sqlHeartbeat",
	"sqlFinish",
	"sqlRelease",
	"sqlSnooze",
	"sqlReclaimExpired",
	"sqlGetTask",
	"sqlGetAttempts",
	"sqlPurgeSucceeded",
	"sqlRedriveLock",
	"sqlRedriveIDs",
	"sqlInsertAudit",
	"sqlListen",
	"sqlRegisterWorker",
	"sqlDeregisterWorker",
	"sqlStats",
	"sqlPauseQueue",
	"sqlResumeQueue",
	"sqlPausedQueues",
	"sqlListDead",
	"sqlListDeadAfter",
	"sqlCountDead",
	"sqlRedriveDead",
	"sqlRedriveDeadLifeLimit",
	"sqlRedriveDeadAtLimit",
	"sqlPurgeDead",
	"sqlPurgeDeadDropKeys",
	"sqlDeadGroups",
	"sqlListAudit",
	"sqlTaskByKey",
	"sqlLiveLock",
	"sqlRetryNow",
	"sqlCancel",
	"sqlRedrivePayload",
	"sqlPauseHandler",
	"sqlHoldTasks",
	"sqlResumeHandler",
	"sqlUnholdTasks",
	"sqlPausedHandlers",
	"sqlReopenHandler",
	"sqlHoldStrays",
	"sqlClaimProbe",
	"sqlListTasks",
	"sqlListTasksHeld",
	"sqlListTasksWaiting",
	"sqlJITOff",
}

// pgstoreConstants evaluates the string constants of pgstore/sql.go:
// literals and sums of literals and other constants of the file.
func pgstoreConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../../pgstore/sql.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]ast.Expr{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					exprs[n.Name] = vs.Values[i]
				}
			}
		}
	}
	var eval func(e ast.Expr) (string, error)
	eval = func(e ast.Expr) (string, error) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", fmt.Errorf("not a string literal: %s", e.Value)
			}
			return strconv.Unquote(e.Value)
		case *ast.Ident:
			def, ok := exprs[e.Name]
			if !ok {
				return "", fmt.Errorf("unknown constant %s", e.Name)
			}
			return eval(def)
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return "", fmt.Errorf("operator %s", e.Op)
			}
			x, err := eval(e.X)
			if err != nil {
				return "", err
			}
			y, err := eval(e.Y)
			return x + y, err
		}
		return "", fmt.Errorf("unsupported expression %T", e)
	}
	out := map[string]string{}
	for _, name := range javaStatements {
		def, ok := exprs[name]
		if !ok {
			t.Fatalf("pgstore/sql.go has no constant %s, which the Java SDK runs: update javaStatements and the Java SDK", name)
		}
		v, err := eval(def)
		if err != nil {
			t.Fatalf("evaluating %s: %v", name, err)
		}
		out[name] = v
	}
	return out
}

// TestJavaSQLIsPgstoreSQL checks that the Java SDK runs exactly pgstore's
// statements: its resource file must equal what pgstore/sql.go holds now.
// After a change to pgstore's SQL, regenerate it with
//
//	go test ./internal/crosslang -run TestJavaSQLIsPgstoreSQL -update
//
// and adapt the Java SDK to any change of parameters.
func TestJavaSQLIsPgstoreSQL(t *testing.T) {
	stmts := pgstoreConstants(t)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(stmts); err != nil {
		t.Fatal(err)
	}
	want := buf.Bytes()
	if *update {
		if err := os.WriteFile(javaSQLPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(javaSQLPath)
	if err != nil {
		t.Fatalf("reading the Java SDK's SQL: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from pgstore/sql.go: regenerate it with\n\tgo test ./internal/crosslang -run TestJavaSQLIsPgstoreSQL -update\nand adapt the Java SDK to any change of parameters", filepath.Base(javaSQLPath))
	}
}

// javaSchemaPath holds the Java SDK's list of known schema versions.
const javaSchemaPath = "../../java/rdq/src/main/java/io/github/srjn45/rdq/SchemaVersion.java"

var knownVersionsRE = regexp.MustCompile(`KNOWN_VERSIONS\s*=\s*\{([0-9,\s]*)\}`)

// TestJavaKnowsLatestSchemaVersion checks that the Java SDK's known schema
// versions end exactly at pgstore's latest migration: a new migration must
// be read and adopted by the Java SDK before it ships.
func TestJavaKnowsLatestSchemaVersion(t *testing.T) {
	src, err := os.ReadFile(javaSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	m := knownVersionsRE.FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s has no KNOWN_VERSIONS = {...} constant", javaSchemaPath)
	}
	var known []int
	for _, f := range strings.Split(string(m[1]), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		known = append(known, v)
	}
	latest := pgstore.LatestVersion()
	if len(known) == 0 || known[len(known)-1] != latest {
		t.Fatalf("the Java SDK knows schema versions %v, but pgstore's latest migration is %d: read the new migrations, make the Java SDK use them, and set SchemaVersion.KNOWN_VERSIONS", known, latest)
	}
	for i := 1; i < len(known); i++ {
		if known[i] <= known[i-1] {
			t.Fatalf("SchemaVersion.KNOWN_VERSIONS %v is not in increasing order", known)
		}
	}
}
