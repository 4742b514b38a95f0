package pgfence_test

import (
	"context"
	"errors"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/pgfence"
	"github.com/e6344662/go-redlock/redlock"
)

// A holder of the "orders" lock marks an order sent, in a transaction
// fenced with its lease's token.
func ExampleTx() {
	ctx := context.Background()
	var pool *pgxpool.Pool   // pgxpool.New(ctx, url), once pgfence.Migrate has run
	var lease *redlock.Lease // locker.Acquire(ctx, "orders")

	err := pgfence.Tx(ctx, pool, "orders", lease.Fence(), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE orders SET status = 'sent' WHERE id = $1`, 42)
		return err
	})
	var stale *fencing.StaleError
	if errors.As(err, &stale) {
		// The lease ended while this process was paused, and a newer
		// holder has written: nothing was written here.
		log.Printf("fenced off: token %d, highest %d", stale.Token, stale.Highest)
	}
}

// Each row of the user's own orders table is fenced by its fence_token
// column (ALTER TABLE orders ADD COLUMN fence_token bigint NOT NULL
// DEFAULT 0).
func ExampleColumn_Update() {
	ctx := context.Background()
	var pool *pgxpool.Pool
	var lease *redlock.Lease // locker.Acquire(ctx, "order:42")

	orders := pgfence.Column{Table: "orders", Key: "id", Token: "fence_token"}
	err := orders.Update(ctx, pool, 42, lease.Fence(), "status = $3", "sent")
	if errors.Is(err, fencing.ErrStaleToken) {
		log.Print("a newer holder has updated order 42")
	}
}
