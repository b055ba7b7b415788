package report

import (
	"bytes"
	"encoding/json"
	"io"
)

// JSONLine writes v as one line of JSON Lines (gputriage watch --format json): compact, a
// trailing newline, "<>&" left as they are, and every rune a terminal would act on or hide
// escaped as the report's JSON escapes it (escapeUnsafe). Invalid UTF-8 in a string becomes
// U+FFFD, as in the report's JSON.
func JSONLine(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeUnsafe(b.Bytes()))
	return err
}
