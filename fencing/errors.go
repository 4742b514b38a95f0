package fencing

import (
	"errors"
	"fmt"
)

// ErrInvalidToken is returned (wrapped) for a token no lease can carry: zero,
// which redlock never issues, or text that is not the canonical decimal form
// of a token.
var ErrInvalidToken = errors.New("fencing: invalid token")

// StaleError is the error for every stale rejection in this package: Token
// was offered for Key after Highest, a greater token, had been accepted
// there. It matches ErrStaleToken under errors.Is. Functions return it as a
// *StaleError, possibly wrapped; use errors.As to read the fields.
type StaleError struct {
	Key     string // the resource key the token was offered for
	Token   Token  // the rejected token
	Highest Token  // the highest token accepted for Key; always > Token
}

// Error reads like `fencing: stale token 5 for "k": highest accepted is 7`.
func (e *StaleError) Error() string {
	return fmt.Sprintf("fencing: stale token %d for %q: highest accepted is %d", e.Token, e.Key, e.Highest)
}

// Is reports whether target is ErrStaleToken, so that errors.Is(err,
// ErrStaleToken) holds for every *StaleError.
func (e *StaleError) Is(target error) bool { return target == ErrStaleToken }

// zeroTokenError is the error for token 0 offered for key.
func zeroTokenError(key string) error {
	return fmt.Errorf("%w: 0 for %q (redlock never issues token 0)", ErrInvalidToken, key)
}
