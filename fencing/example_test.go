package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/e6344662/go-redlock/fencing"
)

func ExampleFence() {
	var f fencing.Fence // ready to use

	fmt.Println(f.Check("orders", 7)) // the current holder writes
	fmt.Println(f.Check("orders", 7)) // ... and writes again
	fmt.Println(f.Check("orders", 8)) // a new holder takes over

	// The old holder wakes up from a long pause and tries to write.
	err := f.Check("orders", 7)
	fmt.Println(err)
	fmt.Println(errors.Is(err, fencing.ErrStaleToken))

	var stale *fencing.StaleError
	if errors.As(err, &stale) {
		fmt.Println(stale.Highest)
	}
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// fencing: stale token 7 for "orders": highest accepted is 8
	// true
	// 8
}

func ExampleFence_Do() {
	var f fencing.Fence
	balance := 0
	deposit := func(t fencing.Token, amount int) error {
		// The check and the update happen as one step for "account".
		return f.Do(context.Background(), "account", t, func() error {
			balance += amount
			return nil
		})
	}
	fmt.Println(deposit(3, 10), deposit(4, 5), deposit(3, 100))
	fmt.Println(balance)
	// Output:
	// <nil> <nil> fencing: stale token 3 for "account": highest accepted is 4
	// 15
}

func ExampleMiddleware() {
	var f fencing.Fence
	update := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "updated", r.URL.Path)
	})
	h := fencing.Middleware(&f, func(r *http.Request) string { return r.URL.Path }, update)

	send := func(token string) {
		r := httptest.NewRequest(http.MethodPut, "/orders/42", nil)
		if token != "" {
			r.Header.Set(fencing.Header, token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	send("8")   // the current holder
	send("7")   // a holder whose lease has ended
	send("")    // no token at all
	send("7.5") // not a token
	// Output:
	// 200 updated /orders/42
	// 409 fencing: stale token 7 for "/orders/42": highest accepted is 8
	// 400 fencing: missing token: no Fencing-Token header
	// 400 fencing: invalid token in Fencing-Token header "7.5": not a decimal number (digits only, no sign or spaces)
}

func ExampleSetHeader() {
	req, _ := http.NewRequest(http.MethodPut, "http://resource.example/orders/42", nil)
	fencing.SetHeader(req.Header, 8) // the token of the lease you hold
	fmt.Println(req.Header.Get(fencing.Header))
	// Output: 8
}
