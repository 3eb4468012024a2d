package redlock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The Go code blocks of README.md and docs/*.md are the bodies of functions
// of the test files (TestDocSnippets checks it): each block follows a line
// <!-- example: name --> naming its function. A block that begins with an
// import declaration leaves it out of the body; the function's file imports
// those paths. Every one runs on real nodes, not only compiles, and its test
// checks what the block promises its reader: the quickstart in
// TestReadmeQuickstart, the others in the TestReadme tests below, and otel's
// readmeOtel in its module.

// readmeQuickstart is the README's "## Use" block.
func readmeQuickstart(addrs []string) error {
	// addrs: one address per independent Redis master, e.g. "10.0.0.1:6379".
	var nodes []redis.UniversalClient
	for _, addr := range addrs {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = locks.Close(ctx) // waits for calls in progress; gives up deletes to silent nodes after 1 s
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := locks.Acquire(ctx, "orders:42", 10*time.Second)
	if err != nil {
		return err // ErrNotAcquired: busy until ctx ended, or ErrUnavailable: too many nodes down
	}
	defer lock.Release(ctx) // releases even with a cancelled ctx
	fmt.Println("locked until", lock.Until().Format(time.TimeOnly))
	return nil
}

// readmeFencedLease is the README's "## Lease and fencing" block.
func readmeFencedLease(ctx context.Context, nodes []redis.UniversalClient, db *sql.DB, id int64) error {
	locks, err := redlock.New(nodes, redlock.WithFencing())
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = locks.Close(ctx) // waits for calls in progress; gives up deletes to silent nodes after 1 s
	}()

	return locks.Do(ctx, "orders:submit", 10*time.Second, func(ctx context.Context, lock *redlock.Lock) error {
		// ctx ends when the lock is lost (context.Cause matches ErrLockLost): stop then.
		_, err := db.ExecContext(ctx, "UPDATE orders SET state = 'submitted', fence = $1 WHERE id = $2 AND fence <= $1",
			lock.Fence(), id) // 0 rows: a newer holder has written
		return err
	})
}

// readmeElection is the README's "## Leader election" block.
func readmeElection(ctx context.Context, locks *redlock.Client, host string, schedule func(ctx context.Context, term uint64) error) error {
	election, err := locks.Election("scheduler:leader", 10*time.Second)
	if err != nil {
		return err
	}
	// Campaigns, runs the function while this process leads, and
	// campaigns again when the leadership is lost, until ctx ends.
	return election.Run(ctx, host, func(ctx context.Context, leader *redlock.Leadership) error {
		// ctx ends before the leadership's validity does (cause ErrLockLost):
		// stop then. Writes carry the term; storage refuses lower terms.
		return schedule(ctx, leader.Term())
	})
}

// readmeLeaseDo and readmeLeaseKeepAlive are the blocks of docs/lease.md.
func readmeLeaseDo(ctx context.Context, locks *redlock.Client, buildReport func(context.Context) error) {
	err := locks.Do(ctx, "reports:daily", 10*time.Second, func(ctx context.Context, _ *redlock.Lock) error {
		return buildReport(ctx) // must stop when ctx ends: the lock is lost, or ctx ended
	})
	if errors.Is(err, redlock.ErrLockLost) {
		// the lock could not be proven held while buildReport ran: another
		// holder may have overlapped it
	}
}

func readmeLeaseKeepAlive(ctx context.Context, locks *redlock.Client, process func(context.Context) error) error {
	lock, err := locks.Acquire(ctx, "orders:42", 10*time.Second)
	if err != nil {
		return err
	}
	defer lock.Release(ctx)
	work := lock.KeepAlive(ctx) // ends when the lock is released or lost, or ctx ends
	if err := process(work); err != nil {
		return errors.Join(err, context.Cause(work)) // a cause matching ErrLockLost says why
	}
	return nil
}

// snippetSources are the test files whose functions hold the documents'
// code blocks; otel's are compiled by its own module.
var snippetSources = []string{"*_test.go", "otel/*_test.go"}

// TestDocSnippets checks that every Go code block of README.md and
// docs/*.md is the body of the function its marker names.
func TestDocSnippets(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	funcs := snippetFuncs(t)
	for _, doc := range append([]string{"README.md"}, docs...) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```go" {
				continue
			}
			name := ""
			if i > 0 {
				if m := snippetMarker.FindStringSubmatch(lines[i-1]); m != nil {
					name = m[1]
				}
			}
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
				j++
			}
			block := strings.Join(lines[i+1:j], "\n")
			switch fn, ok := funcs[name]; {
			case name == "":
				t.Errorf("%s:%d: a Go block without a <!-- example: name --> line before it", doc, i+1)
			case !ok:
				t.Errorf("%s:%d: no test file has a function %s", doc, i+1, name)
			default:
				fn.check(t, doc, i+1, block)
			}
			i = j
		}
	}
}

var snippetMarker = regexp.MustCompile(`^<!-- example: (\w+) -->$`)

// snippetFunc is a function whose body is a document's code block.
type snippetFunc struct {
	body    string
	imports map[string]bool // the paths its file imports
}

func snippetFuncs(t *testing.T) map[string]snippetFunc {
	t.Helper()
	out := map[string]snippetFunc{}
	for _, pattern := range snippetSources {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			imports := map[string]bool{}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				imports[path] = true
			}
			for _, d := range f.Decls {
				d, ok := d.(*ast.FuncDecl)
				if !ok || !strings.HasPrefix(d.Name.Name, "readme") || d.Body == nil {
					continue
				}
				inner := src[fset.Position(d.Body.Lbrace).Offset+1 : fset.Position(d.Body.Rbrace).Offset]
				var lines []string
				for line := range strings.Lines(string(inner)) {
					lines = append(lines, strings.TrimPrefix(line, "\t"))
				}
				out[d.Name.Name] = snippetFunc{body: strings.TrimSpace(strings.Join(lines, "")), imports: imports}
			}
		}
	}
	return out
}

// check compares block, the document's code, with the function's body.
func (fn snippetFunc) check(t *testing.T, doc string, line int, block string) {
	t.Helper()
	body := strings.TrimSpace(block)
	if strings.HasPrefix(body, "import") {
		fset := token.NewFileSet()
		file := "package p\n" + body
		snippet, err := parser.ParseFile(fset, doc, file, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s:%d: the block's import declaration: %v", doc, line, err)
			return
		}
		end := fset.Position(snippet.Name.End()).Offset
		for _, d := range snippet.Decls {
			end = fset.Position(d.End()).Offset
		}
		for _, imp := range snippet.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !fn.imports[path] {
				t.Errorf("%s:%d: the block imports %s, its function's file does not", doc, line, path)
			}
		}
		body = strings.TrimSpace(file[end:])
	}
	if body != fn.body {
		t.Errorf("%s:%d: the Go block differs from its function's body; make them the same.\nblock:\n%s\n\nfunction:\n%s", doc, line, body, fn.body)
	}
}

// TestReadmeQuickstart runs the README's first example on fresh nodes: it
// must work at once, with no setup the README does not show.
func TestReadmeQuickstart(t *testing.T) {
	fresh := redistest.StartT(t, 3)
	addrs := make([]string, len(fresh))
	for i, s := range fresh {
		addrs[i] = s.Addr()
	}
	start := time.Now()
	if err := readmeQuickstart(addrs); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the quickstart took %v on fresh nodes", took)
	}
}

// TestReadmeFencedLease runs the README's fenced lease: the order is
// written with the lock's fence, which is not 0, and a later run whose
// fence is below one a newer holder already wrote changes nothing.
func TestReadmeFencedLease(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	store := &ordersDB{orders: map[int64]*order{42: {state: "new"}}}
	db := sql.OpenDB(store)
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()

	require.NoError(t, readmeFencedLease(ctx, e.nodes, db, 42))
	first := store.get(42)
	assert.Equal(t, "submitted", first.state)
	assert.Positive(t, first.fence, "written without a fence")

	// A newer holder (a fence far above) wrote the row meanwhile.
	store.mu.Lock()
	store.orders[42] = &order{state: "shipped", fence: first.fence + int64(time.Hour)}
	store.mu.Unlock()
	require.NoError(t, readmeFencedLease(ctx, e.nodes, db, 42))
	assert.Equal(t, "shipped", store.get(42).state, "a lower fence overwrote a newer holder's write")
	assert.Equal(t, 2, store.execs)
	e.eventuallyNoKey("orders:submit", 5*time.Second)
}

// TestReadmeElection runs the README's election block: schedule runs while
// the process leads, with its term, and another campaigner cannot lead
// meanwhile; when schedule returns, Run resigns and returns.
func TestReadmeElection(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	locks, other := e.client(), e.client()
	ctx := t.Context()
	rival, err := other.Election("scheduler:leader", time.Second)
	require.NoError(t, err)
	ran := 0
	err = readmeElection(ctx, locks, "host-a", func(ctx context.Context, term uint64) error {
		ran++
		require.NotZero(t, term)
		leader, err := rival.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, redlock.Leader{Value: "host-a", Term: term}, redlock.Leader{Value: leader.Value, Term: leader.Term})
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err = rival.Campaign(tctx, "host-b")
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "another led meanwhile")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, ran)
	e.eventuallyNoKey("scheduler:leader", 5*time.Second)
}

// TestReadmeLeaseDo runs docs/lease.md's Do block: the report is built
// while the lock is held and released after it; when the lock is lost,
// buildReport's ctx ends with a cause matching ErrLockLost.
func TestReadmeLeaseDo(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	locks, other := e.client(), e.client()
	ctx := t.Context()
	const key = "reports:daily"

	built := 0
	readmeLeaseDo(ctx, locks, func(ctx context.Context) error {
		built++
		require.NoError(t, ctx.Err())
		_, err := other.TryAcquire(ctx, key, time.Second)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "the report was built without the lock")
		return nil
	})
	require.Equal(t, 1, built)
	e.eventuallyNoKey(key, 5*time.Second) // Release returns at a quorum: the last delete may land just after

	var cause error
	readmeLeaseDo(ctx, locks, func(ctx context.Context) error {
		built++
		e.loseMajority(key)
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(20 * time.Second):
		}
		return ctx.Err()
	})
	require.Equal(t, 2, built)
	require.ErrorIs(t, cause, redlock.ErrLockLost, "buildReport's ctx did not end with the loss")
}

// TestReadmeLeaseKeepAlive runs docs/lease.md's KeepAlive block: process
// works under a live context while the lock is held, the lock is released
// on return, and a lost lock ends the work with a cause that the returned
// error carries.
func TestReadmeLeaseKeepAlive(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	locks, other := e.client(), e.client()
	ctx := t.Context()
	const key = "orders:42"

	require.NoError(t, readmeLeaseKeepAlive(ctx, locks, func(work context.Context) error {
		require.NoError(t, work.Err())
		_, err := other.TryAcquire(ctx, key, time.Second)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "the work ran without the lock")
		return nil
	}))
	e.eventuallyNoKey(key, 5*time.Second) // Release returns at a quorum: the last delete may land just after

	errWork := errors.New("the work stopped")
	err := readmeLeaseKeepAlive(ctx, locks, func(work context.Context) error {
		e.loseMajority(key)
		select {
		case <-work.Done():
		case <-time.After(20 * time.Second):
		}
		return errWork
	})
	require.ErrorIs(t, err, errWork)
	require.ErrorIs(t, err, redlock.ErrLockLost, "the error does not say the lock was lost")
}

// loseMajority deletes the one holder's value of key from a majority of
// e's nodes, once every node holds it: an acquire returns at a quorum, and
// its last write, landing after the delete, would put the value back.
func (e *env) loseMajority(key string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.quorumHolders(key) == len(e.direct) }, 5*time.Second, time.Millisecond,
		"not every node took the key")
	for i := range len(e.direct)/2 + 1 {
		require.NoError(e.t, e.direct[i].Del(context.Background(), key).Err())
	}
}

// ordersDB is a database/sql driver for the one statement of
// readmeFencedLease, over an in-memory orders table, so that the README's
// fenced write runs through database/sql as a user's would.
type ordersDB struct {
	mu     sync.Mutex
	orders map[int64]*order
	execs  int
}

type order struct {
	state string
	fence int64
}

const readmeUpdate = "UPDATE orders SET state = 'submitted', fence = $1 WHERE id = $2 AND fence <= $1"

func (db *ordersDB) Connect(context.Context) (driver.Conn, error) { return ordersConn{db}, nil }

func (db *ordersDB) Driver() driver.Driver { return nil }

func (db *ordersDB) get(id int64) order {
	db.mu.Lock()
	defer db.mu.Unlock()
	return *db.orders[id]
}

type ordersConn struct{ db *ordersDB }

func (ordersConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("ordersDB: no prepare")
}

func (ordersConn) Close() error { return nil }

func (ordersConn) Begin() (driver.Tx, error) { return nil, errors.New("ordersDB: no transactions") }

// ExecContext runs readmeUpdate, the conditional write that makes the
// fence count: it applies only if no higher fence has written the row.
func (c ordersConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if query != readmeUpdate || len(args) != 2 {
		return nil, fmt.Errorf("ordersDB: unexpected statement %q with %d arguments", query, len(args))
	}
	fence, ok1 := args[0].Value.(int64)
	id, ok2 := args[1].Value.(int64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("ordersDB: arguments %T, %T", args[0].Value, args[1].Value)
	}
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	c.db.execs++
	o := c.db.orders[id]
	if o == nil || o.fence > fence {
		return driver.RowsAffected(0), nil
	}
	o.state, o.fence = "submitted", fence
	return driver.RowsAffected(1), nil
}

// TestDocsListed: the README's Documentation list names every docs/*.md,
// and each document it lists exists; doc.go's list names every document
// of the library's topics.
func TestDocsListed(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, list, ok := strings.Cut(string(readme), "\n## Documentation\n")
	require.True(t, ok, "README.md has no ## Documentation section")
	list, _, _ = strings.Cut(list, "\n## ")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`\]\(([^)#]+)\)`).FindAllStringSubmatch(list, -1) {
		listed[m[1]] = true
		_, err := os.Stat(m[1])
		assert.NoError(t, err, "README.md's Documentation lists %s", m[1])
	}
	for _, d := range docs {
		assert.True(t, listed[d], "README.md's Documentation does not list %s", d)
	}

	// doc.go lists the library's topics: not the command, the benchmarks
	// or the test suite, which the README lists.
	notTopics := map[string]bool{"docs/cli.md": true, "docs/benchmarks.md": true, "docs/testing.md": true}
	pkg, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	cited := map[string]bool{}
	for _, m := range regexp.MustCompile(`blob/main/(docs/[\w.-]+\.md)`).FindAllStringSubmatch(string(pkg), -1) {
		cited[m[1]] = true
		_, err := os.Stat(m[1])
		assert.NoError(t, err, "doc.go links to %s", m[1])
	}
	for _, d := range docs {
		if !notTopics[d] {
			assert.True(t, cited[d], "doc.go's Documentation does not list %s", d)
		}
	}
}

// citedNotFiles are names the documents cite that are no file of the
// repository, on purpose.
var citedNotFiles = map[string]string{
	"long.sh": "a user's script in docs/cli.md's session",
}

// TestDocsCiteRealFiles: every file name README.md, CHANGELOG.md's latest
// entry and docs/*.md cite (in backquotes or as a relative link) exists:
// a path from the repository's root or the document's directory, a glob
// that matches, or a bare name that some file of the repository has; and
// every test they name exists.
func TestDocsCiteRealFiles(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	names := map[string]bool{} // every file's base name
	tests := map[string]bool{} // every test function
	require.NoError(t, filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		names[d.Name()] = true
		if strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(`).FindAllStringSubmatch(string(src), -1) {
				tests[m[1]] = true
			}
		}
		return nil
	}))
	quoted := regexp.MustCompile("`([\\w./*-]+\\.(?:go|lua|md|sh|svg|mod))`")
	linked := regexp.MustCompile(`\]\(([^)#:\s]+)(?:#[^)]*)?\)`)
	testName := regexp.MustCompile(`\bTest[A-Z]\w+`)
	exists := func(doc, name string) bool {
		if strings.Contains(name, "*") && !strings.Contains(name, "/") {
			for n := range names {
				if ok, _ := filepath.Match(name, n); ok {
					return true
				}
			}
			return false
		}
		if strings.Contains(name, "*") {
			m, _ := filepath.Glob(name)
			return len(m) > 0
		}
		if !strings.Contains(name, "/") {
			return names[name]
		}
		for _, p := range []string{name, filepath.Join(filepath.Dir(doc), name)} {
			if _, err := os.Stat(p); err == nil {
				return true
			}
		}
		return false
	}
	for _, doc := range append([]string{"README.md", "CHANGELOG.md"}, docs...) {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(b)
		if doc == "CHANGELOG.md" {
			// Older entries name the files of their day.
			_, latest, _ := strings.Cut(text, "\n## ")
			text, _, _ = strings.Cut(latest, "\n## ")
		}
		for _, re := range []*regexp.Regexp{quoted, linked} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				name := strings.TrimPrefix(m[1], "./")
				if citedNotFiles[name] != "" {
					continue
				}
				assert.True(t, exists(doc, name), "%s cites %s, which does not exist", doc, m[1])
			}
		}
		for _, name := range testName.FindAllString(text, -1) {
			assert.True(t, tests[name], "%s names %s, which no test file defines", doc, name)
		}
	}
}

// TestReadmeShort: the README stays a page a newcomer reads through (250
// lines at most) and opens with the two commands that work on a fresh
// machine: the demo and the test suite.
func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	readme := string(b)
	assert.LessOrEqual(t, strings.Count(readme, "\n"), 250, "README.md is over 250 lines")
	_, opening, _ := strings.Cut(readme, "```sh\n")
	opening, _, _ = strings.Cut(opening, "```")
	assert.Contains(t, opening, "go -C cmd/redlock run . demo", "the README's first commands")
	assert.Contains(t, opening, "./test.sh", "the README's first commands")
}
