package main

import (
	"fmt"
	"go/ast"
	"go/types"
	"slices"
)

type fn struct {
	obj        *types.Func
	name, file string // (*T).m; its path relative to the root
	line       int
}

type graph map[*fn][]*fn

// callGraph prints the shortest static path from (*Client).Acquire to a
// function of quorumFile (named to, if not empty), and what Acquire reaches.
func callGraph(rp *pkg, lib []*pkg, quorumFile, to string) {
	nodes, bodies, infos := map[*types.Func]*fn{}, map[*fn]*ast.BlockStmt{}, map[*fn]*types.Info{}
	var order []*fn
	var named []types.Type // the library's named non-interface types
	for _, p := range lib {
		for i, f := range p.files {
			for _, d := range f.Decls {
				if d, ok := d.(*ast.FuncDecl); ok && d.Body != nil {
					n := &fn{p.info.Defs[d.Name].(*types.Func), funcName(d), p.names[i], fset.Position(d.Pos()).Line}
					nodes[n.obj], bodies[n], infos[n] = n, d.Body, p.info
					order = append(order, n)
				}
			}
		}
		for _, name := range p.tpkg.Scope().Names() {
			if tn, ok := p.tpkg.Scope().Lookup(name).(*types.TypeName); ok && !tn.IsAlias() && !types.IsInterface(tn.Type()) {
				named = append(named, tn.Type())
			}
		}
	}
	type site struct {
		from *fn
		sig  types.Type
	}
	direct, cha, viaValues := graph{}, graph{}, graph{}
	var taken []*fn          // functions used as values
	var lits, dynamic []site // func literals, by enclosing function; calls through func values
	for _, n := range order {
		info, called := infos[n], map[*ast.Ident]bool{}
		ast.Inspect(bodies[n], func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.FuncLit:
				lits = append(lits, site{n, info.TypeOf(x)})
			case *ast.CallExpr:
				if _, ok := info.Uses[ident(ast.Unparen(x.Fun))].(*types.Func); ok {
					called[ident(ast.Unparen(x.Fun))] = true
				} else if _, lit := ast.Unparen(x.Fun).(*ast.FuncLit); !lit {
					if tv := info.Types[x.Fun]; !tv.IsType() && !tv.IsBuiltin() && tv.Type != nil {
						dynamic = append(dynamic, site{n, tv.Type.Underlying()})
					}
				}
			case *ast.Ident:
				f, ok := info.Uses[x].(*types.Func)
				if !ok {
					break
				}
				if to := nodes[f.Origin()]; to != nil {
					direct[n] = append(direct[n], to)
					if !called[x] {
						taken = append(taken, to)
					}
				} else if recv := f.Type().(*types.Signature).Recv(); recv != nil && types.IsInterface(recv.Type()) {
					iface := recv.Type().Underlying().(*types.Interface)
					for _, t := range named {
						if t = types.NewPointer(t); types.Implements(t, iface) {
							if sel := types.NewMethodSet(t).Lookup(f.Pkg(), f.Name()); sel != nil && nodes[sel.Obj().(*types.Func).Origin()] != nil {
								cha[n] = append(cha[n], nodes[sel.Obj().(*types.Func).Origin()])
							}
						}
					}
				}
			}
			return true
		})
	}
	for _, d := range dynamic {
		for _, t := range taken {
			if types.Identical(d.sig, t.obj.Type()) { // receivers are ignored
				viaValues[d.from] = append(viaValues[d.from], t)
			}
		}
		for _, l := range lits {
			if types.Identical(d.sig, l.sig) {
				viaValues[d.from] = append(viaValues[d.from], l.from)
			}
		}
	}

	target := quorumFile
	if to != "" {
		target = to + " in " + quorumFile
	}
	fmt.Printf("\nthe path of an uncontended Acquire, statically: the shortest chain of calls (or func values named) from\n")
	fmt.Printf("(*Client).Acquire to %s, methods resolved by receiver type (go/types); any branch, so it may not be the one run\n", target)
	var start *fn
	if client, ok := rp.tpkg.Scope().Lookup("Client").(*types.TypeName); ok {
		obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(client.Type()), false, rp.tpkg, "Acquire")
		if acq, ok := obj.(*types.Func); ok {
			start = nodes[acq]
		}
	}
	if start == nil {
		fmt.Println("  no method (*Client).Acquire in the root package")
		return
	}
	end := func(n *fn) bool { return n.file == quorumFile && (to == "" || n.obj.Name() == to) }
	parent := search(start, end, direct)
	if parent[nil] == nil {
		fmt.Printf("  none without interface calls; with every implementation of an interface method (CHA):\n")
		parent = search(start, end, direct, cha)
	}
	var path []*fn
	for n := parent[nil]; n != nil; n = parent[n] {
		path = append(path, n)
	}
	slices.Reverse(path)
	files, switches := map[string]bool{}, 0
	for i, n := range path {
		fmt.Printf("  %2d  %-28s %s:%d\n", i+1, n.name, n.file, n.line)
		if i < len(path)-1 {
			files[n.file] = true
		}
		if i > 0 && n.file != path[i-1].file {
			switches++
		}
	}
	if path == nil {
		fmt.Printf("  %s is not reachable from Acquire\n", target)
	} else {
		fmt.Printf("  functions before %-14s %5d   [≤ 8]\n", quorumFile, len(path)-1)
		fmt.Printf("  files before %-18s %5d   [1]\n", quorumFile, len(files))
		fmt.Printf("  file switches, into it too     %5d   [1: one file, then %s]\n", switches, quorumFile)
	}
	before := graph{} // the calls and func values named, not followed into the quorum file
	for n, tos := range direct {
		if n.file != quorumFile {
			before[n] = tos
		}
	}
	count, files := 0, map[string]bool{}
	for n := range search(start, nil, before) {
		if n.file != quorumFile {
			count, files[n.file] = count+1, true
		}
	}
	fmt.Printf("  functions Acquire may call before %s, any branch  %4d in %d files   [≤ 8 in 1 file, on the uncontended path]\n",
		quorumFile, count, len(files))
	for i, what := range []string{"calls and func values named", "+ interface calls to every implementation (CHA)",
		"+ calls through func values, to all of that signature"} {
		seen, files := search(start, nil, slices.Concat([]graph{direct, cha, viaValues}[:i+1])...), map[string]bool{}
		for n := range seen {
			files[n.file] = true
		}
		fmt.Printf("  reachable from Acquire, %-53s %4d functions in %2d files\n", what+":", len(seen), len(files))
	}
	fmt.Printf("    static bounds over every branch and error path, not the issue's measure (62 functions in 13 files,\n")
	fmt.Printf("    followed by hand along the uncontended path only)\n")
}

// search walks the graphs breadth first from start, ties going to the
// earlier call in the source, and returns each function reached with the
// one it was reached from; under nil, the first function for which end is
// true, if any.
func search(start *fn, end func(*fn) bool, gs ...graph) map[*fn]*fn {
	parent, queue := map[*fn]*fn{start: nil}, []*fn{start}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, g := range gs {
			for _, to := range g[n] {
				if _, seen := parent[to]; !seen {
					parent[to], queue = n, append(queue, to)
					if end != nil && end(to) {
						parent[nil] = to
						return parent
					}
				}
			}
		}
	}
	return parent
}
