package main

import (
	"fmt"
	"go/ast"
	"go/types"
	"os/exec"
	"slices"
	"strings"
)

// A primitive is a kind of Lock that the root package builds on the one
// Lock type (the "kinds" issue): its own file, and the Lock's fields that
// belong to it alone.
// scripts is what the names of its package-level script variables hold
// (acquireSharedScript, releasePermitScript, extendAllScript), empty when
// it has none of its own.
type primitive struct {
	name, file, scripts string
	fields              []string
}

var primitives = []primitive{
	{"shared", "shared.go", "Shared", []string{"shared"}},
	{"permits", "permits.go", "Permit", []string{"permits", "permitArg", "slot", "slotArg", "pref"}},
	{"several keys", "multikey.go", "All", []string{"keys", "keysAndCounters"}},
	{"owner", "owner.go", "", []string{"owner"}},
}

// fileCount is a count per file, in the order first seen.
type fileCount struct {
	files []string
	n     map[string]int
}

func (c *fileCount) add(file string) {
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[file] == 0 {
		c.files = append(c.files, file)
	}
	c.n[file]++
}

func (c *fileCount) total() (n int) {
	for _, k := range c.n {
		n += k
	}
	return n
}

func (c *fileCount) String() string {
	var s []string
	for _, f := range c.files {
		s = append(s, fmt.Sprintf("%s %d", f, c.n[f]))
	}
	return strings.Join(s, ", ")
}

// primitiveUse is what the root package's code outside a primitive's own
// file (and outside the scripts' table, if named) does with its fields and
// script variables: every mention, and the branch sites, if and switch
// statements whose condition, tag or case expressions name one (a
// statement counts once per primitive).
type primitiveUse struct {
	mentions, branches fileCount
}

// primitiveUses finds, for each primitive, the uses of its fields of the
// struct type named lock in package p outside its file and the table file.
func primitiveUses(p *pkg, lock, table string, prims []primitive) []primitiveUse {
	out := make([]primitiveUse, len(prims))
	tn, _ := p.tpkg.Scope().Lookup(lock).(*types.TypeName)
	if tn == nil {
		return out
	}
	st, _ := tn.Type().Underlying().(*types.Struct)
	if st == nil {
		return out
	}
	owner := map[*types.Var]int{} // field → index of its primitive
	for i := range st.NumFields() {
		f := st.Field(i)
		for k, pr := range prims {
			if slices.Contains(pr.fields, f.Name()) {
				owner[f] = k
			}
		}
	}
	// readers are the methods of lock that read a primitive's fields
	// (l.exclusive() reads shared and permits): a branch on a call of one
	// is a branch on the primitives it reads.
	readers := map[*types.Func]map[int]bool{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Body == nil {
				continue
			}
			m, _ := p.info.Defs[fd.Name].(*types.Func)
			if m == nil || !isMethodOf(m, tn) {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					if v, ok := p.info.Uses[id].(*types.Var); ok {
						if k, ok := owner[v]; ok {
							if readers[m] == nil {
								readers[m] = map[int]bool{}
							}
							readers[m][k] = true
						}
					}
				}
				return true
			})
		}
	}
	// of is the primitive an identifier names: one of its fields, or one
	// of its package-level script variables; -1 otherwise.
	of := func(id *ast.Ident) int {
		v, ok := p.info.Uses[id].(*types.Var)
		if !ok {
			return -1
		}
		if k, ok := owner[v]; ok {
			return k
		}
		if v.Parent() == p.tpkg.Scope() && strings.Contains(v.Name(), "Script") {
			for k, pr := range prims {
				if pr.scripts != "" && strings.Contains(v.Name(), pr.scripts) {
					return k
				}
			}
		}
		return -1
	}
	// which returns the primitives that e names.
	which := func(e ast.Node) map[int]bool {
		found := map[int]bool{}
		if e == nil {
			return found
		}
		ast.Inspect(e, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if k := of(id); k >= 0 {
					found[k] = true
				}
				if m, ok := p.info.Uses[id].(*types.Func); ok {
					for k := range readers[m] {
						found[k] = true
					}
				}
			}
			return true
		})
		return found
	}
	for i, f := range p.files {
		name := p.names[i]
		if name == table {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var conds []ast.Node
			switch s := n.(type) {
			case *ast.Ident:
				if k := of(s); k >= 0 && name != prims[k].file {
					out[k].mentions.add(name)
				}
				return false
			case *ast.IfStmt:
				conds = []ast.Node{s.Cond}
			case *ast.SwitchStmt:
				conds = []ast.Node{s.Tag}
				for _, c := range s.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						conds = append(conds, e)
					}
				}
			default:
				return true
			}
			hit := map[int]bool{}
			for _, c := range conds {
				for k := range which(c) {
					hit[k] = true
				}
			}
			for k := range hit {
				if name != prims[k].file {
					out[k].branches.add(name)
				}
			}
			return true
		})
	}
	return out
}

// isMethodOf reports whether m is a method of the named type tn (value or
// pointer receiver).
func isMethodOf(m *types.Func, tn *types.TypeName) bool {
	sig, _ := m.Type().(*types.Signature)
	if sig == nil || sig.Recv() == nil {
		return false
	}
	t := sig.Recv().Type()
	if pt, ok := t.(*types.Pointer); ok {
		t = pt.Elem()
	}
	named, _ := t.(*types.Named)
	return named != nil && named.Obj() == tn
}

// kindsReport prints the numbers the "kinds" issue sets targets for.
func kindsReport(rp *pkg, table string) {
	fmt.Printf("\nprimitives (the kinds issue): the Lock's fields and the script variables of each primitive, used outside its own file")
	if table != "" {
		fmt.Printf(" and %s", table)
	}
	fmt.Printf("\n")
	uses := primitiveUses(rp, "Lock", table, primitives)
	sites := 0
	for k, pr := range primitives {
		u := uses[k]
		sites += u.branches.total()
		scripts := "none of its own"
		if pr.scripts != "" {
			scripts = "*" + pr.scripts + "*Script*"
		}
		fmt.Printf("  %-13s %-12s fields %s; scripts %s\n", pr.name, "("+pr.file+")", strings.Join(pr.fields, ", "), scripts)
		fmt.Printf("    branch sites %3d in %d files: %s\n", u.branches.total(), len(u.branches.files), &u.branches)
		fmt.Printf("    mentions     %3d in %d files: %s\n", u.mentions.total(), len(u.mentions.files), &u.mentions)
	}
	fmt.Printf("  branch sites on a primitive outside its own file, in all   %4d   [≤ 5]\n", sites)

	largest, largestName := 0, ""
	over := 0
	for i, f := range rp.files {
		if n := fset.File(f.FileStart).LineCount(); n > largest {
			largest, largestName = n, rp.names[i]
		}
		for _, d := range f.Decls {
			if d, ok := d.(*ast.FuncDecl); ok && d.Body != nil && span(d.Pos(), d.End()) > 60 {
				over++
			}
		}
	}
	c, _ := exported(rp.files)
	fmt.Printf("  root non-test lines                                       %5d   [≤ 4,300]\n", rp.lines)
	fmt.Printf("  root exported identifiers                                 %5d   [≤ 130]\n", c.total())
	fmt.Printf("  root largest file                                         %5d   [≤ 550]  %s\n", largest, largestName)
	if out, err := exec.Command("go", "doc", "-short", ".").Output(); err == nil {
		fmt.Printf("  go doc -short . lines                                     %5d   [≤ 40]\n", strings.Count(string(out), "\n"))
	}
	fmt.Printf("  root functions over 60 lines                              %5d   [0]\n", over)
}
