package persist

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// The messages a cloud session has to send again are kept per session until Resent, and read
// back after a reopen (a restart).
func TestSendLogResends(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	due := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	b := openTestBadger(t, dir, FsyncBatch)
	l := NewSendLog(b)
	for _, r := range []struct{ sid, id string }{{"s1", "m1"}, {"s1", "m2"}, {"s10", "m3"}} {
		if err := l.ResendLater(ctx, r.sid, r.id, domain.CloudResend{Due: due, Failed: "wamid." + r.id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Resent(ctx, "s1", "m2"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	l = NewSendLog(openTestBadger(t, dir, FsyncBatch))
	got := map[string]domain.CloudResend{}
	if err := l.Resends("s1", func(id string, r domain.CloudResend) error { got[id] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got["m1"].Due.Equal(due) || got["m1"].Failed != "wamid.m1" {
		t.Fatalf("s1's resends: %v", got)
	}
}
