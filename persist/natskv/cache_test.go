package natskv

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

// TestOwnerCacheBound: the cache keeps at most cacheBytesMax, evicts the oldest written first
// (a subject written again is as new as its last write), and a delete or an over-large value
// leaves nothing behind, however long it runs.
func TestOwnerCacheBound(t *testing.T) {
	c := newOwnerCache()
	value := make([]byte, 1000)
	subject := func(i int) string { return "gw.r.outbox.3." + strconv.Itoa(i) }
	now := time.Now()
	for i := range 2000 {
		c.put(subject(i), uint64(i), value, 0)
		if i%3 == 0 {
			c.put(subject(0), uint64(i), value, 0) // 0 stays the newest but one
		}
		if c.bytes > cacheBytesMax {
			t.Fatalf("after %d puts: %d bytes, more than %d", i, c.bytes, cacheBytesMax)
		}
	}
	if _, ok := c.get(subject(0), now); !ok {
		t.Fatal("a subject written again was evicted as if written once")
	}
	if _, ok := c.get(subject(1), now); ok {
		t.Fatal("the oldest write is still cached")
	}
	if r, ok := c.get(subject(1999), now); !ok || r.seq != 1999 {
		t.Fatalf("the newest write: %+v %v", r, ok)
	}
	c.del(subject(1999))
	c.put(subject(1998), 1, make([]byte, cacheValueMax+1), 0)
	for _, i := range []int{1998, 1999} {
		if _, ok := c.get(subject(i), now); ok {
			t.Fatalf("%d: still cached after a delete or an over-large write", i)
		}
	}
	sum := 0
	for k, e := range c.m {
		sum += len(k) + len(e.value)
	}
	if sum != c.bytes {
		t.Fatalf("bytes counted %d, held %d", c.bytes, sum)
	}
	if len(c.order)-c.head > 2*len(c.m)+64 {
		t.Fatalf("the eviction queue holds %d items for %d entries", len(c.order)-c.head, len(c.m))
	}
	c.put("x", 7, []byte("v"), now.Add(-time.Second).UnixMilli())
	if _, ok := c.get("x", now); ok {
		t.Fatal("an expired entry was answered")
	}
	c.put("y", 8, []byte("v"), 0)
	if r, ok := c.get("y", now); !ok || !bytes.Equal(r.value, []byte("v")) || r.seq != 8 {
		t.Fatalf("y: %+v %v", r, ok)
	}
}

// BenchmarkOwnerCachePut: a partition's cache at its bound, every put a new subject (a
// message's records), as on a node's send path.
func BenchmarkOwnerCachePut(b *testing.B) {
	c := newOwnerCache()
	value := make([]byte, 600)
	subjects := make([]string, 1<<16)
	for i := range subjects {
		subjects[i] = "gw.records.outbox.17.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" + strconv.Itoa(i)
	}
	for i := range subjects[:4096] {
		c.put(subjects[i], uint64(i), value, 0)
	}
	b.ResetTimer()
	for i := range b.N {
		c.put(subjects[i&(1<<16-1)], uint64(i), value, 0)
	}
}

// TestUncachedTables: a fenced view's owner cache keeps none of Options.Uncached's records (a
// message's log record, its outcome) and every other record it writes.
func TestUncachedTables(t *testing.T) {
	s := &Store{prefix: "gw"}
	for _, table := range []string{"msg_log", "outbox_status"} {
		s.uncached = append(s.uncached, string(appendPart(nil, []byte(table), false)))
	}
	v := &View{s: s, cache: newOwnerCache()}
	subject := func(key string) string {
		subj, err := s.subject("3", []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return subj
	}
	keys := []string{"msg_log/u1/0001/out/m1", "session/s1", "outbox_status/m1", "msg_log_x/1"}
	r := &commitReq{}
	for _, k := range keys {
		r.writes = append(r.writes, write{subject: subject(k), value: []byte(k)})
	}
	v.committed(r, 10, time.Now())
	for i, k := range keys {
		got, ok := v.cached(subject(k))
		if want := i == 1 || i == 3; ok != want || (ok && got.seq != uint64(10+i)) {
			t.Errorf("%s: cached %v (seq %d), want cached %v", k, ok, got.seq, want)
		}
	}
}
