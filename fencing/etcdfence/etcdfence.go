// Package etcdfence makes etcd check redlock's fencing tokens, for users
// who keep configuration or leadership state in etcd: a write carrying a
// token is applied only if the token is at least the highest that
// resource has accepted, and the token is recorded in the same etcd
// transaction as the write, whose compare rejects a lower token. One
// atomic step, never check-then-write.
//
// The highest token of a resource lives in a key of its own beside the
// data, the fence key: Prefix + resource (by default
// "redlock-fence/" + resource), holding the token as 20 decimal digits
// with leading zeros, so that etcd's byte-wise compare of values orders
// tokens as numbers. A fenced write is one Txn:
//
//	If(Value(fence key) > token)        // a newer holder has written
//	Then(Get(fence key))                // refused: read the highest
//	Else(Put(fence key, token), ops...) // accepted: record it, and write
//
// (a missing fence key compares false, so the first write is accepted).
// A stale write gets a *fencing.StaleError (possibly wrapped) carrying the
// refused token and the highest accepted, which errors.Is(err,
// fencing.ErrStaleToken) finds. An equal token is accepted: the same
// holder may write several times with its token, as redisfence.Store and
// fencing.Fence allow. Only this package should write fence keys: a fence
// key holding anything else makes fenced writes fail, and deleting one
// lets a stale holder back in.
//
// This package is its own Go module, so that a user of the lock alone does
// not download the etcd client.
package etcdfence

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/e6344662/go-redlock/fencing"
)

// DefaultPrefix is the prefix of fence keys when New is given none.
const DefaultPrefix = "redlock-fence/"

// tokenDigits is the width of a stored token: every uint64 fits.
const tokenDigits = 20

// Fencer runs fenced writes on an etcd cluster. It is safe for concurrent
// use.
type Fencer struct {
	kv     clientv3.KV
	prefix string
}

// New returns a Fencer writing through kv (a *clientv3.Client, or a
// namespaced KV) whose fence keys begin with prefix; an empty prefix means
// DefaultPrefix. Keep fence keys apart from your data (a prefix your data
// does not use), so that a range read of your data does not meet them. It
// panics if kv is nil.
func New(kv clientv3.KV, prefix string) *Fencer {
	if kv == nil {
		panic("etcdfence: New with a nil KV")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Fencer{kv: kv, prefix: prefix}
}

// FenceKey returns the key holding resource's highest token.
func (f *Fencer) FenceKey(resource string) string { return f.prefix + resource }

// encode writes t as tokenDigits digits, so byte order is numeric order.
func encode(t fencing.Token) string { return fmt.Sprintf("%0*d", tokenDigits, uint64(t)) }

// decode reads a stored token.
func decode(v []byte) (fencing.Token, error) {
	if len(v) != tokenDigits {
		return 0, fmt.Errorf("fence key holds %q, not a %d-digit token", v, tokenDigits)
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fence key holds %q, not a token: %w", v, err)
	}
	return fencing.Token(n), nil
}

// Do runs ops in one etcd transaction fenced for resource with token t:
// the transaction records t in resource's fence key and applies ops only
// if no higher token is recorded there, atomically on the server. It
// returns the transaction's response (its Responses start with the fence
// key's Put, then one per op). A lower token is refused with a
// *fencing.StaleError carrying the highest token, and nothing is written;
// token 0 with an error wrapping fencing.ErrInvalidToken before anything is
// sent. Ops must not write the fence key itself. An etcd error is returned
// wrapped; after a timeout whether the write happened is unknown, as with
// any etcd write (a retry with the same token is safe: it is accepted
// again, or refused as stale if a newer holder has written since).
func (f *Fencer) Do(ctx context.Context, resource string, t fencing.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if t == 0 {
		return nil, fmt.Errorf("%w: 0 for %q (redlock never issues token 0)", fencing.ErrInvalidToken, resource)
	}
	fk := f.FenceKey(resource)
	tok := encode(t)
	resp, err := f.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(fk), ">", tok)).
		Then(clientv3.OpGet(fk)).
		Else(append([]clientv3.Op{clientv3.OpPut(fk, tok)}, ops...)...).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdfence: write %q: %w", resource, err)
	}
	if !resp.Succeeded {
		return resp, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return nil, fmt.Errorf("etcdfence: write %q: token %d refused, but the fence key %q is gone", resource, t, fk)
	}
	highest, err := decode(kvs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("etcdfence: write %q: %w", resource, err)
	}
	if highest <= t {
		return nil, fmt.Errorf("etcdfence: write %q: token %d refused, but the highest is %d", resource, t, highest)
	}
	return nil, &fencing.StaleError{Key: resource, Token: t, Highest: highest}
}

// Put sets key to value, fenced for resource with token t (see Do). Many
// keys may share one resource (a lock guarding a whole configuration
// tree); pass key as resource to fence each key on its own.
func (f *Fencer) Put(ctx context.Context, resource string, t fencing.Token, key, value string, opts ...clientv3.OpOption) error {
	_, err := f.Do(ctx, resource, t, clientv3.OpPut(key, value, opts...))
	return err
}

// Highest returns the highest token recorded for resource, or 0 if none.
func (f *Fencer) Highest(ctx context.Context, resource string) (fencing.Token, error) {
	resp, err := f.kv.Get(ctx, f.FenceKey(resource))
	if err != nil {
		return 0, fmt.Errorf("etcdfence: highest %q: %w", resource, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	h, err := decode(resp.Kvs[0].Value)
	if err != nil {
		return 0, fmt.Errorf("etcdfence: highest %q: %w", resource, err)
	}
	return h, nil
}
