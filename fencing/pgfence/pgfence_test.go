package pgfence_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/fencetest"
	"github.com/e6344662/go-redlock/fencing/pgfence"
	"github.com/e6344662/go-redlock/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}

// startDB starts a PostgreSQL server for the test, migrated twice (the
// migration is idempotent), and returns a pool on it.
func startDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pg := testutil.StartPostgres(t)
	ctx := testutil.Context(t)
	pool, err := pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgfence.Migrate(ctx, pool))
	require.NoError(t, pgfence.Migrate(ctx, pool), "the migration runs twice")
	_, err = pool.Exec(ctx, `CREATE TABLE kv (k text PRIMARY KEY, v text NOT NULL);
		CREATE TABLE items (k text PRIMARY KEY, v text, fence_token bigint NOT NULL DEFAULT 0)`)
	require.NoError(t, err)
	return pool
}

// txResource writes kv through pgfence.Tx.
type txResource struct{ pool *pgxpool.Pool }

func (r txResource) Write(ctx context.Context, key, value string, t fencing.Token) error {
	return pgfence.Tx(ctx, r.pool, key, t, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, key, value)
		return err
	})
}

func (r txResource) Read(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := r.pool.QueryRow(ctx, `SELECT v FROM kv WHERE k = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

// columnResource writes items through a token column on the row itself.
type columnResource struct{ pool *pgxpool.Pool }

var items = pgfence.Column{Table: "public.items", Key: "k", Token: "fence_token"}

func (r columnResource) Write(ctx context.Context, key, value string, t fencing.Token) error {
	// The application's rows exist before they are updated; here the
	// first write of a key makes its row, with no token yet.
	if _, err := r.pool.Exec(ctx, `INSERT INTO items (k) VALUES ($1) ON CONFLICT DO NOTHING`, key); err != nil {
		return err
	}
	return items.Update(ctx, r.pool, key, t, "v = $3", value)
}

func (r columnResource) Read(ctx context.Context, key string) (string, bool, error) {
	var v *string
	err := r.pool.QueryRow(ctx, `SELECT v FROM items WHERE k = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && v == nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return *v, true, nil
}

// sqlResource writes kv in a transaction that calls the SQL function
// redlock_fence first, as a psql user does.
type sqlResource struct{ txResource }

func (r sqlResource) Write(ctx context.Context, key, value string, t fencing.Token) error {
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT redlock_fence($1, $2)`, key, int64(t)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, key, value)
		return err
	})
	if pgfence.IsStaleSQL(err) {
		h, herr := pgfence.Highest(ctx, r.pool, key)
		return errors.Join(&fencing.StaleError{Key: key, Token: t, Highest: h}, herr)
	}
	return err
}

// TestPostgres runs everything on one server (initdb takes seconds).
func TestPostgres(t *testing.T) {
	pool := startDB(t)
	locker := fencetest.NewLocker(t)

	t.Run("ConformsTx", func(t *testing.T) { fencetest.Run(t, locker, txResource{pool}) })
	t.Run("ConformsColumn", func(t *testing.T) { fencetest.Run(t, locker, columnResource{pool}) })
	t.Run("ConformsSQLFunction", func(t *testing.T) { fencetest.Run(t, locker, sqlResource{txResource{pool}}) })
	t.Run("InvalidTokens", func(t *testing.T) { invalidTokens(t, pool) })
	t.Run("FnErrorRollsBack", func(t *testing.T) { fnErrorRollsBack(t, pool) })
	t.Run("StaleNeverRunsFn", func(t *testing.T) { staleNeverRunsFn(t, pool) })
	t.Run("LowerWaitsThenRefused", func(t *testing.T) { lowerWaitsThenRefused(t, pool) })
	t.Run("HigherWaitsThenWrites", func(t *testing.T) { higherWaitsThenWrites(t, pool) })
	t.Run("ColumnNoRow", func(t *testing.T) { columnNoRow(t, pool) })
	t.Run("MigrationReadable", func(t *testing.T) {
		require.True(t, strings.HasPrefix(pgfence.Migration, "-- redlock fencing tokens in PostgreSQL"))
		require.Contains(t, pgfence.Migration, "CREATE TABLE IF NOT EXISTS redlock_fence")
	})
}

func invalidTokens(t *testing.T, pool *pgxpool.Pool) {
	ctx := testutil.Context(t)
	for _, c := range []struct {
		name string
		tok  fencing.Token
		want string
	}{
		{"zero", 0, "0 for"},
		{"beyond bigint", math.MaxInt64 + 1, "exceeds PostgreSQL's bigint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			called := false
			err := pgfence.Tx(ctx, pool, "invalid", c.tok, func(pgx.Tx) error { called = true; return nil })
			require.ErrorIs(t, err, fencing.ErrInvalidToken)
			require.ErrorContains(t, err, c.want)
			require.False(t, called)
			err = items.Update(ctx, pool, "invalid", c.tok, "")
			require.ErrorIs(t, err, fencing.ErrInvalidToken)
		})
	}
	// The SQL function refuses them too.
	_, err := pool.Exec(ctx, `SELECT redlock_fence('invalid', 0)`)
	require.ErrorContains(t, err, "invalid token 0")
	h, err := pgfence.Highest(ctx, pool, "invalid")
	require.NoError(t, err)
	require.Zero(t, h, "nothing recorded")
	// The largest bigint is a valid token.
	require.NoError(t, pgfence.Tx(ctx, pool, "max", math.MaxInt64, func(pgx.Tx) error { return nil }))
	h, err = pgfence.Highest(ctx, pool, "max")
	require.NoError(t, err)
	require.Equal(t, fencing.Token(math.MaxInt64), h)
}

func fnErrorRollsBack(t *testing.T, pool *pgxpool.Pool) {
	ctx := testutil.Context(t)
	boom := errors.New("boom")
	err := pgfence.Tx(ctx, pool, "rollback", 5, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO kv (k, v) VALUES ('rollback', 'x')`)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	h, err := pgfence.Highest(ctx, pool, "rollback")
	require.NoError(t, err)
	require.Zero(t, h, "the token is not recorded when the transaction rolls back")
	_, found, err := txResource{pool}.Read(ctx, "rollback")
	require.NoError(t, err)
	require.False(t, found)

	// A panic in fn rolls back too, and goes on up.
	require.Panics(t, func() {
		_ = pgfence.Tx(ctx, pool, "rollback", 5, func(tx pgx.Tx) error { panic("fn panicked") })
	})
	h, err = pgfence.Highest(ctx, pool, "rollback")
	require.NoError(t, err)
	require.Zero(t, h)
}

func staleNeverRunsFn(t *testing.T, pool *pgxpool.Pool) {
	ctx := testutil.Context(t)
	require.NoError(t, pgfence.Tx(ctx, pool, "stale", 9, func(pgx.Tx) error { return nil }))
	called := false
	err := pgfence.Tx(ctx, pool, "stale", 8, func(pgx.Tx) error { called = true; return nil })
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	require.EqualError(t, err, `fencing: stale token 8 for "stale": highest accepted is 9`)
	require.False(t, called, "fn must not run for a stale token")
	require.NoError(t, pgfence.Tx(ctx, pool, "stale", 9, func(pgx.Tx) error { return nil }), "equal token accepted")
}

// blocked waits until a backend is blocked on a lock while running a
// statement containing marker (so no sleep decides the interleaving).
func blocked(ctx context.Context, t *testing.T, pool *pgxpool.Pool, marker string) {
	t.Helper()
	for {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()`, marker).Scan(&n))
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no backend blocked on %q: %v", marker, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// lowerWaitsThenRefused: the classic race that check-then-write loses. A
// newer holder's fenced transaction is open (fenced, not yet committed);
// an older holder's transaction waits for it on the row lock and, once it
// commits, is refused, and never writes.
func lowerWaitsThenRefused(t *testing.T, pool *pgxpool.Pool) {
	ctx := testutil.Context(t)
	newer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = newer.Rollback(ctx) }()
	require.NoError(t, pgfence.Fence(ctx, newer, "race-low", 20))

	done := make(chan error, 1)
	go func() {
		done <- pgfence.Tx(ctx, pool, "race-low", 10, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO kv (k, v) VALUES ('race-low', 'older')`)
			return err
		})
	}()
	blocked(ctx, t, pool, "INSERT INTO redlock_fence")
	_, err = newer.Exec(ctx, `INSERT INTO kv (k, v) VALUES ('race-low', 'newer')`)
	require.NoError(t, err)
	require.NoError(t, newer.Commit(ctx))

	err = <-done
	var st *fencing.StaleError
	require.ErrorAs(t, err, &st)
	require.Equal(t, fencing.StaleError{Key: "race-low", Token: 10, Highest: 20}, *st)
	v, _, err := txResource{pool}.Read(ctx, "race-low")
	require.NoError(t, err)
	require.Equal(t, "newer", v)
}

// higherWaitsThenWrites: an older holder's open transaction holds the row;
// a newer holder waits, then writes after it, so the final state is the
// newer one's.
func higherWaitsThenWrites(t *testing.T, pool *pgxpool.Pool) {
	ctx := testutil.Context(t)
	older, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = older.Rollback(ctx) }()
	require.NoError(t, pgfence.Fence(ctx, older, "race-high", 10))

	done := make(chan error, 1)
	go func() {
		done <- txResource{pool}.Write(ctx, "race-high", "newer", 20)
	}()
	blocked(ctx, t, pool, "INSERT INTO redlock_fence")
	_, err = older.Exec(ctx, `INSERT INTO kv (k, v) VALUES ('race-high', 'older')`)
	require.NoError(t, err)
	require.NoError(t, older.Commit(ctx))
	require.NoError(t, <-done)

	v, _, err := txResource{pool}.Read(ctx, "race-high")
	require.NoError(t, err)
	require.Equal(t, "newer", v)
	h, err := pgfence.Highest(ctx, pool, "race-high")
	require.NoError(t, err)
	require.Equal(t, fencing.Token(20), h)
}

func columnNoRow(t *testing.T, pool *pgxpool.Pool) {
	ctx := testutil.Context(t)
	err := items.Update(ctx, pool, "no such row", 3, "v = $3", "x")
	require.ErrorIs(t, err, pgfence.ErrNoRow)
	require.False(t, errors.Is(err, fencing.ErrStaleToken))
	require.Error(t, pgfence.Column{Table: "items"}.Update(ctx, pool, "k", 3, ""), "an incomplete Column is refused")
}
