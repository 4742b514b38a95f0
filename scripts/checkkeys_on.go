//go:build redlock_checkkeys

package scripts

// keyCheck is prepended to every script this package assembles
// (newScript): under the build tag redlock_checkkeys, the KEYS check
// (checkkeys.lua). `make test` runs the packages that run scripts once
// with it.
var keyCheck = checkKeysLua
