// Package suggest says which known name a mistyped word was meant to be, for "did you mean"
// messages: near enough is at most 1 edit from a name of up to 5 letters and at most 2 from a
// longer one, an edit being a letter inserted, deleted, changed, or two neighbours swapped
// (optimal string alignment); the word must have 3 letters or more and start with the name's
// first letter, as typos mostly do. Pure: it reads nothing.
package suggest

import "slices"

// Nearest is the first of names nearest word and near enough; "" when word is one of names,
// shorter than 3 letters, or near none.
func Nearest(word string, names []string) string {
	if len(word) < 3 || slices.Contains(names, word) {
		return ""
	}
	best, bestD := "", 3
	for _, n := range names {
		limit := 2
		if len(n) <= 5 {
			limit = 1
		}
		if n[0] != word[0] {
			continue
		}
		if d := editDistance(word, n); d <= limit && d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment (Damerau-Levenshtein) distance between a and
// b: letters inserted, deleted or changed, and neighbours swapped, each one edit.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
