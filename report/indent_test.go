package report

import (
	"bytes"
	"encoding/json"
	"testing"
)

// indentJSON writes what json.Indent writes for encoding/json's compact output: values with
// strings holding JSON punctuation, escapes and quotes, empty and nested objects and arrays.
func TestIndentJSONAsJSONIndent(t *testing.T) {
	values := []any{
		nil, 1.5, "x", []int{}, map[string]any{},
		map[string]any{"a": []any{}, "b": map[string]any{}, "c": []any{1, "{[,:]}", map[string]any{"d": nil}}},
		[]string{`"quoted" \ back\slash`, "\\", `\"`, "{\"k\":[1,2]}", "tab\tnl\n", "ünï—\u202e"},
		map[string]any{"deep": []any{[]any{[]any{map[string]any{"e": []any{}}}}}, "n": -0.001, "t": true},
	}
	for _, prefix := range []string{"", "    "} {
		for _, v := range values {
			var compact bytes.Buffer
			enc := json.NewEncoder(&compact)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Indent(&want, compact.Bytes(), prefix, "  "); err != nil {
				t.Fatal(err)
			}
			if got := indentJSON([]byte("dst:"), compact.Bytes(), prefix); string(got) != "dst:"+want.String() {
				t.Errorf("prefix %q, %s:\ngot  %q\nwant %q", prefix, compact.Bytes(), got, "dst:"+want.String())
			}
		}
	}
}
