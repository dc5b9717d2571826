package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// locateOnly is a Cluster that answers Locate alone (the rest is never called here).
type locateOnly struct {
	Cluster
	table, id string
}

func (c *locateOnly) Locate(table, id string) (int, bool, error) {
	c.table, c.id = table, id
	return 7, true, nil
}

// TestKeyPartitionHashAllocatesOnce: a routed API key's partition is looked up by its hex
// SHA-256 in one allocation (the id's string), not two (hex.EncodeToString's buffer and its
// string): it runs on every request of a cluster's key-routed routes.
func TestKeyPartitionHashAllocatesOnce(t *testing.T) {
	c := &locateOnly{}
	s := &Server{cfg: Config{Cluster: c}}
	raw := []byte("gw_live_0123456789abcdef0123456789abcdef")
	p, err := s.keyPartition(raw)
	sum := sha256.Sum256(raw)
	if err != nil || p != 7 || c.table != "apikey_hash" || c.id != hex.EncodeToString(sum[:]) {
		t.Fatalf("keyPartition = %d, %v; looked up %q %q", p, err, c.table, c.id)
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = s.keyPartition(raw) }); n > 1 {
		t.Fatalf("keyPartition allocates %.1f times a call, want at most 1", n)
	}
}
