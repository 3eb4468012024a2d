// Command shape prints the package-shape numbers that the "engine" issue sets
// targets for, each beside its target, so that the numbers before and after
// the refactor come from one command run at the repository root:
//
//	go run ./internal/shape [-clock clock.go] [-quorum quorum.go] [-to name] [-table file]
//
// Its last section is the "kinds" issue's: for each primitive (shared
// locks, permits, several keys, owners), the Lock's fields that belong to
// it, the files outside its own that mention them, and the branch sites
// there (if and switch statements whose condition or cases name one),
// with the root package's numbers that issue sets targets for.
//
// It reads the root package and every package under internal/ and nodecheck/
// (main packages and nested modules left out) from source, with go/build's
// choice of files for this platform. Files, lines (as wc -l counts them),
// exported identifiers and doc comments come from go/ast; `go doc -short .`
// is run. The library packages (the root, nodecheck, and the module packages
// their non-test code imports; the others are test support) are also
// type-checked (go/types, importer "source") to find duration constants and
// to build a call graph from (*Client).Acquire: naming a function or method
// (a call or a func value) is an edge, methods resolved by receiver type; an
// interface method goes to every method of the module's types that
// implement the interface (CHA); a call through a func value goes to every
// function value and func literal of the same signature (a func literal is
// part of the function it is written in). The Acquire path is the shortest
// path over the calls and func values named (then CHA, if that finds none);
// the reachability counts use every edge.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

type pkg struct {
	rel, path string      // directory relative to the root, import path
	files     []*ast.File // non-test files for this platform
	names     []string    // their paths relative to the root
	tests     []string    // test files, in-package and external
	lines     int
	imports   []string
	lib       bool
	info      *types.Info
	tpkg      *types.Package
}

var fset = token.NewFileSet()

func main() {
	clock := flag.String("clock", "clock.go", "the timing file, relative to the root: duration literals belong there only")
	quorum := flag.String("quorum", "quorum.go", "the file the Acquire path should reach, relative to the root")
	to := flag.String("to", "", "the function or method of the quorum file the Acquire path should reach (default any)")
	table := flag.String("table", "", "the scripts' table file, relative to the root, left out of the primitives' counts (the kinds issue)")
	flag.Parse()
	if *table != "" {
		*table = filepath.ToSlash(filepath.Clean(*table))
	}
	if err := run(filepath.ToSlash(filepath.Clean(*clock)), filepath.ToSlash(filepath.Clean(*quorum)), *to, *table); err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(1)
	}
}

func run(clockFile, quorumFile, to, table string) error {
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		return fmt.Errorf("run it at the module root: %v", err)
	}
	_, modPath, _ := strings.Cut(strings.SplitN(string(gomod), "\n", 2)[0], "module ")
	pkgs, err := load(strings.TrimSpace(modPath))
	if err != nil {
		return err
	}
	if len(pkgs) == 0 || pkgs[0].rel != "." {
		return fmt.Errorf("no package at the root")
	}
	rp := pkgs[0]
	abs, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	m := &imp{pkgs: pkgs, src: importer.ForCompiler(fset, "source", nil).(types.ImporterFrom), root: abs}
	var lib []*pkg
	for _, p := range pkgs {
		if p.lib {
			if _, err := m.Import(p.path); err != nil {
				return fmt.Errorf("type-checking %s: %v", p.path, err)
			}
			lib = append(lib, p)
		}
	}

	fmt.Printf("shape of %s; targets in [ ]\n\nroot package\n", rp.path)
	fmt.Printf("  non-test files                 %5d   [≤ 16]\n", len(rp.files))
	fmt.Printf("  non-test lines                 %5d   [≤ 3,600]\n", rp.lines)
	c, docs := exported(rp.files)
	fmt.Printf("  exported identifiers           %5d   [≤ 120]  %s\n", c.total(), c)
	if out, err := exec.Command("go", "doc", "-short", ".").Output(); err != nil {
		fmt.Printf("  go doc -short . lines          failed: %v   [≤ 35]\n", err)
	} else {
		fmt.Printf("  go doc -short . lines          %5d   [≤ 35]\n", strings.Count(string(out), "\n"))
	}
	for i, f := range rp.files {
		if f.Doc != nil {
			fmt.Printf("  %-30s %5d   [doc.go ≤ 80]  (its package comment: %d)\n", rp.names[i]+" lines", fset.File(f.FileStart).LineCount(), span(f.Doc.Pos(), f.Doc.End()))
		}
	}
	fnDocs := slices.DeleteFunc(slices.Clone(docs), func(d doc) bool { return !d.fn })
	docStats("exported doc comments", docs)
	docStats("  on funcs and methods", fnDocs)
	fmt.Printf("    (the first: on exported types, funcs, methods of exported types, consts, vars, fields, interface\n")
	fmt.Printf("    methods, a group's comment once; the issue's mean of 8.3 matches the second)\n")
	var long []string
	for _, d := range docs {
		if d.lines > 10 {
			long = append(long, fmt.Sprintf("%s %d", d.name, d.lines))
		}
	}
	wrap("    over 10 lines: ", long)
	matched, unmatched := testNames(rp)
	n := matched + len(unmatched)
	fmt.Printf("  test files named after a file  %5d of %d = %.0f%%   [≥ 80%%]\n", matched, n, 100*float64(matched)/float64(max(n, 1)))
	wrap("    not named after one: ", unmatched)

	fmt.Printf("\nexported identifiers of the other packages   [≤ 15 each in internal/]\n")
	for _, p := range pkgs[1:] {
		c, _ := exported(p.files)
		role := map[bool]string{true: "library", false: "test support"}[p.lib]
		fmt.Printf("  %-24s %4d   %s, %d files, %d lines  %s\n", p.rel, c.total(), role, len(p.files), p.lines, c)
	}
	longest(lib, 10)
	durations(lib, clockFile)
	callGraph(rp, lib, quorumFile, to)
	kindsReport(rp, table)
	return nil
}

// load parses the packages, the root first, and marks the library ones.
func load(modPath string) ([]*pkg, error) {
	dirs := []string{"."}
	for _, top := range []string{"internal", "nodecheck"} {
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil || d.Name() == "testdata" || strings.ContainsAny(d.Name()[:1], "._") {
				return filepath.SkipDir
			}
			dirs = append(dirs, p)
			return nil
		})
	}
	var pkgs []*pkg
	for _, dir := range dirs {
		bp, err := build.ImportDir(dir, 0)
		if _, ok := err.(*build.NoGoError); ok || (err == nil && bp.Name == "main") {
			continue
		} else if err != nil {
			return nil, err
		}
		p := &pkg{rel: filepath.ToSlash(dir), path: modPath, imports: bp.Imports, tests: append(bp.TestGoFiles, bp.XTestGoFiles...)}
		if p.rel != "." {
			p.path += "/" + p.rel
		}
		for _, name := range bp.GoFiles {
			src, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return nil, err
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), src, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			p.files, p.lines = append(p.files, f), p.lines+strings.Count(string(src), "\n")
			p.names = append(p.names, filepath.ToSlash(filepath.Join(dir, name)))
		}
		pkgs = append(pkgs, p)
	}
	var mark func(path string)
	mark = func(path string) {
		for _, p := range pkgs {
			if p.path == path && !p.lib {
				p.lib = true
				for _, imp := range p.imports {
					mark(imp)
				}
			}
		}
	}
	for _, p := range pkgs {
		if p.rel == "." || p.rel == "nodecheck" || strings.HasPrefix(p.rel, "nodecheck/") {
			mark(p.path)
		}
	}
	return pkgs, nil
}

// imp type-checks the module's packages itself, so that the call graph sees
// one object per function, and the others with the source importer.
type imp struct {
	pkgs []*pkg
	src  types.ImporterFrom
	root string
}

func (m *imp) Import(path string) (*types.Package, error) {
	for _, p := range m.pkgs {
		if p.path == path && p.info == nil {
			p.info = &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
			tp, err := (&types.Config{Importer: m}).Check(path, fset, p.files, p.info)
			p.tpkg = tp
			return tp, err
		} else if p.path == path {
			return p.tpkg, nil
		}
	}
	return m.src.ImportFrom(path, m.root, 0)
}

type counts [7]int // indexed by kinds

const (
	typ = iota
	function
	method
	konst
	variable
	field
	imethod
)

var kinds = [...]string{"types", "funcs", "methods", "consts", "vars", "fields", "interface methods"}

func (c counts) total() (n int) {
	for _, k := range c {
		n += k
	}
	return n
}

func (c counts) String() string {
	var s []string
	for i, k := range c {
		s = append(s, fmt.Sprintf("%d %s", k, kinds[i]))
	}
	return "(" + strings.Join(s, ", ") + ")"
}

type doc struct {
	name  string
	lines int
	fn    bool // on a func or method
}

// exported counts the exported identifiers of files and collects the doc
// comments on them.
func exported(files []*ast.File) (c counts, docs []doc) {
	note := func(kind int, name string, cg *ast.CommentGroup) {
		c[kind]++
		if cg != nil {
			docs = append(docs, doc{name, span(cg.Pos(), cg.End()), kind == function || kind == method})
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			if d, ok := d.(*ast.FuncDecl); ok && d.Name.IsExported() {
				if d.Recv == nil {
					note(function, d.Name.Name, d.Doc)
				} else if recv := typeName(d.Recv.List[0].Type); ast.IsExported(recv) {
					note(method, recv+"."+d.Name.Name, d.Doc)
				}
			}
			d, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for i, s := range d.Specs {
				if s, ok := s.(*ast.TypeSpec); ok && s.Name.IsExported() {
					note(typ, s.Name.Name, firstDoc(s.Doc, d, i))
					members(s, note)
				}
				if s, ok := s.(*ast.ValueSpec); ok {
					cg, kind := firstDoc(s.Doc, d, i), variable
					if d.Tok == token.CONST {
						kind = konst
					}
					for _, id := range s.Names {
						if id.IsExported() {
							note(kind, id.Name, cg)
							cg = nil
						}
					}
				}
			}
		}
	}
	return c, docs
}

// firstDoc is a spec's doc comment, or its group's for the first spec.
func firstDoc(cg *ast.CommentGroup, d *ast.GenDecl, i int) *ast.CommentGroup {
	if cg == nil && i == 0 {
		return d.Doc
	}
	return cg
}

// members counts the exported fields of a struct type, or the methods of an
// interface type.
func members(s *ast.TypeSpec, note func(int, string, *ast.CommentGroup)) {
	list, kind := (*ast.FieldList)(nil), field
	switch t := s.Type.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list, kind = t.Methods, imethod
	default:
		return
	}
	for _, fld := range list.List {
		names := fld.Names
		if len(names) == 0 && kind == field { // an embedded field
			names = []*ast.Ident{{Name: typeName(fld.Type)}}
		}
		for _, id := range names {
			if id.IsExported() {
				note(kind, s.Name.Name+"."+id.Name, fld.Doc)
			}
		}
	}
}

func docStats(what string, docs []doc) {
	sum, most, long := 0, 0, 0
	for _, d := range docs {
		sum, most = sum+d.lines, max(most, d.lines)
		if d.lines > 10 {
			long++
		}
	}
	fmt.Printf("  %-30s %5d   mean %.1f lines [≤ 4], max %d [≤ 10], over 10 lines: %d [0]\n", what, len(docs),
		float64(sum)/float64(max(len(docs), 1)), most, long)
}

// typeName is the name of a type written as T, *T, p.T or T[P].
func typeName(e ast.Expr) string {
	s, _, _ := strings.Cut(strings.TrimPrefix(types.ExprString(e), "*"), "[")
	return s[strings.LastIndex(s, ".")+1:]
}

func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil {
		return d.Name.Name
	} else if t := types.ExprString(d.Recv.List[0].Type); strings.HasPrefix(t, "*") {
		return "(" + t + ")." + d.Name.Name
	}
	return typeName(d.Recv.List[0].Type) + "." + d.Name.Name
}

// testNames counts the root package's test files named after one of its
// non-test files (foo_test.go or foo_internal_test.go for foo.go) or with
// one of the layout's names.
func testNames(p *pkg) (matched int, unmatched []string) {
	for _, t := range p.tests {
		foo := strings.TrimSuffix(strings.TrimSuffix(t, "_test.go"), "_internal") + ".go"
		if t == "chaos_test.go" || t == "bench_test.go" || t == "example_test.go" || slices.Contains(p.names, foo) {
			matched++
		} else {
			unmatched = append(unmatched, t)
		}
	}
	return matched, unmatched
}

func longest(lib []*pkg, top int) {
	type fl struct {
		lines       int
		where, name string
	}
	var all []fl
	for _, p := range lib {
		for i, f := range p.files {
			for _, d := range f.Decls {
				if d, ok := d.(*ast.FuncDecl); ok && d.Body != nil {
					all = append(all, fl{span(d.Pos(), d.End()), fmt.Sprintf("%s:%d", p.names[i], fset.Position(d.Pos()).Line), funcName(d)})
				}
			}
		}
	}
	slices.SortStableFunc(all, func(a, b fl) int { return b.lines - a.lines })
	fmt.Printf("\nthe %d longest functions of the library packages, in lines   [no target]\n", top)
	for _, f := range all[:min(top, len(all))] {
		fmt.Printf("  %4d  %-22s %s\n", f.lines, f.where, f.name)
	}
}

// durations lists the constant expressions of type time.Duration in the
// library's non-test code outside the timing file: those that use package
// time's units or convert to time.Duration, and the plain numbers other than
// 0 and ±1. The bare names of the module's constants are not listed.
func durations(lib []*pkg, clockFile string) {
	var lits, nums []string
	units := 0
	for _, p := range lib {
		for i, f := range p.files {
			if p.names[i] == clockFile {
				continue
			}
			var stack []ast.Node
			ast.Inspect(f, func(n ast.Node) bool {
				if n == nil {
					stack = stack[:len(stack)-1]
					return true
				}
				stack = append(stack, n)
				e, _ := n.(ast.Expr)
				tv := p.info.Types[e]
				if t, ok := tv.Type.(*types.Named); tv.Value == nil || !ok || t.Obj().Pkg() == nil || t.Obj().Pkg().Path() != "time" || t.Obj().Name() != "Duration" {
					return true
				}
				parent := stack[len(stack)-2]
				stack = stack[:len(stack)-1] // the children are skipped, and the nil visit with them
				if c, ok := p.info.Uses[ident(e)].(*types.Const); ok && c.Pkg() != nil && c.Pkg().Path() != "time" {
					return false // a named constant of the module
				}
				at, time := fmt.Sprintf("%s:%d %s", p.names[i], fset.Position(n.Pos()).Line, types.ExprString(e)), false
				ast.Inspect(n, func(n ast.Node) bool {
					c, ok := p.info.Uses[ident(n)].(*types.Const)
					call, _ := n.(*ast.CallExpr)
					time = time || ok && c.Pkg() != nil && c.Pkg().Path() == "time" || call != nil && p.info.Types[call.Fun].IsType()
					return !time
				})
				if b, ok := parent.(*ast.BinaryExpr); time && ok && b.Op == token.MUL && (p.info.Types[b.X].Value == nil || p.info.Types[b.Y].Value == nil) {
					at += " (unit conversion)"
					units++
				}
				if time {
					lits = append(lits, at)
				} else if v, _ := constant.Int64Val(tv.Value); v < -1 || v > 1 {
					nums = append(nums, at)
				}
				return false
			})
		}
	}
	fmt.Printf("\nduration literals in library non-test code outside %s  %d, %d of them unit conversions   [none]\n", clockFile, len(lits), units)
	for _, s := range lits {
		fmt.Println("  " + s)
	}
	fmt.Printf("plain numbers there of type time.Duration (ttl/50, 2*d)  %d   [review: behaviour fractions belong in %s]\n", len(nums), clockFile)
	wrap("  ", nums)
}

// ident is the identifier n names, if any: x, the Sel of p.x, or either
// instantiated (x[T]).
func ident(n ast.Node) *ast.Ident {
	switch x := n.(type) {
	case *ast.SelectorExpr:
		return x.Sel
	case *ast.IndexExpr:
		return ident(x.X)
	case *ast.IndexListExpr:
		return ident(x.X)
	}
	id, _ := n.(*ast.Ident)
	return id
}

func span(from, to token.Pos) int { return fset.Position(to).Line - fset.Position(from).Line + 1 }

func wrap(prefix string, items []string) {
	line := prefix
	for i, it := range items {
		if i > 0 && len(line)+len(it) > 110 {
			fmt.Println(line + ",")
			line = strings.Repeat(" ", len(prefix))
		} else if i > 0 {
			line += ", "
		}
		line += it
	}
	if len(items) > 0 {
		fmt.Println(line)
	}
}
