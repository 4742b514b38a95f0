// Package readmetest holds the test that the README's Go program compiles as
// shown. Mark a ```go block of README.md as compiled by putting the line
//
//	<!-- compiled by internal/readmetest ... -->
//
// right before it; the block must then be a complete main package.
package readmetest
