// Package model holds the SPIN model of redlock's protocol (redlock.pml,
// semaphore.pml; docs/model.md explains it) and the test that keeps it
// and the Lua scripts of scripts/ together: every script names, on a
// "-- model:" line near its top, the model steps it implements, and every
// step of the model ("step: <name>" in a comment) is named by a script.
// make model runs SPIN on the model and its mutants (run.sh).
package model
