package redlock_test

import "strings"

// counterValue is the counter V of a fence key's value, which is "V U"
// while a lease it counted is live (U: the lease's end on the node's
// clock, scripts/counter.lua) and "V" otherwise.
func counterValue(v string) string {
	c, _, _ := strings.Cut(v, " ")
	return c
}
