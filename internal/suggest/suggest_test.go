package suggest

import "testing"

// TestNearest: swaps are one edit; names of up to 5 letters allow one, longer
// two; the first letter is kept.
func TestNearest(t *testing.T) {
	names := []string{"fix", "help", "watch", "explain", "collect", "tp"}
	for word, want := range map[string]string{
		"fxi": "fix", "fox": "fix", "hepl": "help", "explian": "explain", "exlpian": "explain",
		"colelct": "collect", "tpp": "tp",
		"watc": "watch", "wacth": "watch", "batch": "", "path": "", "wtach": "watch", "xplain": "",
		"fi": "", "fxx1": "", "gpu1": "", "hlpe": "", "fix": "", "exp": "", "expln": "explain", "node01": "",
	} {
		if got := Nearest(word, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", word, got, want)
		}
	}
	if d := editDistance("ca", "abc"); d != 3 {
		t.Errorf("editDistance(ca, abc) = %d, want 3 (optimal string alignment)", d)
	}
}
