// Package model holds the SPIN models of redlock's protocol (redlock.pml,
// semaphore.pml, rwlock.pml, progress.pml; adversary.pml and deadline.pml
// for the Safety v4 rules against an operator; docs/model.md explains
// them) and the test that keeps them and the Lua scripts of scripts/
// together: every script names, on a "-- model:" line near its top, the
// model steps it implements, and every step of the model ("step: <name>"
// in a comment) is named by a script. make model runs SPIN on the models
// and their mutants (run.sh). The differential test of model/refnode ties
// the scripts' behaviour, not only their names, to the model's steps.
package model
