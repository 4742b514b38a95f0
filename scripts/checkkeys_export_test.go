package scripts

// CheckKeysLua is the KEYS check's prelude, for checkkeys_test.go (an
// external test: testutil imports this package through redlock).
var CheckKeysLua = checkKeysLua

// KeyCheckBuilt reports whether this package's scripts carry the KEYS
// check (the build tag redlock_checkkeys).
func KeyCheckBuilt() bool { return keyCheck != "" }
