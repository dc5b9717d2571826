package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
