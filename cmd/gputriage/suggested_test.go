package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Every command gputriage suggests runs as printed: each `gputriage ...` line of a triage fix
// list (every fixture, every format) or of an explanation's next steps (every corpus log and
// every input of the explain tests, every format) passes the real flag parser and the checks
// run makes before it starts; and every suggested line, gputriage's or not, is well-formed
// shell (sh -n).
func TestSuggestedCommandsRunAsPrinted(t *testing.T) {
	lines := map[string]string{} // line -> where it was suggested
	add := func(from string, ls []string) {
		for _, l := range ls {
			if _, ok := lines[l]; !ok {
				lines[l] = from
			}
		}
	}
	root := repoRoot(t)
	// Text and markdown must print each line as the JSON lists it: not wrapped or cut, other
	// than at a space with a backslash, where the shell reads one line (spacing aside). A
	// triage report says a command's trailing comment as prose before it, so a line may also
	// be its JSON line less that comment.
	words := func(l string) string { return strings.Join(strings.Fields(l), " ") }
	same := func(from string, json, printed []string) {
		set := map[string]bool{}
		for _, l := range json {
			set[words(l)] = true
			if i := strings.Index(l, " #"); i > 0 {
				set[words(l[:i])] = true
			}
		}
		if len(json) > 0 && len(printed) == 0 {
			t.Errorf("%s prints none of the %d lines suggested in JSON", from, len(json))
		}
		for _, l := range printed {
			if !set[words(l)] {
				t.Errorf("%s prints %q, which is not one of the lines suggested in JSON", from, l)
			}
		}
	}
	captures, _ := filepath.Glob(filepath.Join(root, "fixtures", "*.capture"))
	v1, _ := filepath.Glob(filepath.Join(root, "fixtures", "v1", "*.capture"))
	if captures = append(captures, v1...); len(captures) < len(fixtureNames) {
		t.Fatalf("only %d fixtures found", len(captures))
	}
	for _, capture := range captures {
		name := strings.TrimPrefix(capture, root+"/")
		fix := jsonStrings(t, cliOut(t, "--replay", capture, "--format", "json"), "fix")
		add(name+" json", fix)
		same(name+" markdown", fix, shBlocks(cliOut(t, "--replay", capture, "--format", "markdown")))
		same(name+" text", fix, todoCommands(cliOut(t, "--replay", capture)))
	}
	inputs := explainInputs(t)
	if len(inputs) < 40 {
		t.Fatalf("only %d explain inputs found", len(inputs))
	}
	explained := 0
	for from, in := range inputs {
		out, _, code := cli(t, nil, "explain", "--format", "json", in)
		if code != exitOK {
			continue // not recognized: nothing suggested
		}
		explained++
		next := jsonStrings(t, out, "next")
		add(from+" json", next)
		out, _, _ = cli(t, nil, "explain", "--format", "markdown", in)
		same(from+" markdown", next, shBlocks(out))
		out, _, _ = cli(t, nil, "explain", in)
		same(from+" text", next, indentedAfter(out, "next:"))
	}
	if explained < 30 {
		t.Fatalf("only %d explain inputs explained", explained)
	}

	gputriage := 0
	for _, l := range sortedKeys(lines) {
		if out, err := exec.Command("sh", "-n", "-c", l).CombinedOutput(); err != nil {
			t.Errorf("%s suggests a line that is not shell: %q: %v %s", lines[l], l, err, out)
			continue
		}
		for _, words := range simpleCommands(l) {
			if len(words) == 0 || words[0] != "gputriage" {
				continue
			}
			gputriage++
			if err := checkCommandLine(words[1:]); err != nil {
				t.Errorf("%s suggests %q: %v", lines[l], l, err)
			}
		}
	}
	if gputriage < 5 {
		t.Errorf("only %d gputriage commands found among %d suggested lines", gputriage, len(lines))
	}
}

// checkCommandLine parses args as run does and makes the checks run makes before it starts,
// without starting anything: a usage error comes back as an error.
func checkCommandLine(args []string) error {
	cmd := ""
	if c, ok := commandFor(args); ok {
		switch c.name {
		case "explain":
			var o explainFlags
			fs, err := parseFlags("explain", &o, args[1:])
			if err != nil || o.help || o.version {
				return err
			}
			return o.checkExplain(fs)
		case "collect":
			cmd, args = "collect", args[1:]
		default:
			return fmt.Errorf("no parse-only check for gputriage %s", c.name)
		}
	}
	o, fs, err := parseTriage(cmd, args)
	if err != nil || o.help || o.version {
		return err
	}
	if _, _, err := o.check(fs, cmd == "collect"); err != nil {
		return err
	}
	_, err = o.hosts.targets(fs.Args(), strings.NewReader(""))
	return err
}

func TestCheckCommandLine(t *testing.T) {
	for _, ok := range [][]string{{"HOST"}, {"HOST", "--tp", "8", "--engine", "sglang"}, {"explain", "--host", "gpu07", "x"},
		{"--replay", "x.capture"}, {"collect", "--save", "d", "gpu[01-02]"}} {
		if err := checkCommandLine(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"HOST", "--tp", "N"}, {}, {"--nope", "HOST"}, {"explain", "--file", "f", "x"}, {"HOST", "--format", "xml"}} {
		if err := checkCommandLine(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func cliOut(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, nil, args...)
	if code == exitUsage || code == exitInternal {
		t.Fatalf("%q: exit %d: %s", args, code, errOut)
	}
	return out
}

// jsonStrings collects the strings of every array under key, anywhere in a JSON document.
func jsonStrings(t *testing.T, doc, key string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("json: %v", err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if arr, ok := x.([]any); ok && k == key {
					for _, s := range arr {
						if s, ok := s.(string); ok {
							out = append(out, s)
						}
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// shBlocks returns the lines of every ```sh block of a markdown document.
func shBlocks(md string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.HasPrefix(l, "```") && strings.TrimLeft(l, "`") == "sh":
			in = true
		case in && strings.HasPrefix(l, "```"):
			in = false
		case in:
			out = append(out, l)
		}
	}
	return out
}

// todoCommands returns the commands of a text report's "what to do" sections: their lines
// indented as commands are, up to the blank line that ends a section.
func todoCommands(text string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == "  what to do":
			in = true
		case strings.TrimSpace(l) == "":
			in = false
		case in && strings.HasPrefix(l, "       ") && l[7] != ' ':
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// indentedAfter returns, for every line that is label, the lines after it indented deeper,
// with a line continued by a backslash joined to the next, as the shell reads it.
func indentedAfter(text, label string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != label {
			continue
		}
		depth := len(l) - len(strings.TrimLeft(l, " "))
		for _, n := range lines[i+1:] {
			if len(n)-len(strings.TrimLeft(n, " ")) <= depth || strings.TrimSpace(n) == "" {
				break
			}
			n = strings.TrimSpace(n)
			if k := len(out) - 1; k >= 0 && strings.HasSuffix(out[k], "\\") {
				out[k] = strings.TrimSuffix(out[k], "\\") + n
				continue
			}
			out = append(out, n)
		}
	}
	return out
}

// simpleCommands splits a shell line as sh would into its simple commands (at ; | & and
// newlines), each a list of words: quotes removed, comments dropped. It knows single and
// double quotes and backslashes, which is all gputriage suggests.
func simpleCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			inWord = true
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				w.WriteByte(line[i])
			}
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			inWord = true
		case c == '#' && !inWord:
			end()
			return append(cmds, words)
		case c == ' ' || c == '\t':
			end()
		case c == ';' || c == '|' || c == '&' || c == '\n':
			end()
			cmds = append(cmds, words)
			words = nil
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	end()
	return append(cmds, words)
}

func TestSimpleCommands(t *testing.T) {
	got := fmt.Sprint(simpleCommands(`gputriage 'gpu[01-16]' --tp 8 "a \"b\"" c\ d; kill -0 1 2>/dev/null && x # note`))
	want := `[[gputriage gpu[01-16] --tp 8 a "b" c d] [kill -0 1 2>/dev/null] [] [x]]`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// explainInputs are the texts the explain tests use: every corpus log, every string given as
// an input ("in") or fuzz seed in the explain package's tests, and the README's example.
func explainInputs(t *testing.T) map[string]string {
	t.Helper()
	root := repoRoot(t)
	inputs := map[string]string{
		"README example": "torch.OutOfMemoryError: ... Process 20629 has 54.00 GiB ...",
	}
	if entries, err := os.ReadDir(filepath.Join(root, "..", "shared", "corpus")); err == nil {
		for _, de := range entries {
			b, err := os.ReadFile(filepath.Join(root, "..", "shared", "corpus", de.Name()))
			if err != nil {
				t.Fatal(err)
			}
			inputs["corpus "+de.Name()] = string(b)
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range []string{"explain_test.go", "fuzz_test.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(root, "explain", name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// The test files refer to the package's own names; those errors do not stop constant
	// string expressions from being evaluated.
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.Default(), Error: func(error) {}}
	conf.Check("explain", fset, files, info) //nolint:errcheck // see above
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			var e ast.Expr
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "in" {
					e = n.Value
				}
			case *ast.CallExpr:
				if s, ok := n.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Add" && len(n.Args) == 1 {
					e = n.Args[0]
				}
			case *ast.CompositeLit:
				if a, ok := n.Type.(*ast.ArrayType); ok && fmt.Sprint(a.Elt) == "string" {
					for _, el := range n.Elts {
						addConst(inputs, fset, info, el)
					}
				}
			}
			if e != nil {
				addConst(inputs, fset, info, e)
			}
			return true
		})
	}
	return inputs
}

func addConst(inputs map[string]string, fset *token.FileSet, info *types.Info, e ast.Expr) {
	if tv, ok := info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
		inputs["explain test "+fset.Position(e.Pos()).String()] = constant.StringVal(tv.Value)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
