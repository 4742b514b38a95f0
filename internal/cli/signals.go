package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// stopSignals are the signals that interrupt a waiting command, and that run
// forwards to COMMAND.
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// interruptError is the cause of a context ended by a signal.
type interruptError struct{ sig os.Signal }

// Error names the signal: "interrupted by SIGINT (Ctrl-C)".
func (e *interruptError) Error() string { return "interrupted by " + signalName(e.sig) }

// signalName is how messages name a signal: SIGINT, SIGTERM, SIGHUP (Go's
// own names, "interrupt" or "terminated", read badly after "interrupted
// by"); others by Go's name and number.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT (Ctrl-C)"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	if s, ok := sig.(syscall.Signal); ok {
		return fmt.Sprintf("signal %d (%s)", int(s), s)
	}
	return sig.String()
}

// interruptible returns a context that is cancelled, with an
// *interruptError cause, when the process receives one of stopSignals.
// stop undoes the signal handling and waits for its goroutine to end.
func interruptible(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, stopSignals...)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-ch:
			cancel(&interruptError{sig: s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// interrupted returns the exit error for ctx if it was ended by a signal,
// else nil.
func interrupted(ctx context.Context) *cliError {
	var ie *interruptError
	if !errors.As(context.Cause(ctx), &ie) {
		return nil
	}
	return &cliError{code: signalExitCode(ie.sig), kind: kindInterrupt, msg: ie.Error(),
		extra: map[string]any{"signal": ie.sig.String()}}
}

// signalExitCode is 128 plus the signal's number, as a shell reports it.
func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return exitSignalBase + int(s)
	}
	return exitSignalBase + 2
}
