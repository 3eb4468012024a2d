package redlock_test

import (
	"context"
	"database/sql"
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

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The examples run against three real local servers, started on first use
// and stopped by TestMain. Everything else an example needs is written out
// in it, as a user would copy it.
var examples struct {
	once    sync.Once
	servers []*redistest.Server
	err     error
}

// exampleAddrs returns the addresses of the example servers, starting them
// on first use.
func exampleAddrs() []string {
	examples.once.Do(func() { examples.servers, examples.err = redistest.Start(3) })
	if examples.err != nil {
		panic(examples.err)
	}
	addrs := make([]string, len(examples.servers))
	for i, s := range examples.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

func stopExampleServers() {
	for _, s := range examples.servers {
		_ = s.Close()
	}
}

func Example() {
	// One client per independent Redis master, with context deadlines
	// bounding socket reads.
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() { // "10.0.0.1:6379", ...
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := locks.Acquire(ctx, "orders:42", 10*time.Second)
	if err != nil {
		fmt.Println("not locked:", err) // busy until ctx ended, or a bad argument
		return
	}
	defer lock.Release(ctx)

	// Work only while time.Now() is before lock.Until().
	fmt.Println("locked", lock.Key(), "on a quorum of", locks.Quorum())
	// Output: locked orders:42 on a quorum of 2
}

func ExampleClient_TryAcquire() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	first, err := locks.TryAcquire(ctx, "report:daily", time.Minute)
	if err != nil {
		panic(err)
	}
	_, err = locks.TryAcquire(ctx, "report:daily", time.Minute)
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired))
	fmt.Println(first.Release(ctx))
	// Output:
	// true
	// <nil>
}

func ExampleLock_Extend() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "job:reindex", 2*time.Second)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)
	before := lock.Until()
	// Long work: push the expiry back before Until passes.
	if err := lock.Extend(ctx, 30*time.Second); err != nil {
		fmt.Println("lost the lock; stop before", before)
		return
	}
	fmt.Println("extended by more than 25s:", lock.Until().Sub(before) > 25*time.Second)
	// Output: extended by more than 25s: true
}

func ExampleClient_Do() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes, redlock.WithFencing())
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()
	store := &ledgerStore{} // refuses a fence lower than the highest it has seen

	// The work takes longer than the TTL: Do renews the lock meanwhile, and
	// releases it when the work returns. The write carries the fence, so a
	// holder that stalled past its lock cannot overwrite a newer one.
	err = locks.Do(ctx, "orders:submit", 200*time.Millisecond, func(ctx context.Context, lock *redlock.Lock) error {
		select {
		case <-time.After(500 * time.Millisecond): // the work
		case <-ctx.Done(): // the lock is lost: stop
			return context.Cause(ctx)
		}
		return store.write(lock.Fence(), "order 42 submitted")
	})
	fmt.Println(err, errors.Is(err, redlock.ErrLockLost))
	fmt.Println(store.value, "with fence", store.highest > 0)
	// Output:
	// <nil> false
	// order 42 submitted with fence true
}

func ExampleLock_KeepAlive() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "job:sync", time.Second)
	if err != nil {
		panic(err)
	}
	work := lock.KeepAlive(ctx) // work under this context: it ends when the lock does
	_ = lock.Release(ctx)
	<-work.Done()
	fmt.Println(context.Cause(work))
	// Output: redlock: lock released
}

func ExampleClient_Inspect() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "inventory:9", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)

	// Look without taking: who holds the key on each node, for how long.
	st, err := locks.Inspect(ctx, "inventory:9")
	if err != nil {
		panic(err)
	}
	fmt.Println("held by a quorum:", st.Held)
	ours := 0
	for i, n := range st.Nodes {
		switch {
		case n.Err != nil:
			fmt.Printf("node %d: %v\n", i, n.Err)
		case n.Held && strings.HasPrefix(lock.Token(), n.Holder) && n.TTL > 20*time.Second:
			ours++
		}
	}
	// Acquire returned at a quorum: the last node's write may land just after.
	fmt.Println("ours on a quorum, with more than 20s left:", ours >= locks.Quorum())
	// Output:
	// held by a quorum: true
	// ours on a quorum, with more than 20s left: true
}

func ExampleLock_TTL() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()

	lock, err := locks.Acquire(ctx, "inventory:10", 30*time.Second)
	if err != nil {
		panic(err)
	}
	left, err := lock.TTL(ctx) // what a quorum of nodes still holds
	fmt.Println(left > 20*time.Second, err)
	_ = lock.Release(ctx)
	_, err = lock.TTL(ctx)
	fmt.Println(errors.Is(err, redlock.ErrNotHeld))
	// Output:
	// true <nil>
	// true
}

// ledgerStore is storage that refuses writes from a holder older than the
// newest it has seen: the check that makes a paused, expired holder harmless.
// It accepts a fence equal to the highest, the holder's own next write. In a
// real store the comparison and the write are one atomic step (a
// conditional UPDATE, a compare-and-set).
type ledgerStore struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

var errStaleWrite = errors.New("stale fence")

func (s *ledgerStore) write(fence uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.highest {
		return errStaleWrite
	}
	s.highest, s.value = fence, value
	return nil
}

func ExampleLock_Fence() {
	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes, redlock.WithFencing())
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	ctx := context.Background()
	store := &ledgerStore{}

	// A takes the lock, then stalls (a GC pause) past its validity.
	a, err := locks.Acquire(ctx, "ledger:7", 100*time.Millisecond)
	if err != nil {
		panic(err)
	}
	time.Sleep(150 * time.Millisecond)

	// B takes over and writes.
	b, err := locks.Acquire(ctx, "ledger:7", 10*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("B:", store.write(b.Fence(), "from B"))

	// A wakes up and writes with its old fence: refused.
	fmt.Println("A:", store.write(a.Fence(), "from A"))
	fmt.Println("value:", store.value)
	_ = b.Release(ctx)
	// Output:
	// B: <nil>
	// A: stale fence
	// value: from B
}

// The Go code blocks of README.md and docs/*.md are the bodies of functions
// of the test files (TestDocSnippets checks it): each block follows a line
// <!-- example: name --> naming its function. A block that begins with an
// import declaration leaves it out of the body; the function's file imports
// those paths. Every one runs: the quickstart in TestReadmeQuickstart, the
// others in snippets_test.go, and otel's readmeOtel in its module.

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
	defer locks.Close(context.Background()) // waits for background work: rollbacks, late deletes

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
	defer locks.Close(context.Background())

	return locks.Do(ctx, "orders:submit", 10*time.Second, func(ctx context.Context, lock *redlock.Lock) error {
		// ctx ends when the lock is lost (context.Cause matches ErrLockLost): stop then.
		_, err := db.ExecContext(ctx, "UPDATE orders SET state = 'submitted', fence = $1 WHERE id = $2 AND fence <= $1",
			lock.Fence(), id) // 0 rows: a newer holder has written
		return err
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
