package parse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxInput bounds what a parser reads from its reader: the largest section is 4 MiB.
const maxInput = 64 << 20

// readInput reads r to its end, at most maxInput bytes.
func readInput(r io.Reader) ([]byte, error) {
	if sr, ok := r.(sectionReader); ok && sr.Len() == len(sr.body) && len(sr.body) <= maxInput {
		return sr.body, nil // not read yet: its body is the input
	}
	if l, ok := r.(interface{ Len() int }); ok && l.Len() <= maxInput {
		// A section's body (a bytes.Reader): read at once, without growing a buffer.
		b := make([]byte, l.Len())
		n, err := io.ReadFull(r, b)
		if err != nil {
			return b[:n], fmt.Errorf("%w: read: %w", ErrParse, err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return b, fmt.Errorf("%w: read: %w", ErrParse, err)
	}
	if len(b) > maxInput {
		return b[:maxInput], fmt.Errorf("%w: input longer than %d bytes, rest ignored", ErrParse, maxInput)
	}
	return b, nil
}

// readText is readInput into one string: the section's bytes are copied once (readInput gives
// a section's body itself), and the strings its parser takes from it share that copy.
func readText(r io.Reader) (string, error) {
	b, err := readInput(r)
	return string(b), err
}

// splitLines splits text into lines without their "\n" or "\r\n"; a final empty line is
// dropped.
func splitLines(b []byte) []string { return splitText(string(b)) }

// splitText is splitLines of a string: the lines share its bytes.
func splitText(text string) []string {
	if len(text) == 0 {
		return nil
	}
	s := strings.Split(text, "\n")
	if s[len(s)-1] == "" {
		s = s[:len(s)-1]
	}
	for i := range s {
		s[i] = strings.TrimSuffix(s[i], "\r")
	}
	return s
}

// errList collects a parser's errors, keeping the first few: one bad line must not hide the
// rest of the input, and a thousand bad lines must not make a thousand-line error.
type errList struct {
	errs []error
	more int
}

const maxErrs = 5

func (e *errList) add(err error) {
	if err == nil {
		return
	}
	if len(e.errs) < maxErrs {
		e.errs = append(e.errs, err)
		return
	}
	e.more++
}

func (e *errList) addf(format string, args ...any) {
	e.add(fmt.Errorf("%w: "+format, append([]any{ErrParse}, args...)...))
}

func (e *errList) err() error {
	if e.more > 0 {
		return errors.Join(append(e.errs, fmt.Errorf("%w: %d more errors", ErrParse, e.more))...)
	}
	return errors.Join(e.errs...)
}

// q quotes remote text for an error message, shortened.
func q(s string) string {
	return strconv.Quote(clip(s, 120))
}

// atoiNonNeg parses a non-negative decimal int.
func atoiNonNeg(s string) (int, bool) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// parseInt64NonNeg parses a non-negative decimal int64.
func parseInt64NonNeg(s string) (int64, bool) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// addSat adds two non-negative sizes, saturating instead of overflowing.
func addSat(a, b int64) int64 {
	if a > 0 && b > 0 && a > (1<<63-1)-b {
		return 1<<63 - 1
	}
	return a + b
}

func ptr[T any](v T) *T { return &v }

// cutLastRecord drops what follows the last sep: the part of a cut section that the bound
// split mid-record.
func cutLastRecord(b []byte, sep byte) []byte {
	i := bytes.LastIndexByte(b, sep)
	if i < 0 {
		return nil
	}
	return b[:i+1]
}
