package shmin

import "bytes"

// Minify returns script with comment lines emptied and leading blanks dropped from every line
// that starts outside a quoted string, a line continuation or a command substitution inside
// quotes. A script it cannot follow for certain (a here-document, or quotes that do not close)
// is returned unchanged.
func Minify(script []byte) []byte {
	var l lexer
	out := make([]byte, 0, len(script))
	for line := range bytes.Lines(script) {
		if l.strippable() {
			line = bytes.TrimLeft(line, " \t")
			if len(line) > 0 && line[0] == '#' {
				line = dropComment(line)
			}
		}
		if !l.scan(line) {
			return script
		}
		out = append(out, line...)
	}
	if len(l.stack) != 0 || l.cont {
		return script
	}
	return out
}

// dropComment is a comment line with its text dropped and its line end kept.
func dropComment(line []byte) []byte {
	if line[len(line)-1] == '\n' {
		return line[len(line)-1:]
	}
	return nil
}

// The lexer's frames: what a character is inside of.
const (
	frameSingle = iota // '...'
	frameDouble        // "..."
	frameSubst         // $( ... ) or $(( ... )): shell code again
	frameBrace         // ${ ... }
	frameBack          // `...`
)

type frame struct {
	kind   int
	parens int // ( ) nesting inside a frameSubst
	cases  int // case ... esac nesting inside a frameSubst, whose patterns end with )
}

// lexer follows quoting across lines, as far as Minify needs: whether a line starts in code.
type lexer struct {
	stack []frame
	cont  bool // the last line ended with a backslash: the next one continues it
}

// strippable: the next line starts in shell code where leading blanks and comments mean
// nothing, at the top level or inside a command substitution outside quotes.
func (l *lexer) strippable() bool {
	if l.cont {
		return false
	}
	for _, f := range l.stack {
		if f.kind != frameSubst {
			return false
		}
	}
	return true
}

func (l *lexer) top() *frame {
	if len(l.stack) == 0 {
		return nil
	}
	return &l.stack[len(l.stack)-1]
}

// code: the lexer is where shell code is read (not inside a quoted string).
func (l *lexer) code() bool {
	f := l.top()
	return f == nil || f.kind == frameSubst || f.kind == frameBack
}

// scan follows one line; false when it meets what Minify does not follow (a here-document).
func (l *lexer) scan(line []byte) bool {
	l.cont = false
	for i := 0; i < len(line); i++ {
		c := line[i]
		f := l.top()
		if f != nil && f.kind == frameSingle {
			if c == '\'' {
				l.pop()
			}
			continue
		}
		if c == '\\' {
			if i+1 < len(line) && line[i+1] == '\n' {
				l.cont = l.code()
			}
			i++
			continue
		}
		if f != nil && f.kind == frameDouble {
			i = l.inDouble(line, i)
			continue
		}
		if f != nil && f.kind == frameBrace && c == '}' {
			l.pop()
			continue
		}
		next, ok := l.inCode(line, i)
		if !ok {
			return false
		}
		i = next
	}
	return true
}

// inDouble reads line[i] inside double quotes and returns the index of the last byte read.
func (l *lexer) inDouble(line []byte, i int) int {
	switch {
	case line[i] == '"':
		l.pop()
	case line[i] == '`':
		l.push(frameBack)
	case line[i] == '$' && i+1 < len(line) && line[i+1] == '(':
		l.push(frameSubst)
		return i + 1
	case line[i] == '$' && i+1 < len(line) && line[i+1] == '{':
		l.push(frameBrace)
		return i + 1
	}
	return i
}

// inCode reads line[i] in code (or inside ${ }) and returns the index of the last byte read;
// false for a here-document.
func (l *lexer) inCode(line []byte, i int) (int, bool) {
	f := l.top()
	switch c := line[i]; {
	case c == '\'':
		l.push(frameSingle)
	case c == '"':
		l.push(frameDouble)
	case c == '`':
		if f != nil && f.kind == frameBack {
			l.pop()
		} else {
			l.push(frameBack)
		}
	case c == '$' && i+1 < len(line) && line[i+1] == '(':
		l.push(frameSubst)
		return i + 1, true
	case c == '$' && i+1 < len(line) && line[i+1] == '{':
		l.push(frameBrace)
		return i + 1, true
	case c == '<' && i+1 < len(line) && line[i+1] == '<':
		return i, false
	case c == '#' && wordStart(line, i) && f.isCode():
		return len(line) - 1, true // a comment: the rest of the line
	case f != nil && f.kind == frameSubst:
		return l.inSubst(line, i), true
	}
	return i, true
}

// inSubst follows the parentheses and case patterns that end a command substitution.
func (l *lexer) inSubst(line []byte, i int) int {
	f := l.top()
	switch {
	case line[i] == '(':
		f.parens++
	case line[i] == ')' && f.parens > 0:
		f.parens--
	case line[i] == ')' && f.cases == 0:
		l.pop()
	case wordAt(line, i, "case"):
		f.cases++
		return i + 3
	case wordAt(line, i, "esac"):
		f.cases--
		return i + 3
	}
	return i
}

func (f *frame) isCode() bool { return f == nil || f.kind == frameSubst || f.kind == frameBack }

func (l *lexer) push(kind int) { l.stack = append(l.stack, frame{kind: kind}) }

func (l *lexer) pop() {
	if len(l.stack) > 0 {
		l.stack = l.stack[:len(l.stack)-1]
	}
}

// wordStart: line[i] begins a word (a # there starts a comment).
func wordStart(line []byte, i int) bool {
	return i == 0 || bytes.IndexByte([]byte(" \t;&|()"), line[i-1]) >= 0
}

// wordAt: the word w stands alone at line[i].
func wordAt(line []byte, i int, w string) bool {
	if !wordStart(line, i) || !bytes.HasPrefix(line[i:], []byte(w)) {
		return false
	}
	end := i + len(w)
	return end == len(line) || bytes.IndexByte([]byte(" \t\n;&|()"), line[end]) >= 0
}
