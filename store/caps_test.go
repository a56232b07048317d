package store_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srjn45/rdq/store"
)

// pausing is a store with one capability, Pauser; its Store methods are
// never called.
type pausing struct {
	store.Store
	paused []string
}

func (p *pausing) PauseQueue(context.Context, store.PauseParams) error  { return nil }
func (p *pausing) ResumeQueue(context.Context, store.PauseParams) error { return nil }
func (p *pausing) PausedQueues(context.Context) ([]string, error)       { return p.paused, nil }

// wrapping wraps inner and implements no capability itself.
type wrapping struct {
	store.Store
	inner store.Store
}

func (w *wrapping) Unwrap() store.Store { return w.inner }

// pausingWrapper wraps inner and serves Pauser itself.
type pausingWrapper struct {
	pausing
	inner store.Store
}

func (w *pausingWrapper) Unwrap() store.Store { return w.inner }

// selfWrapping unwraps to itself.
type selfWrapping struct{ store.Store }

func (w *selfWrapping) Unwrap() store.Store { return w }

func pausedOf(t *testing.T, s store.Store) ([]string, bool) {
	t.Helper()
	p, ok := store.PauserOf(s)
	if !ok {
		return nil, false
	}
	q, err := p.PausedQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return q, true
}

func TestAccessorsSeeThroughWrappers(t *testing.T) {
	inner := &pausing{paused: []string{"inner"}}
	for _, c := range []struct {
		name string
		s    store.Store
		want string // the paused queue the found Pauser reports; "" for none found
	}{
		{"the store itself", inner, "inner"},
		{"one wrapper", &wrapping{inner: inner}, "inner"},
		{"two wrappers", &wrapping{inner: &wrapping{inner: inner}}, "inner"},
		{"a wrapper serving it", &pausingWrapper{pausing: pausing{paused: []string{"outer"}}, inner: inner}, "outer"},
		{"a store without it", &wrapping{inner: &wrapping{}}, ""},
		{"a wrapper of nothing", &wrapping{}, ""},
		{"a wrapper of itself", &selfWrapping{}, ""},
		{"nil", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, ok := pausedOf(t, c.s)
			switch {
			case c.want == "" && ok:
				t.Errorf("PauserOf found a Pauser (paused %v), want none", q)
			case c.want != "" && (!ok || len(q) != 1 || q[0] != c.want):
				t.Errorf("PauserOf: found %v, paused %v; want the Pauser pausing %q", ok, q, c.want)
			}
			if _, ok := store.AdminOf(c.s); ok {
				t.Error("AdminOf found an Admin in stores without one")
			}
		})
	}
}

// TestEveryCapabilityHasAnAccessor keeps the rule of the package doc: each
// optional interface of this package has an accessor, XOf for interface X
// (RegistryOf for WorkerRegistry), returning (X, bool).
func TestEveryCapabilityHasAnAccessor(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	interfaces := map[string]bool{}
	accessors := map[string]*ast.FuncType{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					if ts, ok := sp.(*ast.TypeSpec); ok && ts.Name.IsExported() {
						if _, ok := ts.Type.(*ast.InterfaceType); ok {
							interfaces[ts.Name.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil && strings.HasSuffix(d.Name.Name, "Of") {
					accessors[d.Name.Name] = d.Type
				}
			}
		}
	}
	delete(interfaces, "Store")
	delete(interfaces, "Wrapper")
	if len(interfaces) < 11 {
		t.Fatalf("found only the interfaces %v: is the test reading the package?", interfaces)
	}
	for name := range interfaces {
		acc := name + "Of"
		if name == "WorkerRegistry" {
			acc = "RegistryOf"
		}
		ft := accessors[acc]
		if ft == nil {
			t.Errorf("the optional interface %s has no accessor %s(Store) (%s, bool)", name, acc, name)
			continue
		}
		if len(ft.Params.List) != 1 || ft.Results == nil || len(ft.Results.List) != 2 {
			t.Errorf("%s must take a Store and return (%s, bool)", acc, name)
			continue
		}
		if id, ok := ft.Results.List[0].Type.(*ast.Ident); !ok || id.Name != name {
			t.Errorf("%s returns %v first, want %s", acc, ft.Results.List[0].Type, name)
		}
	}
}
