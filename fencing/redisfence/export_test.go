package redisfence

// Internal helpers exported to the external test package.
var (
	ParseWriteReply = parseWriteReply
	TokenFromReply  = tokenFromReply
)
