package persist

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gateway/gateway/domain"
)

// A page whose id length is a uvarint near 2^64 is refused as damaged (the bounds check's n+4
// wrapped, and the slice expression panicked: a boot, a read by id and a recount with it).
func TestEachPagedDamagedLength(t *testing.T) {
	page := binary.AppendUvarint([]byte{pageVersion}, ^uint64(0)-2)
	page = append(page, 0, 0, 0, 1, 2)
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("eachPaged panicked on a damaged page: %v", r)
		}
	}()
	if err := eachPaged(page, func(_, _ []byte) error { return nil }); !errors.Is(err, domain.ErrRecordInvalid) {
		t.Errorf("a damaged page: %v, want ErrRecordInvalid", err)
	}
}
