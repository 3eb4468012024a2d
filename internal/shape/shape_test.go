package main

import (
	"go/ast"
	"go/parser"
	"go/types"
	"slices"
	"testing"
)

const src = `package p

// T is exported.
type T struct {
	A, b int
	Embedded
}

type I interface {
	M()
	m()
}

type u struct{ X int }

// F has
// two lines.
func F() {}

func (T) Exported()   {}
func (*T) unexported() {}
func (u) Hidden()      {}

// Group.
const (
	C1 = 1
	c2 = 2
	C3 = 3
)

var V, w = 1, 2
`

func TestExported(t *testing.T) {
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	c, docs := exported([]*ast.File{f})
	// types T, I; func F; method T.Exported; consts C1, C3; var V; fields A, Embedded; interface method M
	if want := (counts{2, 1, 1, 2, 1, 2, 1}); c != want {
		t.Errorf("counts = %v, want %v", c, want)
	}
	want := []doc{{"T", 1, false}, {"F", 2, true}, {"C1", 1, false}}
	if !slices.Equal(docs, want) {
		t.Errorf("docs = %v, want %v", docs, want)
	}
}

func TestTestNames(t *testing.T) {
	p := &pkg{names: []string{"foo.go", "bar.go"},
		tests: []string{"foo_test.go", "bar_internal_test.go", "chaos_test.go", "baz_test.go", "foo_bar_test.go"}}
	matched, unmatched := testNames(p)
	if matched != 3 || !slices.Equal(unmatched, []string{"baz_test.go", "foo_bar_test.go"}) {
		t.Errorf("testNames = %d, %v", matched, unmatched)
	}
}

func TestSearch(t *testing.T) {
	a, b, c, d := &fn{name: "a"}, &fn{name: "b", file: "x.go"}, &fn{name: "c", file: "q.go"}, &fn{name: "d", file: "q.go"}
	g := graph{a: {b, d}, b: {c}}
	parent := search(a, func(n *fn) bool { return n.file == "q.go" }, g)
	if parent[nil] != d || parent[d] != a {
		t.Errorf("shortest path ends at %v from %v, want d from a", parent[nil].name, parent[parent[nil]].name)
	}
	if n := len(search(a, nil, g)); n != 4 {
		t.Errorf("reached %d functions, want 4", n)
	}
}

func TestPrimitiveUses(t *testing.T) {
	srcs := map[string]string{
		"lock.go": `package p
type Lock struct {
	shared  bool
	permits int
	other   int
}
var acquireSharedScript, plainScript = 1, 2
`,
		"shared.go": `package p
func own(l *Lock) { if l.shared { _ = acquireSharedScript } }
func (l *Lock) alone() bool { return !l.shared }
`,
		"other.go": `package p
func f(l *Lock) {
	if l.shared {
	}
	switch {
	case l.permits > 0 && l.shared:
	case l.other > 0:
	}
	_ = acquireSharedScript
	switch acquireSharedScript {
	case plainScript:
	}
	if l.other > 0 {
	}
	if l.alone() {
	}
}
`,
		"table.go": `package p
func g(l *Lock) { if l.shared { _ = acquireSharedScript } }
`,
	}
	p := &pkg{info: &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}}
	for _, name := range []string{"lock.go", "shared.go", "other.go", "table.go"} {
		f, err := parser.ParseFile(fset, name, srcs[name], 0)
		if err != nil {
			t.Fatal(err)
		}
		p.files, p.names = append(p.files, f), append(p.names, name)
	}
	var err error
	if p.tpkg, err = (&types.Config{}).Check("p", fset, p.files, p.info); err != nil {
		t.Fatal(err)
	}
	prims := []primitive{{"shared", "shared.go", "Shared", []string{"shared"}}, {"permits", "permits.go", "Permit", []string{"permits"}}}
	u := primitiveUses(p, "Lock", "table.go", prims)
	if got := u[0].branches.String(); got != "other.go 4" {
		t.Errorf("shared branch sites: %q, want other.go 4 (the if, the switch's case, the switch's tag, the call of a method that reads the field)", got)
	}
	if got := u[0].mentions.String(); got != "other.go 4" {
		t.Errorf("shared mentions: %q, want other.go 4", got)
	}
	if got := u[1].branches.String(); got != "other.go 1" {
		t.Errorf("permits branch sites: %q, want other.go 1", got)
	}
	if u := primitiveUses(p, "Lock", "", prims); u[0].branches.String() != "other.go 4, table.go 1" {
		t.Errorf("without a table file, shared branch sites: %q", u[0].branches.String())
	}
}
