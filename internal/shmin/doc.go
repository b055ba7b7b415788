// Package shmin makes a POSIX sh script smaller to send, without changing what it does: it
// drops comments and the indentation of lines that start outside any quoted string, and keeps
// every line (an emptied comment line stays an empty line), so that line numbers, which a
// shell prints in its error messages, stay the same.
//
// It owns that one transformation, and the test that the probe minified prints the same
// capture as the probe as written. It does not know what a script is for, does not run one
// (but in that test) and does not decide which script is sent: the probe's package calls it
// once on its embedded script.
package shmin
