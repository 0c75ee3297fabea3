package testaudio

import "testing"

func TestWER(t *testing.T) {
	tests := []struct {
		name, ref, hyp string
		want           float64
	}{
		{"identical", "go forward ten meters", "Go forward, ten meters.", 0},
		{"one substitution", "go forward ten meters", "go forward two meters", 0.25},
		{"deletion and insertion", "a b c d", "a c d e", 0.5},
		{"abbreviation", "and mister john", "and Mr. John", 0},
		{"empty hypothesis", "a b", "", 1},
		{"empty both", "", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := WER(tc.ref, tc.hyp); got != tc.want {
				t.Errorf("WER(%q, %q) = %v; want %v", tc.ref, tc.hyp, got, tc.want)
			}
		})
	}
}
