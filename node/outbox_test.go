package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natstest"
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
		if err := otherOutboxErr(c, persist.NewOutbox(persist.NewMemory()), persist.NewMemory()); err != nil {
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
	if err := otherOutboxErr(c, persist.NewOutbox(kv), kv); err == nil || !strings.Contains(err.Error(), "--outbox log") ||
		!strings.Contains(err.Error(), "1 pending") || !strings.Contains(err.Error(), "--outbox badger") {
		t.Fatalf("--outbox log with a message pending on the records' store: %v", err)
	}
	c.Outbox = "badger"
	if err := otherOutboxErr(c, persist.NewOutbox(kv), kv); err != nil {
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
	if err := otherOutboxErr(c, persist.NewOutbox(kv), kv); err == nil || !strings.Contains(err.Error(), "--outbox badger") ||
		!strings.Contains(err.Error(), "1 pending") || !strings.Contains(err.Error(), "--outbox log") {
		t.Fatalf("--outbox badger with a message pending on the log: %v", err)
	}
	c.Outbox = "log"
	if err := otherOutboxErr(c, persist.NewOutbox(kv), kv); err != nil {
		t.Fatalf("--outbox log with its own message pending: %v", err)
	}
}

// otherOutboxErr is otherOutbox's error, the log it opened closed.
func otherOutboxErr(c Config, badger *persist.Outbox, kv persist.KV) error {
	_, lo, err := otherOutbox(c, badger, kv)
	if lo != nil {
		_ = lo.Close()
	}
	return err
}

// Switching the outbox (--outbox badger to log, and back) keeps what the other one holds
// readable: a message accepted before the switch is read by its id, and its Idempotency-Key
// sent again after the switch answers that message instead of sending a second.
func TestOutboxSwitchKeepsWhatWasSent(t *testing.T) {
	c := testConfig(t)
	c.Outbox = "badger"
	n := start(t, c)
	admin := n.token(t, "root", "admin")
	alice := n.signIn(t, "alice")
	n.link(t, httpScan{t, n}, alice, "447700900001")
	key, _ := n.newKey(t, admin, "alice", "shop")
	var ids []string
	for i, ob := range []string{"log", "badger"} {
		to := fmt.Sprintf("1555010000%d", i+2)
		body := map[string]any{"phone": to, "message": "before the switch to " + ob, "type": "text"}
		idem := "idem-" + ob
		id := n.mustIdem(t, key, idem, body).str("message_id")
		eventually(t, 10*time.Second, "the outcome", func() bool {
			return n.must(t, 200, "GET", "/api/v1/messages/"+id, key, nil).str("status") != "queued"
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		n.Shutdown(ctx)
		cancel()
		c.Outbox = ob
		n = start(t, c)
		ids = append(ids, id)
		for _, old := range ids {
			if st := n.must(t, 200, "GET", "/api/v1/messages/"+old, key, nil).str("status"); st == "queued" || st == "" {
				t.Fatalf("--outbox %s: %s reads %q", ob, old, st)
			}
		}
		if ob == "log" {
			// The log lists its own messages with the history index's, where the records'
			// store's outbox put its own: both are listed. (Back on badger the index alone is
			// listed: README, --outbox.)
			if listed := string(n.must(t, 200, "GET", "/api/v1/messages?limit=100", key, nil).raw); !strings.Contains(listed, id) {
				t.Fatalf("--outbox log: %s not listed: %s", id, listed)
			}
		}
		if again := n.mustIdem(t, key, idem, body).str("message_id"); again != id {
			t.Fatalf("--outbox %s: the Idempotency-Key sent again made %s, want %s", ob, again, id)
		}
		sims := string(n.must(t, 200, "GET", "/api/dev/sim/messages?to="+to, "", nil).raw)
		if k := strings.Count(sims, "before the switch to "+ob); k != 1 {
			t.Fatalf("--outbox %s: delivered %d times: %s", ob, k, sims)
		}
	}
}

// mustIdem sends body to v1 send with an Idempotency-Key: 200 expected.
func (s *served) mustIdem(t testing.TB, key, idem string, body any) reply {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", s.url+"/api/v1/messages/send", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("send with Idempotency-Key %s: %d %s %v", idem, res.StatusCode, raw, err)
	}
	return reply{status: res.StatusCode, raw: raw}
}

// --outbox's default: the log, unless the records' store's outbox holds pending messages (a
// data directory from a release whose default was badger: they are sent first) or --store nats.
func TestOutboxDefault(t *testing.T) {
	c := testConfig(t)
	c.Outbox = ""
	kv := persist.NewMemory()
	if ob, err := pickOutbox(c, persist.NewOutbox(kv), testLog()); err != nil || ob != "log" {
		t.Fatalf("a new data directory: %q, %v", ob, err)
	}
	e := domain.OutboxEntry{ID: "3EB0AAAAAAAAAAAAAAAAAAAA", SessionID: "s1", UserID: "u1", CreatedAt: domain.MillisOf(time.Now()),
		Message: domain.Message{ID: "3EB0AAAAAAAAAAAAAAAAAAAA", To: "491511234567", Kind: domain.KindText, Text: "hi"}}
	e.SetStatus(domain.MsgQueued, time.Now())
	if err := persist.NewOutbox(kv).Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	if ob, err := pickOutbox(c, persist.NewOutbox(kv), testLog()); err != nil || ob != "badger" {
		t.Fatalf("a message pending on the records' store: %q, %v", ob, err)
	}
	c.Outbox = "log"
	if ob, _ := pickOutbox(c, persist.NewOutbox(kv), testLog()); ob != "log" {
		t.Fatalf("--outbox log given: %q", ob)
	}
	c.Outbox, c.Store = "", "nats"
	if ob, _ := pickOutbox(c, persist.NewOutbox(persist.NewMemory()), testLog()); ob != "badger" {
		t.Fatalf("--store nats: %q", ob)
	}
}

// A lone --store nats node whose engine's clock runs ahead of the machine's (a test's, or a
// host whose time the operator set apart from the process's): a sent message's outcome is
// paged under the window its id names, by the engine's clock, and read back by id once the
// page is durable (the outbox reads by the clock that stamps its messages, not time.Now: a
// window 10 minutes ahead of time.Now is past the read-ahead, and the message read 404).
func TestPagedOutcomeReadByTheEnginesClock(t *testing.T) {
	srv := natstest.Start(t)
	c := testConfig(t)
	c.Store, c.NATSURL, c.NATSPrefix, c.NodeID = "nats", srv.URL, "ahead", "a"
	c.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
	n := start(t, c)
	admin := n.token(t, "root", "admin")
	alice := n.signIn(t, "alice")
	n.link(t, httpScan{t, n}, alice, "447700900001")
	key, _ := n.newKey(t, admin, "alice", "shop")
	id := n.must(t, 200, "POST", "/api/v1/messages/send", key, map[string]any{"phone": "15550100001", "message": "ahead", "type": "text"}).str("message_id")
	pages, ok := n.st.kv.(interface {
		ScanSinceSeq(prefix []byte, since time.Time, fn func(key, value []byte, seq uint64) error) error
	})
	if !ok {
		t.Fatalf("the NATS store %T scans no pages", n.st.kv)
	}
	eventually(t, 10*time.Second, "the outcome's page", func() bool {
		found := false
		err := pages.ScanSinceSeq([]byte("outbox_page/"), time.Time{}, func(_, page []byte, _ uint64) error {
			found = found || bytes.Contains(page, []byte(id))
			return nil
		})
		return err == nil && found
	})
	st := n.must(t, 200, "GET", "/api/v1/messages/"+id, key, nil).str("status")
	if st != "sent" && st != "delivered" && st != "read" {
		t.Fatalf("status %q", st)
	}
}
