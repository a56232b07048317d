package pgstore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestStatementsRenderedOnce checks that every statement is rendered like
// the hot ones: its SQL is a constant of sql.go, and buildQueries fills in
// the schema (and LISTEN's channel) once, when the store is created, so no
// method renders them per call.
func TestStatementsRenderedOnce(t *testing.T) {
	q := buildQueries(`"s"`, `"c"`)
	v := reflect.ValueOf(q)
	for i := range v.NumField() {
		name, text := v.Type().Field(i).Name, v.Field(i).String()
		if text == "" {
			t.Errorf("queries.%s is empty: buildQueries leaves it out", name)
		}
		if strings.Contains(text, "{schema}") {
			t.Errorf("queries.%s still names {schema}", name)
		}
	}
	if q.listen != `LISTEN "c"` {
		t.Errorf("queries.listen = %q, want the channel filled in", q.listen)
	}

	// Every constant of sql.go naming the schema is rendered by
	// buildQueries (or is part of one that is).
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "sql.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]bool{}
	literals := map[string]string{} // constant name: its literal text
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name != "buildQueries" {
				continue
			}
			ast.Inspect(d, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok && len(c.Args) == 1 {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Replace" {
						if id, ok := c.Args[0].(*ast.Ident); ok {
							rendered[id.Name] = true
						}
					}
				}
				return true
			})
		case *ast.GenDecl:
			if d.Tok != token.CONST {
				continue
			}
			for _, sp := range d.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					var b strings.Builder
					ast.Inspect(vs.Values[i], func(n ast.Node) bool {
						if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
							s, err := strconv.Unquote(l.Value)
							if err != nil {
								t.Fatal(err)
							}
							b.WriteString(s)
						}
						return true
					})
					literals[n.Name] = b.String()
				}
			}
		}
	}
	if len(rendered) < 40 {
		t.Fatalf("found only %d statements rendered by buildQueries: is the test reading sql.go?", len(rendered))
	}
	for name, text := range literals {
		if rendered[name] || !strings.Contains(text, "{schema}") {
			continue
		}
		// A fragment of statements (a common table expression, say) is
		// rendered with them.
		part := false
		for other := range rendered {
			if usesConst(f, other, name) {
				part = true
				break
			}
		}
		if !part {
			t.Errorf("%s names the schema but buildQueries does not render it: add it to queries", name)
		}
	}

	// No other file of the package holds SQL to render (the migrations
	// are rendered when they run, once per schema).
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if name == "sql.go" || name == "migrate.go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		g, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(g, func(n ast.Node) bool {
			if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING &&
				(strings.Contains(l.Value, "{schema}") || strings.Contains(l.Value, "{channel}")) {
				t.Errorf("%s: %s renders a statement itself: statements belong to sql.go, rendered by buildQueries", fset.Position(l.Pos()), l.Value)
			}
			return true
		})
	}
}

// usesConst reports whether the definition of constant outer in f refers
// to constant inner, directly or through other constants.
func usesConst(f *ast.File, outer, inner string) bool {
	defs := map[string]ast.Expr{}
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					defs[n.Name] = vs.Values[i]
				}
			}
		}
	}
	seen := map[string]bool{}
	var uses func(name string) bool
	uses = func(name string) bool {
		if seen[name] {
			return false
		}
		seen[name] = true
		found := false
		if e, ok := defs[name]; ok {
			ast.Inspect(e, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && (id.Name == inner || uses(id.Name)) {
					found = true
				}
				return !found
			})
		}
		return found
	}
	return uses(outer)
}
