package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/e6344662/go-redlock/internal/loadgen"
)

// progress shows a progress line on w every interval until done is
// closed: on a terminal (tty) rewritten in place and erased at the end,
// else one line each time. state tells how the run stands at an instant.
func (b *bench) progress(w io.Writer, done <-chan struct{}, tty bool, every time.Duration, state func(time.Time) loadgen.Progress) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	last, lastAt := int64(0), time.Now()
	shown := false
	for {
		select {
		case <-done:
			if tty && shown {
				fmt.Fprint(w, "\r\x1b[K")
			}
			return
		case now := <-tick.C:
			p := state(now)
			rate := float64(p.Total-last) / now.Sub(lastAt).Seconds()
			last, lastAt = p.Total, now
			line := b.progressLine(p, rate)
			if tty {
				fmt.Fprint(w, "\r"+line+"\x1b[K")
			} else {
				fmt.Fprintln(w, "redlock-cli: bench: "+line)
			}
			shown = true
		}
	}
}

// progressLine describes the run in state p; rate is the recent
// acquisition rate.
func (b *bench) progressLine(p loadgen.Progress, rate float64) string {
	if p.WarmupLeft > 0 {
		return fmt.Sprintf("warming up, %s left  %.0f acquisitions/s", fmtDuration(p.WarmupLeft.Round(100*time.Millisecond)), rate)
	}
	s := p.Acquire
	line := fmt.Sprintf("%s/%s  %d acquisitions  %.0f/s", fmtDuration(p.Measured.Round(100*time.Millisecond)),
		fmtDuration(b.o.duration), s.N, rate)
	if s.N > 0 {
		line += fmt.Sprintf("  p50 %s  p99 %s", fmtDuration(s.Quantile(0.5)), fmtDuration(s.Quantile(0.99)))
	}
	return line + "  " + plural(int(p.Errors), "error")
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
