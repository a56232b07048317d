package rdq_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestCapabilitiesFoundWithAccessors keeps the rule of package store's
// documentation: outside package store, an optional capability of a store
// is found with its accessor (store.AdminOf and the others), never by a
// type assertion, so that every capability is declared in package store
// and in storetest.Capabilities. It reads the sources (tests included) and
// fails on a type assertion or type switch to one of store's optional
// interfaces, to a Backend interface built on them (dlq.Backend,
// tasks.Backend), or to an interface literal with one of their methods.
func TestCapabilitiesFoundWithAccessors(t *testing.T) {
	fset := token.NewFileSet()
	ifaces, methods := storeCapabilities(t, fset)
	backends := map[string]bool{"dlq.Backend": true, "tasks.Backend": true}
	bad := func(typ ast.Expr) string {
		switch typ := typ.(type) {
		case *ast.SelectorExpr:
			pkg, ok := typ.X.(*ast.Ident)
			if !ok {
				return ""
			}
			name := pkg.Name + "." + typ.Sel.Name
			if pkg.Name == "store" && ifaces[typ.Sel.Name] || backends[name] {
				return name
			}
		case *ast.InterfaceType:
			for _, m := range typ.Methods.List {
				for _, n := range m.Names {
					if methods[n.Name] {
						return "an interface with " + n.Name
					}
				}
			}
		}
		return ""
	}
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == "store", name == "testdata", name == "java", name == "proto",
				path != "." && strings.HasPrefix(name, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			var types []ast.Expr
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				types = []ast.Expr{n.Type} // nil in a type switch's guard
			case *ast.CaseClause:
				types = n.List
			}
			for _, typ := range types {
				if typ == nil {
					continue
				}
				if what := bad(typ); what != "" {
					t.Errorf("%s: a type assertion to %s: find the capability with its accessor in package store (or dlq.BackendOf)", fset.Position(typ.Pos()), what)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d Go files: is the test walking the repository?", files)
	}
}

// storeCapabilities returns the optional interfaces of package store (all
// its exported interfaces but Store and Wrapper) and their methods.
func storeCapabilities(t *testing.T, fset *token.FileSet) (ifaces, methods map[string]bool) {
	t.Helper()
	paths, err := filepath.Glob("store/*.go")
	if err != nil {
		t.Fatal(err)
	}
	ifaces, methods = map[string]bool{}, map[string]bool{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				it, ok := ts.Type.(*ast.InterfaceType)
				if !ok || !ts.Name.IsExported() || ts.Name.Name == "Store" || ts.Name.Name == "Wrapper" {
					continue
				}
				ifaces[ts.Name.Name] = true
				for _, m := range it.Methods.List {
					for _, n := range m.Names {
						methods[n.Name] = true
					}
				}
			}
		}
	}
	if !ifaces["Admin"] || !ifaces["DeadGroupKeyer"] {
		t.Fatalf("found the store interfaces %v, without Admin or DeadGroupKeyer: is the test reading package store?", ifaces)
	}
	return ifaces, methods
}
