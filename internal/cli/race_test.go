//go:build race

package cli

// raceEnabled reports whether the tests run with the race detector, so that
// the binary under test is built with it too.
const raceEnabled = true
