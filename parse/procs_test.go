package parse

import (
	"reflect"
	"testing"
)

// TestArgvPaths: a checked model path counts only when it is a whole argument, or a whole
// "--flag=PATH" argument's value: the probe also splits arguments at newlines.
func TestArgvPaths(t *testing.T) {
	gone := PathCheck{Path: "/gone"}
	tests := []struct {
		name string
		argv []string
		want []PathCheck
	}{
		{"flag and value", []string{"vllm", "--model", "/gone"}, []PathCheck{gone}},
		{"flag=value", []string{"vllm", "--model=/gone"}, []PathCheck{gone}},
		{"inside an argument", []string{"vllm", "--chat-template", "x\n--model\n/gone"}, nil},
		{"flag=value inside an argument", []string{"vllm", "--prompt", "x\n--model=/gone"}, nil},
		{"no argv", nil, nil},
	}
	for _, tt := range tests {
		if got := argvPaths([]PathCheck{gone}, tt.argv); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
