package redlock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// The documents' code blocks (example_test.go's readme* functions) run
// here on real nodes, not only compile: each test checks what its block
// promises its reader.

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
func (db *ordersDB) Driver() driver.Driver                        { return nil }

func (db *ordersDB) get(id int64) order {
	db.mu.Lock()
	defer db.mu.Unlock()
	return *db.orders[id]
}

type ordersConn struct{ db *ordersDB }

func (ordersConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("ordersDB: no prepare")
}
func (ordersConn) Close() error              { return nil }
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
