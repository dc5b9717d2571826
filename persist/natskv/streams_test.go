package natskv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// Partitions over several records streams: partition p's records are in stream p mod 3, the
// records of no partition in stream 0; scans, Locate and Watch see every stream; a store opened
// later keeps the layout the streams were made with. How many a new layout has: Options.Streams
// when given (on one server too), else one per server that holds a stream (TestStreamsFollowServers).
func TestStreamsLayout(t *testing.T) {
	one := natstest.Start(t)
	asked, err := natskv.Open(context.Background(), natskv.Options{URL: one.URL, Prefix: "lay", Streams: 3, Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	if asked.Streams() != 3 {
		t.Fatalf("one NATS server, 3 streams asked for: %d streams", asked.Streams())
	}
	asked.Close()
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	srv := natstest.StartCluster(t, 3)
	o := natskv.Options{URL: srv.URLs(), Prefix: "lay", Streams: 3, Partitions: 8, Replicas: 1}
	s, err := natskv.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Streams() != 3 {
		t.Fatalf("%d streams, want 3", s.Streams())
	}
	for p := range 8 {
		kvtest.MustCommit(t, s.Partition(p, newOwner(t, s, p)), kvtest.Put(fmt.Sprintf("session/s%d", p), "v"), kvtest.Put(fmt.Sprintf("user/u%d", p), "v"))
	}
	kvtest.MustCommit(t, s.Global(), kvtest.Put("dev_issuer/key", "k"))
	nc, err := nats.Connect(srv.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for p := range 8 {
		name := "lay_records"
		if k := p % 3; k > 0 {
			name = fmt.Sprintf("lay_records_%d", k)
		}
		st, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetLastMsgForSubject(context.Background(), fmt.Sprintf("lay.session.%d.s%d", p, p)); err != nil {
			t.Errorf("partition %d's record is not in %s: %v", p, name, err)
		}
	}
	if keys := kvtest.ScanKeys(t, s, "session/"); len(keys) != 8 {
		t.Fatalf("a scan of every partition: %v", keys)
	}
	if p, ok, err := s.Locate([]byte("session/s5")); err != nil || !ok || p != "5" {
		t.Fatalf("Locate: %q %v %v", p, ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan string, 64)
	ready, err := s.Watch(ctx, []string{"session"}, func(e natskv.WatchEntry) { seen <- e.Partition })
	if err != nil {
		t.Fatal(err)
	}
	<-ready
	if len(seen) != 8 {
		t.Fatalf("the watch reported %d records of 8 partitions", len(seen))
	}
	// Opened again asking for one stream: the layout the streams were made with stays.
	o.Streams = 1
	again, err := natskv.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Streams() != 3 {
		t.Fatalf("reopened with %d streams, want the existing 3", again.Streams())
	}
	kvtest.WantValue(t, again.Partition(4, nil), "user/u4", "v")
	o.Partitions = 16
	if _, err := natskv.Open(context.Background(), o); err == nil || !strings.Contains(err.Error(), "8 partitions") {
		t.Fatalf("opened with another partition count: %v", err)
	}
	// A commit of the store's own spanning two streams is refused, nothing written.
	o.Partitions, o.Prefix, o.Streams = 8, "lay2", 3
	o.Partition = func(key []byte) uint32 { return uint32(key[len(key)-1] - '0') }
	spread, err := natskv.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer spread.Close()
	if err := spread.Commit(context.Background(), kvtest.Put("k/1", "v"), kvtest.Put("k/2", "v")); !errors.Is(err, domain.ErrRecordInvalid) {
		t.Fatalf("a commit over two streams: %v", err)
	}
}

// On a three-server cluster the records streams' leaders are spread: no server leads two while
// another leads none.
func TestStreamLeadersSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	c := natstest.StartCluster(t, 3)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: c.URLs(), Prefix: "spread", Replicas: 3, Streams: 3, Partitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		leaders := map[string]bool{}
		for _, name := range []string{"spread_records", "spread_records_1", "spread_records_2"} {
			// A lookup may time out while the new cluster still elects its leaders (seen in
			// CI: "context deadline exceeded" 5.5 s in): asked again until the deadline.
			st, err := js.Stream(context.Background(), name)
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				continue
			}
			if info, err := st.Info(context.Background()); err == nil && info.Cluster != nil {
				leaders[info.Cluster.Leader] = true
			}
		}
		if len(leaders) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the three streams' leaders are on %d servers, want 3", len(leaders))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every partition's view works on it (fence lanes on a replicated stream), and reads back
	// what it wrote from any replica (its cache cleared: another view of the same owner, which
	// syncs first: its floor is its acquisition's fence, and a follower that has applied the
	// fence but not yet the other view's commit would answer "absent", as for another node's
	// write; this was the test's flake, never the node's: a node has one view per acquisition).
	for p := range 6 {
		o := newOwner(t, s, p)
		kvtest.MustCommit(t, s.Partition(p, o), kvtest.Put("k", "v"), kvtest.Put("k2", "v"))
		fresh := s.Partition(p, o)
		if err := fresh.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, kv := range []persist.KV{fresh, s.Partition(p, nil)} {
			got, err := persist.GetMany(kv, [][]byte{[]byte("k"), []byte("none"), []byte("k2")})
			if err != nil || string(got[0]) != "v" || got[1] != nil || string(got[2]) != "v" {
				t.Fatalf("partition %d: GetMany %q, %v", p, got, err)
			}
			kvtest.WantValue(t, kv, "k2", "v")
			kvtest.WantAbsent(t, kv, "none")
		}
	}
}

// ScanSince reads the records written since a time, and only those.
func TestScanSince(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "since"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		kvtest.MustCommit(t, s, kvtest.Put(fmt.Sprintf("log/u/%d", i), "old"))
	}
	time.Sleep(50 * time.Millisecond)
	mid := time.Now()
	time.Sleep(50 * time.Millisecond)
	for i := 5; i < 8; i++ {
		kvtest.MustCommit(t, s, kvtest.Put(fmt.Sprintf("log/u/%d", i), "new"))
	}
	kvtest.MustCommit(t, s, kvtest.Put("log/u/1", "rewritten"))
	var got []string
	if err := s.ScanSince([]byte("log/u/"), mid, func(k, v []byte) error {
		got = append(got, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := "log/u/1=rewritten log/u/5=new log/u/6=new log/u/7=new"; strings.Join(got, " ") != want {
		t.Fatalf("since the middle: %v, want %s", got, want)
	}
}

// GetMany reads many keys in one round trip, absent ones as nil; a fenced view's own writes
// come from its cache. Has answers the same way (an outbox boot asks it of every pending
// message's outcome: one request, not a read per message), a present empty value present.
func TestGetMany(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "many"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := s.Partition(2, newOwner(t, s, 2))
	var keys [][]byte
	var ops []persist.Op
	for i := range 1500 {
		k := []byte(fmt.Sprintf("b/%04d", i))
		keys = append(keys, k)
		if i%3 != 0 {
			ops = append(ops, persist.Op{Key: k, Value: k})
		}
		if len(ops) == 500 {
			kvtest.MustCommit(t, v, ops...)
			ops = nil
		}
	}
	kvtest.MustCommit(t, v, ops...)
	kvtest.MustCommit(t, v, persist.Op{Key: []byte("b/empty"), Value: []byte{}})
	keys = append(keys, []byte("b/empty"))
	for name, kv := range map[string]persist.KV{"the owner's view": v, "another view": s.Partition(2, nil)} {
		got, err := persist.GetMany(kv, keys[:1500])
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys[:1500] {
			if want := map[bool][]byte{true: nil, false: k}[i%3 == 0]; !bytes.Equal(got[i], want) {
				t.Fatalf("%s: %s = %q, want %q", name, k, got[i], want)
			}
		}
		if _, ok := kv.(persist.Haver); !ok {
			t.Fatalf("%s: no Has (an outbox boot would read key by key)", name)
		}
		has, err := persist.Has(kv, keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if want := i == 1500 || i%3 != 0; has[i] != want {
				t.Fatalf("%s: Has(%s) = %v, want %v", name, k, has[i], want)
			}
		}
	}
}

// Media objects on a stock server (1 MiB messages): a 3 MiB object goes in and comes back.
func TestBlobs(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "blob"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.MaxValue() > 1<<20 {
		t.Fatalf("the test server takes %d-byte messages: not a stock server", s.MaxValue())
	}
	data := bytes.Repeat([]byte("media!"), 3<<20/6)
	ctx := context.Background()
	if err := s.PutBlob(ctx, "media-x", data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Partition(1, nil).GetBlob(ctx, "media-x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetBlob: %d bytes, %v", len(got), err)
	}
	if err := s.DeleteBlob(ctx, "media-x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBlob(ctx, "media-x"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// A user's history newest first on JetStream (persist.MessageLog over a partition's view): in
// key-time order whatever order the entries were written in, a page after a cursor too, and
// each window read from the stream's time index instead of the whole week.
func TestHistoryNewestFirst(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "hist"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := s.Partition(1, newOwner(t, s, 1))
	log, outbox := persist.NewMessageLog(v), persist.NewOutbox(v)
	now := time.Now()
	ages := []time.Duration{50 * time.Hour, 10 * time.Minute, 5 * time.Hour, 30 * time.Minute, 3 * time.Minute, 100 * time.Hour, 2 * time.Hour}
	for i, age := range ages { // written now, in this order, each at its own time
		e := domain.OutboxEntry{ID: fmt.Sprintf("m%d", i), UserID: "u", SessionID: "s", CreatedAt: domain.MillisOf(now.Add(-age)),
			Message: domain.Message{To: "1555"}}
		if err := outbox.Accept(context.Background(), &e, ""); err != nil { // its accept record is its history entry
			t.Fatal(err)
		}
	}
	walk := func(cursor string, limit int) (ids []string, next string) {
		err := log.ScanLog("u", domain.LogScan{Cursor: cursor}, func(c string, e domain.LogEntry) (bool, error) {
			ids, next = append(ids, e.ID), c
			return len(ids) < limit, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids, next
	}
	first, next := walk("", 3)
	rest, _ := walk(next, 10)
	if got, want := strings.Join(append(first, rest...), " "), "m4 m1 m3 m6 m2 m0 m5"; got != want {
		t.Fatalf("newest first: %s, want %s", got, want)
	}
}

// The records streams' default (Options.Streams 0) follows the NATS servers when the streams
// are first made: one per server that holds a records stream (its replicas), at most 3; a
// layout once made is kept whatever the servers are later (a cluster made on one server keeps
// its one stream on three, one made with three keeps them on one), since a record's subject
// decides its stream.
func TestStreamsFollowServers(t *testing.T) {
	one := natstest.Start(t)
	open := func(url, prefix string, streams, replicas int) *natskv.Store {
		t.Helper()
		s, err := natskv.Open(context.Background(), natskv.Options{URL: url, Prefix: prefix, Streams: streams, Replicas: replicas, Partitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	want := func(s *natskv.Store, what string, streams, replicas int) {
		t.Helper()
		if s.Streams() != streams || s.Replicas() != replicas {
			t.Fatalf("%s: %d streams of %d replicas, want %d of %d", what, s.Streams(), s.Replicas(), streams, replicas)
		}
	}
	// Options.Existing (`gateway token --store nats`) makes no layout on a prefix without one.
	if _, err := natskv.Open(context.Background(), natskv.Options{URL: one.URL, Prefix: "auto", Existing: true}); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("Existing on a prefix without records streams: %v", err)
	}
	want(open(one.URL, "three", 3, 0), "one server, 3 asked for", 3, 1)
	existing, err := natskv.Open(context.Background(), natskv.Options{URL: one.URL, Prefix: "three", Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { existing.Close() })
	want(existing, "one server, opened with Existing", 3, 1)
	want(open(one.URL, "auto", 0, 0), "one server, the default", 1, 1)
	want(open(one.URL, "auto", 3, 0), "one server, reopened asking for 3", 1, 1)
	want(open(one.URL, "three", 0, 0), "one server, reopened with the default", 3, 1)
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	c := natstest.StartCluster(t, 3)
	want(open(c.URLs(), "auto", 0, 0), "three servers, the default", 3, 3)
	want(open(c.URLs(), "auto", 0, 0), "three servers, reopened", 3, 3)
	want(open(c.URLs(), "r2", 0, 2), "three servers, two replicas", 2, 2)
	want(open(c.URLs(), "r1", 0, 1), "three servers, one replica", 1, 1)
	// A layout made with one stream (as on one server) stays one on three servers.
	want(open(c.URLs(), "was1", 1, 0), "three servers, 1 asked for", 1, 3)
	want(open(c.URLs(), "was1", 0, 0), "three servers, reopened with the default", 1, 3)
}
