package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/network/simhttp"
	"github.com/gateway/gateway/persist/natstest"
)

// startSim runs the simulated network as `gateway sim` does (its port over HTTP), for the
// nodes of a cluster to share; the test links sessions on it directly.
func startSim(t testing.TB) (*sim.Network, string) { return startSimCounting(t, nil) }

// startSimCounting is startSim with its port's requests counted in calls (nil: not counted).
func startSimCounting(t testing.TB, calls *atomic.Int64) (*sim.Network, string) {
	s, err := sim.Open(sim.Options{Dir: t.TempDir(), Logger: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	port := simhttp.NewServer(s, testLog())
	handler := port.Handler
	if calls != nil {
		handler = func(ctx *fasthttp.RequestCtx) { calls.Add(1); port.Handler(ctx) }
	}
	srv := &fasthttp.Server{Handler: handler, NoDefaultServerHeader: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() {
		port.Close()
		_ = srv.Shutdown()
		s.Close()
	})
	return s, "http://" + ln.Addr().String()
}

const testPartitions = 4

// clusterConfig is node id's configuration in a cluster on srv's NATS and simURL's network.
func clusterConfig(t testing.TB, id, natsURL, simURL string) Config {
	c := testConfig(t)
	c.Cluster, c.Store, c.NATSURL, c.NATSPrefix, c.NodeID = true, "nats", natsURL, "ct", id
	c.Partitions, c.SimURL, c.SecretKey = testPartitions, simURL, strings.Repeat("ab", 32)
	return c
}

// owned lists the partitions n runs.
func owned(n *served) []int {
	n.cluster.mu.RLock()
	defer n.cluster.mu.RUnlock()
	var out []int
	for p := range n.cluster.parts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// startFirst starts the cluster's first node and waits until it runs every partition.
func startFirst(t testing.TB, c Config) *served {
	t.Helper()
	a := start(t, c)
	eventually(t, 20*time.Second, "a runs every partition", func() bool { return len(owned(a)) == testPartitions })
	return a
}

// startSecond starts a second node beside a and waits until each runs half the partitions.
func startSecond(t *testing.T, a *served, c Config) *served {
	t.Helper()
	b := start(t, c)
	eventually(t, 30*time.Second, "two partitions on each node", func() bool {
		return len(owned(a)) == testPartitions/2 && len(owned(b)) == testPartitions/2
	})
	return b
}

// A cluster of two nodes in one process, on one embedded NATS server and one sim: node a
// starts alone and runs every partition; b joins and a hands half of them over (Release on a,
// then Acquire on b, from the records a wrote); requests to either node run on the owner;
// then a leaves and b takes the rest.
func TestTwoNodeCluster(t *testing.T) {
	srv := natstest.Start(t)
	evs := natstest.Start(t) // events on NATS (--events-nats): another server, to stop on its own
	simNet, simURL := startSim(t)
	clusterConfig := func(t *testing.T, id, natsURL, simURL string) Config {
		c := clusterConfig(t, id, natsURL, simURL)
		c.EventsNATS, c.EventsSubjectPrefix = evs.URL, "ev"
		return c
	}
	a := startFirst(t, clusterConfig(t, "a", srv.URL, simURL))

	// One user on each partition, signed in, linked, with a key: all on a alone.
	admin := a.token(t, "root", "admin")
	type user struct{ uid, tok, key, keyID, session, phone string }
	users := map[int]*user{}
	for i := 0; len(users) < testPartitions; i++ {
		uid := fmt.Sprintf("user%d", i)
		if p := cluster.PartitionOf(uid, testPartitions); users[p] == nil {
			users[p] = &user{uid: uid, phone: fmt.Sprintf("4477009000%02d", i)}
		}
	}
	for p := range testPartitions {
		u := users[p]
		u.tok = a.signIn(t, u.uid)
		u.session = a.link(t, simNet, u.tok, u.phone)
		u.key, u.keyID = a.newKey(t, admin, u.uid, "key of "+u.uid)
	}
	// A message for later on every partition (DESIGN.md section 18): it waits on a's schedule,
	// moves with its partition, and goes once, from whichever node owns it then.
	sendAt := time.Now().Add(15 * time.Second)
	later := map[int]string{}
	for p := range testPartitions {
		u := users[p]
		r := a.must(t, 200, "POST", "/api/v1/messages/send", u.key, map[string]any{"phone": fmt.Sprintf("155501200%02d", p), "message": "later " + u.uid,
			"sendAt": sendAt.UTC().Format(time.RFC3339Nano)})
		if r.str("status") != "scheduled" {
			t.Fatalf("scheduled: %s", r.obj())
		}
		later[p] = r.str("message_id")
	}
	// Each partition's network on a, fenced by a's lease.
	nets := map[int]network.Network{}
	for p := range testPartitions {
		nets[p] = a.cluster.part(p).net
	}

	b := startSecond(t, a, clusterConfig(t, "b", srv.URL, simURL))
	onB := owned(b)

	t.Run("release, then acquire elsewhere", func(t *testing.T) {
		for _, p := range onB {
			if a.cluster.part(p) != nil {
				t.Fatalf("partition %d runs on a and b", p)
			}
			u := users[p]
			keys, err := b.cluster.part(p).rt.engine.Keys.List(u.uid)
			if err != nil || len(keys) != 1 || keys[0].Key.ID != u.keyID {
				t.Fatalf("partition %d on b: keys %v %v, want the key made on a", p, keys, err)
			}
			// Its session runs on b now (b connected it from the records).
			eventually(t, 10*time.Second, "the session connected on b", func() bool {
				return b.must(t, 200, "GET", "/api/client/status", u.tok, nil).str("status") == "CONNECTED"
			})
		}
	})

	t.Run("a message sent later moves with its partition", func(t *testing.T) {
		for _, p := range onB {
			u := users[p]
			m, err := b.cluster.part(p).rt.engine.Messages.Get(u.uid, later[p])
			if err != nil || (m.Status != domain.MsgScheduled && time.Now().Before(sendAt)) {
				t.Fatalf("partition %d's message on b: %+v %v", p, m, err)
			}
		}
	})

	t.Run("a request to the non-owner is forwarded", func(t *testing.T) {
		for _, p := range onB {
			u := users[p]
			r := a.must(t, 200, "POST", "/api/v1/messages/send", u.key, map[string]any{"phone": "15550100009", "message": "via a to " + u.uid, "type": "text"})
			id := r.str("message_id")
			eventually(t, 10*time.Second, "the forwarded send delivered", func() bool {
				return slices.ContainsFunc(simNet.Messages("15550100009"), func(d domain.Delivered) bool { return d.Text == "via a to "+u.uid })
			})
			// It was accepted on b, the owner: a has no engine for the partition.
			if _, err := b.cluster.part(p).rt.engine.Messages.Get(u.uid, id); err != nil {
				t.Fatalf("the message on b: %v", err)
			}
		}
	})

	t.Run("a fenced network refuses to send", func(t *testing.T) {
		for p, n := range nets {
			if !slices.Contains(onB, p) {
				// a still owns p. Its lease is renewed every TTL/4; under a loaded machine a
				// renewal can come late, and the network is refused until it lands: poll.
				eventually(t, 10*time.Second, fmt.Sprintf("a may use partition %d's network", p), n.(fencedNetwork).ok)
				continue
			}
			if n.(fencedNetwork).ok() {
				t.Fatalf("partition %d: a may use the network of a partition b owns", p)
			}
			u := users[p]
			c, err := n.Open(u.session, func(network.Event) {})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Send(context.Background(), domain.Message{ID: "fenced-" + u.uid, To: "15550100010", Kind: domain.KindText, Text: "must not go"})
			if err != errFencedNetwork {
				t.Fatalf("a send on a network a no longer holds: %v", err)
			}
			if err := c.Connect(context.Background()); err != errFencedNetwork {
				t.Fatalf("a connect on a network a no longer holds: %v", err)
			}
		}
		if got := simNet.Messages("15550100010"); len(got) != 0 {
			t.Fatalf("the sim delivered %v", got)
		}
	})

	t.Run("the directory finds a key created on the other node", func(t *testing.T) {
		p := onB[0]
		u := users[p]
		raw, id := b.newKey(t, admin, u.uid, "second key of "+u.uid)
		sum := sha256.Sum256([]byte(raw))
		if q, ok, err := a.cluster.Locate("apikey_hash", hex.EncodeToString(sum[:])); err != nil || !ok || q != p {
			t.Fatalf("a locates the new key's hash: %d %v %v, want partition %d", q, ok, err, p)
		}
		if q, ok, err := a.cluster.Locate("apikey", id); err != nil || !ok || q != p {
			t.Fatalf("a locates the new key's id: %d %v %v, want partition %d", q, ok, err, p)
		}
		a.must(t, 200, "GET", "/api/v1/account", raw, nil)
	})

	t.Run("a session moves", func(t *testing.T) {
		s := a.must(t, 200, "POST", "/api/admin/sessions/create", "", map[string]any{"sessionName": "spare"}).obj()["session"].(map[string]any)
		id := s["id"].(string)
		from := cluster.PartitionOf(id, testPartitions)
		// A new user on a partition of the other node than the session's.
		var uid string
		for i := 0; uid == ""; i++ {
			cand := fmt.Sprintf("mover%d", i)
			if q := cluster.PartitionOf(cand, testPartitions); slices.Contains(onB, q) != slices.Contains(onB, from) {
				uid = cand
			}
		}
		to := cluster.PartitionOf(uid, testPartitions)
		b.signIn(t, uid)
		b.must(t, 200, "POST", "/api/admin/sessions/assign", admin, map[string]any{"sessionId": id, "userId": uid})
		engineOf := func(p int) *engine.Engine {
			for _, n := range []*served{a, b} {
				if pt := n.cluster.part(p); pt != nil {
					return pt.rt.engine
				}
			}
			t.Fatalf("nobody runs partition %d", p)
			return nil
		}
		has := func(p int) (engine.SessionView, bool) {
			for _, v := range engineOf(p).Sessions.List() {
				if v.ID == id {
					return v, true
				}
			}
			return engine.SessionView{}, false
		}
		eventually(t, 10*time.Second, "the session on its new user's partition", func() bool {
			v, ok := has(to)
			return ok && v.AssignedTo == uid
		})
		if _, ok := has(from); ok {
			t.Fatalf("the session is still on partition %d", from)
		}
		// The admin list reads every partition's records: the old partition's delete, newer
		// than the new partition's record, hides nothing.
		for _, n := range []*served{a, b} {
			var found map[string]any
			for _, v := range n.must(t, 200, "GET", "/api/admin/sessions", admin, nil).list() {
				if v["id"] == id {
					found = v
				}
			}
			if found == nil || found["assignedTo"] != uid {
				t.Fatalf("the admin list after the move: %v", found)
			}
		}
	})

	t.Run("an admin paces a session on any partition through either node", func(t *testing.T) {
		for p := range testPartitions {
			for i, n := range []*served{a, b} {
				gap := 100 * (i + 1)
				r := n.must(t, 200, "PATCH", "/api/admin/sessions", admin, map[string]any{"id": users[p].session, "pacing": map[string]any{"minGapMs": gap}})
				if r.str("id") != users[p].session {
					t.Fatalf("PATCH of partition %d's session through node %d answered %v", p, i, r.obj())
				}
			}
			a.must(t, 200, "PATCH", "/api/admin/sessions", admin, map[string]any{"id": users[p].session, "pacing": nil})
		}
	})

	t.Run("the admin key list has a single node's order", func(t *testing.T) {
		// More keys, made in turn through both nodes on every partition.
		for i := range 2 {
			for p := range testPartitions {
				via := []*served{a, b}[(i+p)%2]
				via.newKey(t, admin, users[p].uid, fmt.Sprintf("more %d", i))
			}
		}
		var lists [2][]map[string]any
		for i, n := range []*served{a, b} {
			lists[i] = n.must(t, 200, "GET", "/api/admin/apikeys", admin, nil).list()
		}
		total := 0
		for _, n := range []*served{a, b} {
			for _, p := range owned(n) {
				ks, err := n.cluster.part(p).rt.engine.Keys.List("")
				if err != nil {
					t.Fatal(err)
				}
				total += len(ks)
			}
		}
		if len(lists[0]) != total || fmt.Sprint(lists[0]) != fmt.Sprint(lists[1]) {
			t.Fatalf("a and b list the keys differently:\n%v\n%v", lists[0], lists[1])
		}
		// A single node lists keys oldest first, then by id (engine.SortKeys).
		sorted := slices.IsSortedFunc(lists[0], func(x, y map[string]any) int {
			tx, _ := time.Parse(time.RFC3339Nano, x["createdAt"].(string))
			ty, _ := time.Parse(time.RFC3339Nano, y["createdAt"].(string))
			if c := tx.Compare(ty); c != 0 {
				return c
			}
			return strings.Compare(x["id"].(string), y["id"].(string))
		})
		if !sorted {
			t.Fatalf("the cluster's key list is not oldest first: %v", lists[0])
		}
	})

	t.Run("every message sent later went once, at its time", func(t *testing.T) {
		for p := range testPartitions {
			to := fmt.Sprintf("155501200%02d", p)
			eventually(t, time.Until(sendAt)+15*time.Second, "the message for later on partition "+fmt.Sprint(p), func() bool {
				return len(simNet.Messages(to)) > 0
			})
			got := simNet.Messages(to)
			if len(got) != 1 || got[0].Text != "later "+users[p].uid || got[0].Timestamp.Before(sendAt.Add(-time.Second)) {
				t.Fatalf("partition %d: %+v", p, got)
			}
		}
	})

	// A user of a partition a runs, whose events b's streams get over NATS.
	var onA *user
	pA := 0
	for p := range testPartitions {
		if !slices.Contains(onB, p) {
			onA, pA = users[p], p
		}
	}
	sent := 0
	send := func(t *testing.T, via *served) {
		t.Helper()
		sent++
		via.must(t, 200, "POST", "/api/v1/messages/send", onA.key, map[string]any{"phone": fmt.Sprintf("155501077%02d", sent), "message": "m", "type": "text"})
	}
	// What happened, in order; the streams count only the events of what is sent below, not
	// the last ones of its message for later (it went a moment ago).
	watch := openSSE(t, b.url, onA.tok, "").ignore(later[pA])

	t.Run("a stream resumes on the other node, from the partition's journal", func(t *testing.T) {
		away := openSSE(t, a.url, onA.tok, "").ignore(later[pA])
		send(t, a)
		eventually(t, 10*time.Second, "queued, sent, delivered on both streams", func() bool {
			return len(away.got()) == 3 && len(watch.got()) == 3
		})
		last := away.got()[2]
		away.close()
		for range 5 {
			send(t, b) // forwarded to a
		}
		eventually(t, 10*time.Second, "15 more events", func() bool { return len(watch.got()) == 18 })
		back := openSSE(t, b.url, onA.tok, last).ignore(later[pA])
		eventually(t, 10*time.Second, "the 15 replayed", func() bool { return len(back.got()) >= 15 })
		if got := back.got(); !slices.Equal(got, watch.got()[3:]) {
			t.Fatalf("resumed on b with\n%v\nwant\n%v", got, watch.got()[3:])
		}
		eventually(t, 10*time.Second, "the events on NATS", onNATS(t, evs.URL, watch.got()))
	})

	t.Run("a leaves: b takes its partitions over", func(t *testing.T) {
		// The events' NATS server is down meanwhile: what a committed and could not publish,
		// b, the partition's next owner, publishes once it is back.
		evs.Stop()
		for range 2 {
			send(t, a)
		}
		eventually(t, 10*time.Second, "6 more events", func() bool { return len(watch.got()) == 24 })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a.Shutdown(ctx)
		if len(owned(b)) != testPartitions {
			t.Fatalf("b runs %v once a left", owned(b))
		}
		for p := range testPartitions {
			b.must(t, 200, "GET", "/api/v1/account", users[p].key, nil)
		}
		if err := evs.Restart(); err != nil {
			t.Fatal(err)
		}
		send(t, b)
		eventually(t, 20*time.Second, "every event on NATS", onNATS(t, evs.URL, watch.got()))
		ids := streamIDs(t, evs.URL, "ev")
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s twice on NATS", id)
			}
			seen[id] = true
		}
	})
}
