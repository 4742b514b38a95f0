//go:build !redlock_checkkeys

package scripts

// keyCheck is prepended to every script this package assembles
// (newScript): nothing without the build tag redlock_checkkeys
// (checkkeys_on.go).
var keyCheck = ""
