package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/pgfence"
)

// Sink is where dispatches land: the courier call and its record. In
// leader mode every dispatch is fenced by the term's token, and the check,
// the courier call and the record are one step.
type Sink interface {
	// Name says what the sink is, for the program's output.
	Name() string
	// NewRun starts a new run's share of the sink: a fresh resource, with
	// no effects and no token yet.
	NewRun(ctx context.Context) (Run, error)
}

// Run is one mode's run on a Sink.
type Run interface {
	// Effect dispatches order id (the courier call takes send), and records
	// it. With fenced it does so only if t is not stale, as one step with
	// the check; id "" then only records t (a new leader's first write).
	Effect(ctx context.Context, id string, t fencing.Token, fenced bool, send time.Duration) error
	// Highest returns the highest token accepted so far.
	Highest(ctx context.Context) fencing.Token
	// Effects returns, per order, how many times it was dispatched, as the
	// sink recorded it.
	Effects(ctx context.Context) (map[string]int, error)
}

// MemorySink keeps the dispatches in this process and fences them with
// fencing.Fence.Do.
type MemorySink struct{}

// Name implements Sink.
func (MemorySink) Name() string { return "in memory (fencing.Fence)" }

// NewRun implements Sink.
func (MemorySink) NewRun(context.Context) (Run, error) {
	return &memoryRun{effects: make(map[string]int)}, nil
}

type memoryRun struct {
	fence   fencing.Fence
	mu      sync.Mutex
	effects map[string]int
}

func (r *memoryRun) Effect(ctx context.Context, id string, t fencing.Token, fenced bool, send time.Duration) error {
	do := func() error {
		if id == "" {
			return nil
		}
		time.Sleep(send) // the courier call
		r.mu.Lock()
		defer r.mu.Unlock()
		r.effects[id]++
		return nil
	}
	if !fenced {
		return do()
	}
	return r.fence.Do(ctx, "orders", t, do)
}

func (r *memoryRun) Highest(context.Context) fencing.Token { return r.fence.Highest("orders") }

func (r *memoryRun) Effects(context.Context) (map[string]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int, len(r.effects))
	for k, v := range r.effects {
		m[k] = v
	}
	return m, nil
}

// PostgresSink records every dispatch as a row of the table
// redlock_dispatch_effects, and fences leader mode's dispatches with
// pgfence.Tx: the token check, the courier call and the row are one
// transaction, holding the run's row of redlock_fence.
type PostgresSink struct {
	pool *pgxpool.Pool
	name string
}

// effectsTable is created by OpenPostgres; each run's rows carry its id.
const effectsTable = `CREATE TABLE IF NOT EXISTS redlock_dispatch_effects (
	run      text        NOT NULL,
	order_id text        NOT NULL,
	term     bigint,     -- the fencing token, in leader mode
	at       timestamptz NOT NULL DEFAULT now()
)`

// ErrNoPostgres marks a PostgreSQL that could not be reached or set up.
var ErrNoPostgres = errors.New("no PostgreSQL reachable")

// OpenPostgres connects to PostgreSQL the way psql finds it: url when it
// is not empty (a postgres:// URL or key=value string), else the libpq
// environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD,
// ...) and their defaults. It gives the connection timeout seconds, then
// creates the tables it needs (pgfence.Migration and
// redlock_dispatch_effects). Errors wrap ErrNoPostgres.
func OpenPostgres(ctx context.Context, url string, timeout time.Duration) (*PostgresSink, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoPostgres, err)
	}
	cfg.ConnConfig.ConnectTimeout = timeout
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoPostgres, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w at %s: %v", ErrNoPostgres, where(cfg), err)
	}
	if err := pgfence.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoPostgres, err)
	}
	if _, err := pool.Exec(ctx, effectsTable); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: create redlock_dispatch_effects: %v", ErrNoPostgres, err)
	}
	return &PostgresSink{pool: pool, name: "PostgreSQL at " + where(cfg) + " (pgfence.Tx; rows in redlock_dispatch_effects)"}, nil
}

// where names the server and database of cfg.
func where(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s:%d/%s as %s", c.Host, c.Port, c.Database, c.User)
}

// Name implements Sink.
func (s *PostgresSink) Name() string { return s.name }

// Close closes the connections.
func (s *PostgresSink) Close() { s.pool.Close() }

// NewRun implements Sink: the run's rows and fence resource carry a new
// random id, so runs never see each other's.
func (s *PostgresSink) NewRun(context.Context) (Run, error) {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b[:])
	return &postgresRun{pool: s.pool, id: id, resource: "dispatch/" + id}, nil
}

type postgresRun struct {
	pool     *pgxpool.Pool
	id       string
	resource string
}

const insertEffect = `INSERT INTO redlock_dispatch_effects (run, order_id, term) VALUES ($1, $2, $3)`

func (r *postgresRun) Effect(ctx context.Context, id string, t fencing.Token, fenced bool, send time.Duration) error {
	if !fenced {
		time.Sleep(send)
		_, err := r.pool.Exec(ctx, insertEffect, r.id, id, nil)
		return err
	}
	return pgfence.Tx(ctx, r.pool, r.resource, t, func(tx pgx.Tx) error {
		if id == "" {
			return nil
		}
		time.Sleep(send) // the courier call, inside the fenced step
		_, err := tx.Exec(ctx, insertEffect, r.id, id, int64(t))
		return err
	})
}

func (r *postgresRun) Highest(ctx context.Context) fencing.Token {
	h, err := pgfence.Highest(ctx, r.pool, r.resource)
	if err != nil {
		return 0
	}
	return h
}

func (r *postgresRun) Effects(ctx context.Context) (map[string]int, error) {
	rows, err := r.pool.Query(ctx, `SELECT order_id, count(*) FROM redlock_dispatch_effects WHERE run = $1 GROUP BY order_id`, r.id)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int)
	var id string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		m[id] = n
		return nil
	})
	return m, err
}

// ChooseSink picks the sink as the program's flags say: "memory", or
// "postgres" (an error if unreachable), or "auto": PostgreSQL if it can be
// reached (url, else the libpq environment), else the in-memory sink, saying
// why on say. The returned function closes the sink.
func ChooseSink(ctx context.Context, kind, url string, say func(string)) (Sink, func(), error) {
	switch kind {
	case "memory":
		return MemorySink{}, func() {}, nil
	case "postgres", "auto":
	default:
		return nil, nil, fmt.Errorf("unknown sink %q (want auto, postgres or memory)", kind)
	}
	pg, err := OpenPostgres(ctx, url, 3*time.Second)
	if err == nil {
		return pg, pg.Close, nil
	}
	if kind == "postgres" {
		return nil, nil, err
	}
	say(fmt.Sprintf("%v; using the in-memory sink (set PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD or --database-url to use PostgreSQL)", err))
	return MemorySink{}, func() {}, nil
}

// stderrSay writes a note to standard error.
func stderrSay(s string) { fmt.Fprintln(os.Stderr, "dispatch:", s) }
