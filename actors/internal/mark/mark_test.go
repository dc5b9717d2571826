package mark

import "testing"

func TestBlock(t *testing.T) {
	for _, c := range []struct{ limit, div, most, want int64 }{
		{0, 100, 100, 100}, // no limit: the largest block
		{300, 100, 100, 3}, // a 300-a-day key: 1 %
		{50, 100, 100, 1},  // never under 1
		{1_000_000, 100, 100, 100},
		{500, 500, 1000, 1}, // a 500-message month: 0.2 %
		{100_000, 500, 1000, 200},
	} {
		if got := Block(c.limit, c.div, c.most); got != c.want {
			t.Errorf("Block(%d, %d, %d) = %d, want %d", c.limit, c.div, c.most, got, c.want)
		}
	}
}
