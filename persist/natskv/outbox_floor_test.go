package natskv_test

import (
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// On a NATS server: a message queued by an outbox whose clock is an hour ahead of the server's
// is found by the next owner's boot (its clock an hour behind) through the accepts' floor,
// which is on the server's clock: ReadWritten answers the time the server stored a record, and
// the floor Checkpoint writes is at most that time (the checkpoint record's, read before) and
// at least the margin before it.
func TestOutboxFloorOnTheServersClock(t *testing.T) {
	kv := openPaged(t, "floor")
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	o := persist.NewOutbox(kv)
	o.SetClock(ahead)
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	// The engine's first Checkpoint: the outbox reads a time the server stored a record (the
	// checkpoint the boot wrote), which bounds the messages indexed from then on; a message
	// indexed before any such read (a fresh store's first seconds) has no bound, and no floor
	// is written while it is pending without a mark.
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	old := acceptNew(t, o, "u1", ahead().UTC().Truncate(time.Millisecond))
	sent(&old, ahead())
	settle(t, o, old)
	m := acceptNew(t, o, "u1", ahead().UTC().Truncate(time.Millisecond))
	before := time.Now()
	for range 2 {
		if err := o.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now()
	_, written, err := kv.ReadWritten([]byte("outbox_checkpoint/pending"))
	if err != nil {
		t.Fatal(err)
	}
	if written.Before(before.Add(-time.Second)) || written.After(after.Add(time.Second)) {
		t.Errorf("the checkpoint written at %v by the server, between %v and %v by this machine", written, before, after)
	}
	v, err := kv.Get([]byte("outbox_checkpoint/floor"))
	if err != nil || len(v) != 9 {
		t.Fatalf("floor %x, %v", v, err)
	}
	floor := time.UnixMilli(int64(be64(v[1:])))
	if floor.After(written) || floor.Before(written.Add(-persist.RecountSkew-time.Minute)) {
		t.Errorf("floor %v for a checkpoint written at %v", floor, written)
	}
	if _, _, err := kv.ReadWritten([]byte("outbox_checkpoint/none")); err != domain.ErrRecordNotFound {
		t.Errorf("ReadWritten of an absent key: %v", err)
	}
	next := persist.NewOutbox(kv)
	next.SetClock(func() time.Time { return time.Now().Add(-time.Hour) })
	p, err := next.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].ID != m.ID {
		t.Errorf("boot found %d pending %v, want %s", len(p), p, m.ID)
	}
}

func be64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
