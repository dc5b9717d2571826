package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natstest"
)

// httpScan links a single node's sessions through its dev control (POST /api/dev/sim/scan).
type httpScan struct {
	t testing.TB
	n *served
}

func (h httpScan) Scan(sessionID, phone string) error {
	if r := h.n.do(h.t, "POST", "/api/dev/sim/scan", "", map[string]any{"sessionId": sessionID, "phone": phone}); r.status != 200 {
		return fmt.Errorf("scan: %d %s", r.status, r.raw)
	}
	return nil
}

// A single node over the memory KV and the embedded sim: a send is delivered; Shutdown lets a
// send in flight finish (requests drain first), then stops the engine, which settles and
// flushes before storage closes (nothing is written after it), and storage closes once.
func TestSingleNodeSendAndStopOrder(t *testing.T) {
	kv := newRecordingKV()
	c := testConfig(t)
	c.KV, c.SimLatency = kv, 300*time.Millisecond
	c.Outbox = "badger" // the outbox in the KV, whose pending messages the test reads at its close
	n := start(t, c)
	admin := n.token(t, "root", "admin")
	alice := n.signIn(t, "alice")
	n.link(t, httpScan{t, n}, alice, "447700900001")
	key, _ := n.newKey(t, admin, "alice", "shop")

	r := n.do(t, "POST", "/api/v1/messages/send", key, map[string]any{"phone": "15550100001", "message": "hello", "type": "text"})
	if r.status != 200 || r.str("message_id") == "" {
		t.Fatalf("send: %d %s", r.status, r.raw)
	}
	eventually(t, 10*time.Second, "the delivery", func() bool {
		r := n.must(t, 200, "GET", "/api/dev/sim/messages?to=15550100001", "", nil)
		return strings.Contains(string(r.raw), `"hello"`)
	})

	// A synchronous bulk send (it answers once its campaign is done) running when the shutdown
	// starts.
	// A transport error makes do call t.Fatalf, which ends this goroutine only: the deferred
	// send still gives the test a reply (status 0) to fail on instead of waiting forever.
	replies := make(chan reply, 1)
	go func() {
		var r reply
		defer func() { replies <- r }()
		r = n.do(t, "POST", "/api/v1/messages/send-bulk", key, map[string]any{
			"numbers": []string{"15550100002", "15550100003", "15550100004"}, "message": "in flight", "delay": 0})
	}()
	out := persist.NewOutbox(kv.Memory)
	eventually(t, 10*time.Second, "the bulk send accepted", func() bool {
		p, err := out.Pending()
		// Its own messages: the first send's outcome may not be written yet.
		return err == nil && slices.ContainsFunc(p, func(e domain.OutboxEntry) bool { return e.Message.Text == "in flight" })
	})
	var atClose []domain.OutboxEntry
	kv.atClose = func() { atClose, _ = out.Pending() }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n.Shutdown(ctx)

	r = <-replies
	if r.status != 200 || r.obj()["successful"] != float64(3) {
		t.Fatalf("the bulk send in flight during shutdown: %d %s (want 3 sent: requests drain before the engine stops)", r.status, r.raw)
	}
	if len(atClose) != 0 {
		t.Fatalf("storage closed with %d messages unsettled (the engine must stop first)", len(atClose))
	}
	if kv.closed != 1 || len(kv.late) != 0 {
		t.Fatalf("storage closed %d times; commits after it closed: %v", kv.closed, kv.late)
	}
	if _, err := http.Get(n.url + "/healthz"); err == nil {
		t.Fatal("the node still answers after Shutdown")
	}
	n.Shutdown(ctx) // a second call does nothing
	if kv.closed != 1 {
		t.Fatalf("storage closed %d times", kv.closed)
	}
}

// A lone --store nats node whose single-writer lease another gateway takes: Lost is closed,
// Err says why, and /readyz reports the store unavailable.
func TestLoneNATSNodeLosesItsLease(t *testing.T) {
	srv := natstest.Start(t)
	c := testConfig(t)
	c.Store, c.NATSURL, c.NATSPrefix, c.NodeID = "nats", srv.URL, "lone", "a"
	n := start(t, c)
	if n.Err() != nil {
		t.Fatalf("Err before any loss: %v", n.Err())
	}
	n.must(t, 200, "GET", "/readyz", "", nil)

	// Another gateway writes the lease record (as a takeover does): the holder's next renewal,
	// which expects its own last write, is refused.
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), "lone.!.0.lease", []byte(`{"node":"b","instance":"x"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after the lease was taken")
	}
	if err := n.Err(); err == nil || !strings.Contains(err.Error(), `lost the single-writer lease on NATS prefix "lone"`) {
		t.Fatalf("Err: %v", err)
	}
	if r := n.do(t, "GET", "/readyz", "", nil); r.status != 503 {
		t.Fatalf("/readyz after the loss: %d %s", r.status, r.raw)
	}
	if err := n.st.kv.Commit(context.Background(), persist.Op{Key: []byte("k"), Value: []byte("v")}); !errors.Is(err, domain.ErrStorageUnavailable) {
		t.Fatalf("a write after the loss: %v, want storage unavailable", err)
	}
}
