package text

import "testing"

func TestWords(t *testing.T) {
	if got := Words("  the quick\tbrown fox\n"); got != 4 {
		t.Errorf("Words = %d, want 4", got)
	}
}
