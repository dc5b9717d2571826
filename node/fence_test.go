package node

// The cluster's second step (DESIGN.md section 19), on real nodes: fences bound to their
// acquisition, a fenced owner that gives its lease up, forwarded requests that must be signed,
// live events across nodes.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natstest"
)

// natsJS is a connection of the test's own to srv (what anything else on NATS could do).
func natsJS(t *testing.T, srv *natstest.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// userOn is a user id on partition p.
func userOn(p int, prefix string) string {
	for i := 0; ; i++ {
		if uid := fmt.Sprintf("%s%d", prefix, i); cluster.PartitionOf(uid, testPartitions) == p {
			return uid
		}
	}
}

// A partition lost and taken back by the same node: nothing of the runtime that ran it before
// (its view of the store, its network) can write or send any more, though the node holds the
// partition again under a new fence; before, the old runtime's view read the node's current
// fence on every commit and passed it (two engines on one partition).
func TestRetakenPartitionRefusesTheOldRuntime(t *testing.T) {
	srv := natstest.Start(t)
	simNet, simURL := startSim(t)
	a := startFirst(t, clusterConfig(t, "a", srv.URL, simURL))
	const p = 1
	uid := userOn(p, "old")
	tok := a.signIn(t, uid)
	sid := a.link(t, simNet, tok, "447700900301")
	old := a.cluster.part(p)
	oldClient, err := old.net.Open(sid, func(network.Event) {})
	if err != nil {
		t.Fatal(err)
	}

	// The lease is gone behind a's back (deleted): a's next renewal finds it so, a loses the
	// partition and, being the only node, takes it again at once with a new fence.
	_, js := natsJS(t, srv)
	leases, err := js.KeyValue(context.Background(), "ct_leases")
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Delete(context.Background(), "p."+strconv.Itoa(p)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a runs partition 1 again, a new runtime", func() bool {
		now := a.cluster.part(p)
		_, held := a.cluster.node.Lease(p)
		return now != nil && now != old && held
	})

	// The old runtime's writes and sends are refused, whatever the node holds now.
	err = old.view.Commit(context.Background(), persist.Op{Key: []byte("user/" + uid), Value: []byte("a stale write")})
	if err == nil {
		t.Fatal("the old runtime's view wrote after the partition was taken again")
	}
	if _, err := oldClient.Send(context.Background(), domain.Message{ID: "stale-send", To: "15550100301", Kind: domain.KindText, Text: "must not go"}); err == nil {
		t.Fatal("the old runtime's network sent after the partition was taken again")
	}
	if got := simNet.Messages("15550100301"); len(got) != 0 {
		t.Fatalf("the sim delivered %v", got)
	}
	// The new runtime serves the user.
	a.must(t, 200, "GET", "/api/client/status", tok, nil)
}

// A fenced owner: the partition's fence moved behind its back (a late write of another
// acquisition). Its next commit is refused as fenced, it gives the lease up at once and takes
// the partition again with a new fence within a lease TTL: requests are held meanwhile, never
// answered 503; before, it kept renewing a lease it could not write under and answered 503
// until restarted.
func TestFencedOwnerTakesThePartitionAgain(t *testing.T) {
	srv := natstest.Start(t)
	simNet, simURL := startSim(t)
	a := startFirst(t, clusterConfig(t, "a", srv.URL, simURL))
	const p = 2
	uid := userOn(p, "fenced")
	admin := a.token(t, "root", "admin")
	tok := a.signIn(t, uid)
	a.link(t, simNet, tok, "447700900302")
	key, _ := a.newKey(t, admin, uid, "k")
	send := func(i int) reply {
		return a.do(t, "POST", "/api/v1/messages/send", key, map[string]any{"phone": "15550100302", "message": fmt.Sprintf("m%d", i)})
	}
	a.must(t, 200, "POST", "/api/v1/messages/send", key, map[string]any{"phone": "15550100302", "message": "before"})

	_, js := natsJS(t, srv)
	for _, subj := range a.cluster.store.FenceSubjects(p) {
		if _, err := js.Publish(context.Background(), subj, []byte("someone else")); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	for i := range 10 {
		if r := send(i); r.status != 200 {
			t.Fatalf("send %d after the fence moved (%v in): %d %s", i, time.Since(began).Round(time.Millisecond), r.status, r.raw)
		}
	}
	if took := time.Since(began); took > 2*DefaultLeaseTTL {
		t.Errorf("the sends after the fence moved took %v, want the partition back within a lease TTL", took)
	}
	eventually(t, 10*time.Second, "every send delivered", func() bool { return len(simNet.Messages("15550100302")) == 11 })
}

// A request published on a node's forwarding subject by anyone but a node of the cluster (here
// an admin envelope that would create a key for another user) is refused and never run; a
// forwarded request between the nodes is signed and runs.
func TestForgedEnvelopeRefused(t *testing.T) {
	srv := natstest.Start(t)
	_, simURL := startSim(t)
	a := startFirst(t, clusterConfig(t, "a", srv.URL, simURL))
	const p = 3
	victim := userOn(p, "victim")
	admin := a.token(t, "root", "admin")
	a.signIn(t, victim)

	// The owner's forwarding subject: its instance, as the leases bucket says (anyone who
	// may read the bucket can).
	nc, js := natsJS(t, srv)
	leases, err := js.KeyValue(context.Background(), "ct_leases")
	if err != nil {
		t.Fatal(err)
	}
	e, err := leases.Get(context.Background(), "p."+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	var lease struct {
		Instance string `json:"instance"`
	}
	if err := json.Unmarshal(e.Value(), &lease); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(map[string]any{
		"v": 1, "principal": map[string]any{"kind": "admin", "user": map[string]any{"id": "root", "role": "admin"}},
		"route": "POST /api/admin/apikeys", "method": "POST", "path": "/api/admin/apikeys",
		"header": []map[string]string{{"n": "Content-Type", "v": "application/json"}},
	})
	body := []byte(`{"userId":"` + victim + `","name":"forged"}`)
	frame := frameOf(meta, body)
	m := nats.NewMsg("ct_fwd.n." + lease.Instance)
	m.Header.Set("Gw-Fwd-V", "1")
	m.Header.Set("Gw-Partition", strconv.Itoa(p))
	m.Header.Set("Gw-Chunks", "1")
	m.Data = frame
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	m.Reply = inbox
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	var answers []string
	for {
		r, err := sub.NextMsg(2 * time.Second)
		if err != nil {
			break
		}
		answers = append(answers, r.Header.Get("Gw-Reply")+": "+string(r.Data))
		if r.Header.Get("Gw-Reply") != "accepted" {
			break
		}
	}
	if len(answers) == 0 || !strings.HasPrefix(answers[0], "error") {
		t.Errorf("the forged envelope was answered %q, want refused", answers)
	}
	keys := a.must(t, 200, "GET", "/api/admin/apikeys", admin, nil).list()
	for _, k := range keys {
		if k["name"] == "forged" {
			t.Fatalf("the forged envelope made a key: %v", k)
		}
	}
}

// frameOf is a forwarded request's payload: the envelope's length (uvarint), the envelope, the
// body (cluster/forward.go).
func frameOf(meta, body []byte) []byte {
	var out []byte
	for n := uint64(len(meta)); ; n >>= 7 {
		if n < 0x80 {
			out = append(out, byte(n))
			break
		}
		out = append(out, byte(n)|0x80)
	}
	return append(append(out, meta...), body...)
}

// A user's live events reach the stream open on another node than the owner's, once that
// node announced it streams them; an owner publishes nothing for users nobody streams (it
// believes nobody does until a node says so).
func TestLiveEventsAcrossNodes(t *testing.T) {
	srv := natstest.Start(t)
	simNet, simURL := startSim(t)
	a := startFirst(t, clusterConfig(t, "a", srv.URL, simURL))
	b := startSecond(t, a, clusterConfig(t, "b", srv.URL, simURL))
	p := owned(b)[0]
	uid := userOn(p, "live")
	admin := a.token(t, "root", "admin")
	tok := a.signIn(t, uid)
	a.link(t, simNet, tok, "447700900303")
	key, _ := a.newKey(t, admin, uid, "k")
	if b.cluster.live.Listening(uid) {
		t.Fatal("the owner believes someone streams a user nobody streams")
	}
	// A stream on a (not the owner).
	req, err := http.NewRequest("GET", a.url+"/api/client/events/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	eventually(t, 5*time.Second, "the owner knows a streams the user", func() bool { return b.cluster.live.Listening(uid) })
	r := a.must(t, 200, "POST", "/api/v1/messages/send", key, map[string]any{"phone": "15550100303", "message": "live"})
	id := r.str("message_id")
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			if strings.Contains(l, id) {
				return
			}
		case <-deadline:
			t.Fatal("no event of the message on the stream opened on the other node")
		}
	}
}
