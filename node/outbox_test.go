package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/outlog"
)

// --outbox log: a send is accepted into the log (its id says where), delivered, read back by
// id with its outcome, and read again by the next node on the same data directory.
func TestOutboxOnTheLog(t *testing.T) {
	c := testConfig(t)
	c.Outbox = "log"
	n := start(t, c)
	admin := n.token(t, "root", "admin")
	alice := n.signIn(t, "alice")
	n.link(t, httpScan{t, n}, alice, "447700900001")
	key, _ := n.newKey(t, admin, "alice", "shop")
	r := n.must(t, 200, "POST", "/api/v1/messages/send", key, map[string]any{"phone": "15550100001", "message": "on the log", "type": "text"})
	id := r.str("message_id")
	if len(id) != 24 || !strings.HasPrefix(id, "3EB0") {
		t.Fatalf("message id %q", id)
	}
	eventually(t, 10*time.Second, "the delivery", func() bool {
		return strings.Contains(string(n.must(t, 200, "GET", "/api/dev/sim/messages?to=15550100001", "", nil).raw), `"on the log"`)
	})
	eventually(t, 10*time.Second, "the outcome read back", func() bool {
		st := n.must(t, 200, "GET", "/api/v1/messages/"+id, key, nil).str("status")
		return st == "sent" || st == "delivered" || st == "read"
	})
	n.must(t, 404, "GET", "/api/v1/messages/3EB0"+strings.Repeat("0", 19)+"1", key, nil)
	segs, err := filepath.Glob(filepath.Join(c.Data, "outbox", "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("log segments %v, %v", segs, err)
	}
	if st, err := os.Stat(segs[0]); err != nil || st.Size() <= 16 {
		t.Fatalf("segment: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n.Shutdown(ctx)
	n = start(t, c)
	st := n.must(t, 200, "GET", "/api/v1/messages/"+id, key, nil).str("status")
	if st != "sent" && st != "delivered" && st != "read" {
		t.Fatalf("after a restart: status %q", st)
	}
	c.Store, c.NATSURL = "nats", "nats://127.0.0.1:1"
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "--outbox log") {
		t.Fatalf("--outbox log with --store nats: %v", err)
	}
}

// A node does not start on one outbox while the other holds pending messages (they would wait
// unsent): the error names the flag and the way out; with both empty, or the pending ones in
// the outbox chosen, it starts.
func TestOutboxSwitchRefusedWhilePending(t *testing.T) {
	pending := func(id string) domain.OutboxEntry {
		e := domain.OutboxEntry{ID: id, SessionID: "s1", UserID: "u1", CreatedAt: domain.MillisOf(time.Now()),
			Message: domain.Message{ID: id, To: "491511234567", Kind: domain.KindText, Text: "hi"}}
		e.SetStatus(domain.MsgQueued, time.Now())
		return e
	}
	c := testConfig(t)
	for _, ob := range []string{"badger", "log"} {
		c.Outbox = ob
		if err := otherOutboxEmpty(c, persist.NewOutbox(persist.NewMemory()), persist.NewMemory()); err != nil {
			t.Fatalf("--outbox %s, nothing pending anywhere: %v", ob, err)
		}
	}
	// Pending on the records' store: --outbox log refused, badger starts.
	kv := persist.NewMemory()
	e := pending("3EB0AAAAAAAAAAAAAAAAAAAA")
	if err := persist.NewOutbox(kv).Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	c.Outbox = "log"
	if err := otherOutboxEmpty(c, persist.NewOutbox(kv), kv); err == nil || !strings.Contains(err.Error(), "--outbox log") ||
		!strings.Contains(err.Error(), "1 pending") || !strings.Contains(err.Error(), "--outbox badger") {
		t.Fatalf("--outbox log with a message pending on the records' store: %v", err)
	}
	c.Outbox = "badger"
	if err := otherOutboxEmpty(c, persist.NewOutbox(kv), kv); err != nil {
		t.Fatalf("--outbox badger with its own message pending: %v", err)
	}
	// Pending on the log: --outbox badger refused, log starts.
	kv = persist.NewMemory()
	lo, err := persist.OpenLogOutbox(filepath.Join(c.Data, "outbox"), kv, persist.LogOutboxOptions{Sync: outlog.SyncBatch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lo.Pending(); err != nil {
		t.Fatal(err)
	}
	e = pending("")
	if err := lo.Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	if err := lo.Close(); err != nil {
		t.Fatal(err)
	}
	if err := otherOutboxEmpty(c, persist.NewOutbox(kv), kv); err == nil || !strings.Contains(err.Error(), "--outbox badger") ||
		!strings.Contains(err.Error(), "1 pending") || !strings.Contains(err.Error(), "--outbox log") {
		t.Fatalf("--outbox badger with a message pending on the log: %v", err)
	}
	c.Outbox = "log"
	if err := otherOutboxEmpty(c, persist.NewOutbox(kv), kv); err != nil {
		t.Fatalf("--outbox log with its own message pending: %v", err)
	}
}
