package redlock_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
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

// readmeUse is the code of the README's "## Use" section, as its body:
// readmeUse is compiled, never run: its addresses are placeholders.
var _ = readmeUse

// readmeLeaseDo and readmeLeaseKeepAlive are the code blocks of the README's
// "## Lease" section, in order, as their bodies: compiled, never run.
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

var _, _ = readmeLeaseDo, readmeLeaseKeepAlive

// TestReadmeLease checks that the Go code blocks of the README's "## Lease"
// section are the bodies of readmeLeaseDo and readmeLeaseKeepAlive.
func TestReadmeLease(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(readme, []byte("\n## Lease\n"))
	if !ok {
		t.Fatal(`README.md has no "## Lease" section`)
	}
	section, _, _ = bytes.Cut(section, []byte("\n## "))
	var blocks []string
	for {
		var code []byte
		_, code, ok = bytes.Cut(section, []byte("```go\n"))
		if !ok {
			break
		}
		code, section, ok = bytes.Cut(code, []byte("```\n"))
		if !ok {
			t.Fatal(`an unclosed Go code block in the "## Lease" section`)
		}
		blocks = append(blocks, strings.TrimSpace(string(code)))
	}
	funcs := []string{"readmeLeaseDo", "readmeLeaseKeepAlive"}
	if len(blocks) != len(funcs) {
		t.Fatalf(`the "## Lease" section has %d Go code blocks, example_test.go has %d functions for them`, len(blocks), len(funcs))
	}
	for i, name := range funcs {
		if want := funcBody(t, name); blocks[i] != want {
			t.Errorf("README's \"## Lease\" code block %d differs from %s's body; make them the same.\nREADME:\n%s\n\n%s:\n%s", i+1, name, blocks[i], name, want)
		}
	}
}

// funcBody returns the body of the function name of example_test.go, one
// indentation less, without its braces.
func funcBody(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == name {
			inner := src[fset.Position(d.Body.Lbrace).Offset+1 : fset.Position(d.Body.Rbrace).Offset]
			var lines []string
			for line := range strings.Lines(string(inner)) {
				lines = append(lines, strings.TrimPrefix(line, "\t"))
			}
			return strings.TrimSpace(strings.Join(lines, ""))
		}
	}
	t.Fatalf("example_test.go has no %s", name)
	return ""
}

// TestReadmeUse checks that the two are the same, so the README's code is
// code that compiles.
func readmeUse(ctx context.Context, db *sql.DB, id, total int64) error {
	nodes := []redis.UniversalClient{ // one go-redis client per independent master
		redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379", ContextTimeoutEnabled: true}),
		redis.NewClient(&redis.Options{Addr: "10.0.0.2:6379", ContextTimeoutEnabled: true}),
		redis.NewClient(&redis.Options{Addr: "10.0.0.3:6379", ContextTimeoutEnabled: true}),
	}
	locks, err := redlock.New(nodes,
		redlock.WithFencing(),
		// A node that restarted, failed over or lost its data votes again only
		// after 10s, the longest TTL used here: the spec's delayed restart.
		redlock.WithRestartGuard(10*time.Second),
	)
	if err != nil {
		return err
	}
	defer locks.Close(ctx) // waits for background work: rollbacks, late deletes

	lock, err := locks.Acquire(ctx, "orders:42", 10*time.Second)
	if err != nil {
		return err // ErrNotAcquired if it stayed busy, and ctx.Err() too if ctx ended
	}
	defer lock.Release(ctx) // releases even with a cancelled ctx

	// Work only until lock.Until(); extend for longer work.
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		return err // ErrNotHeld: the lock is lost, stop
	}
	// Pass the fence to storage, which must refuse one lower than the highest
	// it has seen (0 rows affected: a newer holder has written).
	_, err = db.ExecContext(ctx, "UPDATE ledger SET total = $1, fence = $2 WHERE id = $3 AND fence <= $2",
		total, lock.Fence(), id)
	return err
}

// readmeUse is compiled, never run: its addresses are placeholders.
var _ = readmeUse

// TestReadmeUse checks that the Go code of the README's "## Use" section is
// readmeUse's body, apart from its import declaration, whose paths this file
// must import.
func TestReadmeUse(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, use, ok := bytes.Cut(readme, []byte("\n## Use\n"))
	if !ok {
		t.Fatal(`README.md has no "## Use" section`)
	}
	_, code, ok := bytes.Cut(use, []byte("```go\n"))
	code, _, ok2 := bytes.Cut(code, []byte("```\n"))
	if !ok || !ok2 {
		t.Fatal(`the "## Use" section of README.md has no Go code block`)
	}

	// The code is an import declaration and statements: parse the first,
	// compare the others.
	fset := token.NewFileSet()
	file := append([]byte("package p\n"), code...)
	snippet, err := parser.ParseFile(fset, "README.md", file, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("README's import declaration: %v", err)
	}
	end := fset.Position(snippet.Name.End()).Offset
	for _, d := range snippet.Decls {
		end = fset.Position(d.End()).Offset
	}
	body := strings.TrimSpace(string(file[end:]))

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, "example_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	imported := make(map[string]bool)
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		imported[path] = true
	}
	for _, imp := range snippet.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); !imported[path] {
			t.Errorf("README imports %s, readmeUse's file does not", path)
		}
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == "readmeUse" {
			fn = d
		}
	}
	if fn == nil {
		t.Fatal("example_test.go has no readmeUse")
	}
	inner := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
	var lines []string
	for line := range strings.Lines(string(inner)) {
		lines = append(lines, strings.TrimPrefix(line, "\t"))
	}
	if want := strings.TrimSpace(strings.Join(lines, "")); body != want {
		t.Errorf("README's \"## Use\" code differs from readmeUse's body; make them the same.\nREADME:\n%s\n\nreadmeUse:\n%s", body, want)
	}
}
