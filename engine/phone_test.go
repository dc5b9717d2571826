package engine

import (
	"errors"
	"testing"

	"github.com/gateway/gateway/domain"
)

func TestNormalizePhone(t *testing.T) {
	for raw, want := range map[string]string{
		"+1 555-010-0001":    "15550100001",
		"(44) 7700.900001":   "447700900001",
		"0044 7700 900001":   "447700900001", // the international prefix, read as +
		"001 555 010 0430":   "15550100430",
		"0 555 010 0430":     "", // a national number: its country is unknown
		"+0 555 010 0430":    "",
		"+00 44 7700 900001": "", // + and 00 both: not a number anyone dials
		"1555":               "",
		"1555010000100001":   "",
		"1555 0100 01x":      "",
	} {
		got, err := NormalizePhone(raw)
		if got != want || (want == "") != errors.Is(err, domain.ErrInvalidPhone) {
			t.Errorf("NormalizePhone(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}
