// Package pgfence makes PostgreSQL check redlock's fencing tokens: a write
// carrying a token is applied only if the token is at least the highest
// that resource has accepted, and the token is recorded in the same
// transaction as the write. One atomic step, never check-then-write.
//
// Two ways to keep the highest token:
//
//   - A small table, redlock_fence, one row per resource (Migration creates
//     it). Tx runs a function in a transaction that first records the
//     token there (Fence); the row stays locked until the transaction
//     ends, so fenced transactions on one resource run one at a time, in
//     token order, and a stale one is refused before it writes anything.
//   - A column on your own table (Column): the UPDATE itself carries the
//     condition, so each row is fenced on its own with no extra table.
//
// A fenced transaction:
//
//	err := pgfence.Tx(ctx, pool, "orders", lease.Fence(), func(tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE orders SET status = 'sent' WHERE id = $1", id)
//		return err
//	})
//	if errors.Is(err, fencing.ErrStaleToken) {
//		// This holder's lease has ended and a newer holder has written.
//	}
//
// A stale write gets a *fencing.StaleError (possibly wrapped) carrying the
// refused token and the highest accepted, which errors.Is(err,
// fencing.ErrStaleToken) finds. An equal token is accepted: the same holder
// may write several times with its token, as redisfence.Store and
// fencing.Fence allow.
//
// Tokens are stored as bigint: a token above 9223372036854775807 is refused
// with fencing.ErrInvalidToken (redlock's tokens are node times in
// microseconds, about 2^51 today), as is token 0.
//
// This package is its own Go module, so that a user of the lock alone does
// not download pgx.
package pgfence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/e6344662/go-redlock/fencing"
)

// Migration is the SQL that creates the redlock_fence table and the
// redlock_fence(resource, token) function, the same step for SQL and psql
// users (migrations/0001_redlock_fence.sql). It may be run more than once.
//
//go:embed migrations/0001_redlock_fence.sql
var Migration string

// Table is the name of the token table Migration creates and Fence uses,
// found on the connection's search_path.
const Table = "redlock_fence"

// StaleSQLState is the SQLSTATE the SQL function redlock_fence raises for a
// stale token.
const StaleSQLState = "RLF01"

// ErrNoRow is returned (wrapped) by Column.Update when no row has the key.
var ErrNoRow = errors.New("pgfence: no row with that key")

// Querier runs a statement returning rows: *pgx.Conn, *pgxpool.Pool and
// pgx.Tx are Queriers.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Execer runs a statement: *pgx.Conn, *pgxpool.Pool and pgx.Tx are
// Execers.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Beginner starts a transaction: *pgx.Conn, *pgxpool.Pool and pgx.Tx (a
// savepoint) are Beginners.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate runs Migration on db.
func Migrate(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, Migration); err != nil {
		return fmt.Errorf("pgfence: migrate: %w", err)
	}
	return nil
}

// checkToken refuses the tokens no lease carries or bigint cannot hold.
func checkToken(resource string, t fencing.Token) error {
	switch {
	case t == 0:
		return fmt.Errorf("%w: 0 for %q (redlock never issues token 0)", fencing.ErrInvalidToken, resource)
	case uint64(t) > math.MaxInt64:
		return fmt.Errorf("%w: %d for %q exceeds PostgreSQL's bigint", fencing.ErrInvalidToken, t, resource)
	}
	return nil
}

// upsert records a token unless a higher one is there; it returns no row
// when the token is stale, and then holds the row's lock all the same.
const upsert = `INSERT INTO redlock_fence AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = now()
	WHERE f.token <= excluded.token
RETURNING f.token`

// Fence records t as the highest token of resource in tx, the transaction
// that will write: it inserts or raises resource's row in the redlock_fence
// table, which succeeds only if t is at least the token stored (equal is
// accepted: one holder writing again). The row stays locked until tx ends:
// a concurrent fenced transaction on resource waits for tx, then finds t
// (and is refused if its token is lower), so the writes of tx, made after
// Fence returns, cannot be overtaken by a stale holder's. If tx rolls back,
// t is not recorded.
//
// A lower token is refused with a *fencing.StaleError carrying the highest
// token, and tx must then be rolled back (it has written nothing through
// Fence). Token 0, and a token above bigint's range, are refused with an
// error wrapping fencing.ErrInvalidToken before anything is sent. Under
// REPEATABLE READ or SERIALIZABLE isolation a concurrent fenced transaction
// makes Fence fail with a serialization error (SQLSTATE 40001): retry the
// transaction, as with any write under those levels.
func Fence(ctx context.Context, tx pgx.Tx, resource string, t fencing.Token) error {
	if err := checkToken(resource, t); err != nil {
		return err
	}
	var got int64
	err := tx.QueryRow(ctx, upsert, resource, int64(t)).Scan(&got)
	switch {
	case err == nil && got == int64(t):
		return nil
	case err == nil:
		return fmt.Errorf("pgfence: fence %q: recorded token %d, sent %d", resource, got, t)
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgfence: fence %q: %w", resource, err)
	}
	// Stale: the row is locked by the upsert above, so this is the token
	// that refused t.
	var highest int64
	if err := tx.QueryRow(ctx, `SELECT token FROM redlock_fence WHERE resource = $1 FOR UPDATE`, resource).Scan(&highest); err != nil {
		return fmt.Errorf("pgfence: fence %q: token %d refused, reading the highest: %w", resource, t, err)
	}
	if highest <= int64(t) {
		return fmt.Errorf("pgfence: fence %q: token %d refused, but the highest is %d", resource, t, highest)
	}
	return &fencing.StaleError{Key: resource, Token: t, Highest: fencing.Token(highest)}
}

// Tx runs fn in a transaction on db fenced for resource with token t:
// it begins the transaction, records t with Fence (refusing a stale token
// with a *fencing.StaleError before fn runs), runs fn, and commits. If fn
// returns an error, or panics, the transaction is rolled back, t is not
// recorded, and fn's error is returned as it is. The transaction holds
// resource's row in the redlock_fence table until it ends, so fenced
// transactions on one resource run one at a time, in token order: keep fn
// short.
//
// If the commit fails the error is returned wrapped; when the connection
// broke during the commit, whether it happened is unknown, as with any
// commit.
func Tx(ctx context.Context, db Beginner, resource string, t fencing.Token, fn func(pgx.Tx) error) error {
	if err := checkToken(resource, t); err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgfence: begin for %q: %w", resource, err)
	}
	committed := false
	defer func() {
		if !committed { // an error, or fn panicked
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := Fence(ctx, tx, resource, t); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	committed = true // Commit ends tx, whatever it returns
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: commit for %q: %w", resource, err)
	}
	return nil
}

// Highest returns the highest token recorded for resource, or 0 if none.
func Highest(ctx context.Context, db Querier, resource string) (fencing.Token, error) {
	var h int64
	err := db.QueryRow(ctx, `SELECT token FROM redlock_fence WHERE resource = $1`, resource).Scan(&h)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("pgfence: highest %q: %w", resource, err)
	}
	return fencing.Token(h), nil
}

// Column fences the rows of your own table with a token column, without
// the redlock_fence table: each row is a resource, and an UPDATE of it
// applies only if its token is at least the row's. Add the column with
//
//	ALTER TABLE orders ADD COLUMN fence_token bigint NOT NULL DEFAULT 0;
//
// (0 means no token yet: any token is accepted). Table may be
// schema-qualified ("shop.orders"); the names are quoted as identifiers.
type Column struct {
	Table string // the table, e.g. "orders" or "shop.orders"
	Key   string // the key column, e.g. "id"
	Token string // the token column, e.g. "fence_token"
}

// ident quotes a possibly qualified name.
func ident(name string) string { return pgx.Identifier(strings.Split(name, ".")).Sanitize() }

// Update runs one fenced UPDATE of the row whose Key column is key:
//
//	UPDATE Table SET Token = $1, <set> WHERE Key = $2 AND Token <= $1
//
// set is the rest of the SET list (empty for none); in it, $1 is the token,
// $2 the key, and args are $3, $4, and so on. The check and the write are
// one statement. A row whose token is higher is left alone and Update
// returns a *fencing.StaleError (Key is fmt.Sprint(key)); no row with key
// gives an error wrapping ErrNoRow; token 0 and tokens beyond bigint, an
// error wrapping fencing.ErrInvalidToken. An equal token is accepted. Run
// it in a transaction (db a pgx.Tx) to make other statements part of the
// same step; a NULL token column counts as 0.
func (c Column) Update(ctx context.Context, db Querier, key any, t fencing.Token, set string, args ...any) error {
	name := fmt.Sprint(key)
	if err := checkToken(name, t); err != nil {
		return err
	}
	if c.Table == "" || c.Key == "" || c.Token == "" {
		return errors.New("pgfence: Column needs Table, Key and Token")
	}
	tbl, kc, tc := ident(c.Table), ident(c.Key), ident(c.Token)
	sets := tc + " = $1"
	if strings.TrimSpace(set) != "" {
		sets += ", " + set
	}
	q := fmt.Sprintf("UPDATE %s SET %s WHERE %s = $2 AND COALESCE(%s, 0) <= $1 RETURNING %s", tbl, sets, kc, tc, tc)
	var got int64
	err := db.QueryRow(ctx, q, append([]any{int64(t), key}, args...)...).Scan(&got)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgfence: update %s %s: %w", c.Table, name, err)
	}
	var highest *int64
	err = db.QueryRow(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1", tc, tbl, kc), key).Scan(&highest)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s.%s = %s", ErrNoRow, c.Table, c.Key, name)
	case err != nil:
		return fmt.Errorf("pgfence: update %s %s: token %d refused, reading the row's token: %w", c.Table, name, t, err)
	case highest == nil || *highest <= int64(t):
		return fmt.Errorf("pgfence: update %s %s: token %d refused, but the row's token is %v", c.Table, name, t, highest)
	}
	return &fencing.StaleError{Key: name, Token: t, Highest: fencing.Token(*highest)}
}

// IsStaleSQL reports whether err is PostgreSQL's error for a stale token
// from the SQL function redlock_fence (SQLSTATE RLF01), for code that calls
// the function rather than Fence.
func IsStaleSQL(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == StaleSQLState
}
