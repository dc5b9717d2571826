package persist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// testClock is an outbox's clock a test moves.
type testClock struct{ t atomic.Int64 }

func (c *testClock) now() time.Time      { return time.Unix(0, c.t.Load()) }
func (c *testClock) set(t time.Time)     { c.t.Store(t.UnixNano()) }
func (c *testClock) add(d time.Duration) { c.t.Add(int64(d)) }

// bootOutbox is a process's outbox on kv: booted (Pending), on clock.
func bootOutbox(t *testing.T, kv KV, clock *testClock) (*Outbox, []string) {
	t.Helper()
	o := NewOutbox(kv)
	o.now = clock.now
	p, err := o.Pending()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(p))
	for i, e := range p {
		ids[i] = e.ID
	}
	return o, ids
}

func acceptN(t *testing.T, o *Outbox, uid, prefix string, n int, at time.Time) []string {
	t.Helper()
	var ids []string
	for i := range n {
		e := queued(fmt.Sprintf("%s%03d", prefix, i), at)
		e.UserID = uid
		if err := o.Accept(context.Background(), &e, ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

func settleAll(o *Outbox, ids []string) {
	for _, id := range ids {
		e, err := o.Get(id)
		if err != nil {
			panic(err)
		}
		e.SetStatus(domain.MsgSent, e.CreatedAt.Time())
		o.Settle(e, func(error) {})
	}
	o.Flush()
}

// Without a pending mark per message, every boot finds exactly the messages accepted and not
// settled: those accepted since the checkpoint and without an outcome, and the marked ones
// (pending longer than markAfter). The checkpoint moves on; the marks go with their outcomes.
func TestOutboxBootFindsWhatIsPending(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			kv := impl.open(t)
			clock := &testClock{}
			t0 := time.Now().Truncate(time.Millisecond)
			clock.set(t0)
			o, p := bootOutbox(t, kv, clock)
			if len(p) != 0 {
				t.Fatalf("a new outbox has %v pending", p)
			}
			// Two users (one's id a prefix of the other's), some settled, then a crash.
			a := acceptN(t, o, "a", "a", 30, t0)
			b := acceptN(t, o, "a/b", "b", 30, t0.Add(time.Millisecond))
			settleAll(o, a[:10])
			settleAll(o, b[20:])
			want := append(slices.Clone(a[10:]), b[:20]...)
			o, p = bootOutbox(t, kv, clock)
			if !slices.Equal(p, want) {
				t.Fatalf("after a crash, pending:\n%v\nwant\n%v", p, want)
			}
			// Pending long enough to be marked; newer ones accepted after the checkpoint moved.
			clock.add(markAfter + time.Second)
			if err := o.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			marks := 0
			_ = kv.Scan([]byte("outbox_pending/"), func([]byte, []byte) error { marks++; return nil })
			if marks != len(want) {
				t.Fatalf("%d marks, want %d", marks, len(want))
			}
			c := acceptN(t, o, "c", "c", 5, clock.now())
			clock.add(time.Minute)
			if err := o.Checkpoint(); err != nil { // marks c, moves on past them
				t.Fatal(err)
			}
			d := acceptN(t, o, "a", "d", 5, clock.now())
			want = append(want, c...)
			want = append(want, d...)
			o, p = bootOutbox(t, kv, clock)
			if !slices.Equal(p, want) {
				t.Fatalf("after a second crash, pending:\n%v\nwant\n%v", p, want)
			}
			// Every one settled: nothing pending, no mark left.
			settleAll(o, want)
			if _, p = bootOutbox(t, kv, clock); len(p) != 0 {
				t.Fatalf("after every outcome, pending %v", p)
			}
			_ = kv.Scan([]byte("outbox_pending/"), func(k []byte, _ []byte) error {
				t.Errorf("a mark left: %s", k)
				return nil
			})
		})
	}
}

// A clock stepped back never keys an accept before the checkpoint: its time is moved up to the
// outbox's floor, so the next boot finds it.
func TestOutboxClockSteppedBack(t *testing.T) {
	kv := NewMemory()
	clock := &testClock{}
	t0 := time.Now().Truncate(time.Millisecond)
	clock.set(t0)
	o, _ := bootOutbox(t, kv, clock)
	clock.add(time.Minute)
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ckpt, _, err := o.readCheckpoint()
	if err != nil || ckpt < t0.UnixMilli() {
		t.Fatalf("checkpoint %d %v", ckpt, err)
	}
	e := queued("back", t0.Add(-time.Hour)) // the engine's clock an hour behind
	if err := o.Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	if int64(e.CreatedAt) < ckpt || e.History[0].At != e.CreatedAt {
		t.Fatalf("accepted at %d (history %v), the checkpoint is %d", e.CreatedAt, e.History, ckpt)
	}
	if _, p := bootOutbox(t, kv, clock); !slices.Equal(p, []string{"back"}) {
		t.Fatalf("pending after the crash: %v", p)
	}
}

// lostKV stores a commit and then answers it failed (a commit whose answer was lost), or
// refuses it, while armed.
type lostKV struct {
	KV
	lose, refuse atomic.Bool
}

func (l *lostKV) Commit(ctx context.Context, ops ...Op) error {
	if l.refuse.Load() && strings.HasPrefix(string(ops[0].Key), "msg_log/") {
		return fmt.Errorf("%w: refused", domain.ErrStorageUnavailable)
	}
	if err := l.KV.Commit(ctx, ops...); err != nil {
		return err
	}
	if l.lose.Load() && strings.HasPrefix(string(ops[0].Key), "msg_log/") {
		return fmt.Errorf("%w: the answer was lost", domain.ErrStorageUnavailable)
	}
	return nil
}

// An accept that answered an error may be stored all the same: it is found by id meanwhile
// (a retry resumes it), the checkpoint does not move past it until it is read back, and then it
// is marked (stored: the next boot sends it) or forgotten (not stored).
func TestOutboxAcceptThatSeemedToFail(t *testing.T) {
	kv := &lostKV{KV: NewMemory()}
	clock := &testClock{}
	t0 := time.Now().Truncate(time.Millisecond)
	clock.set(t0)
	o, _ := bootOutbox(t, kv, clock)
	kv.lose.Store(true)
	stored := queued("stored", t0)
	if err := o.Accept(context.Background(), &stored, "h1"); err == nil {
		t.Fatal("the lost answer was not an error")
	}
	kv.lose.Store(false)
	kv.refuse.Store(true)
	refused := queued("refused", t0)
	if err := o.Accept(context.Background(), &refused, ""); err == nil {
		t.Fatal("the refusal was not an error")
	}
	kv.refuse.Store(false)
	if e, err := o.Get("stored"); err != nil || e.Status != domain.MsgQueued {
		t.Fatalf("the stored one: %+v %v", e, err)
	}
	if r, err := o.IdemOf("stored"); err != nil || r.BodyHash != "h1" {
		t.Fatalf("its key's record: %+v %v", r, err)
	}
	if _, err := o.Get("refused"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("the refused one: %v", err)
	}
	clock.add(5 * time.Second)
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if ckpt, _, _ := o.readCheckpoint(); ckpt > t0.UnixMilli() {
		t.Fatalf("the checkpoint moved past an accept not read back: %d > %d", ckpt, t0.UnixMilli())
	}
	clock.add(markAfter)
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	_, kept := o.index["refused"]
	o.mu.Unlock()
	if kept {
		t.Fatal("the refused accept is still indexed")
	}
	if _, err := kv.Get(pendingKey("stored")); err != nil {
		t.Fatalf("the stored one's mark: %v", err)
	}
	if ckpt, _, _ := o.readCheckpoint(); ckpt <= t0.UnixMilli() {
		t.Fatalf("the checkpoint did not move on: %d", ckpt)
	}
	if _, p := bootOutbox(t, kv, clock); !slices.Equal(p, []string{"stored"}) {
		t.Fatalf("pending at the next boot: %v", p)
	}
}

// The same id accepted again while pending (a retry racing its first accept) writes the same
// record, not a second one.
func TestOutboxAcceptTwiceOneRecord(t *testing.T) {
	kv := NewMemory()
	clock := &testClock{}
	t0 := time.Now().Truncate(time.Millisecond)
	clock.set(t0)
	o, _ := bootOutbox(t, kv, clock)
	e1, e2 := queued("twice", t0), queued("twice", t0.Add(time.Second))
	for _, e := range []*domain.OutboxEntry{&e1, &e2} {
		if err := o.Accept(context.Background(), e, ""); err != nil {
			t.Fatal(err)
		}
	}
	if e2.CreatedAt != e1.CreatedAt {
		t.Fatalf("the second accept keyed at %d, the first at %d", e2.CreatedAt, e1.CreatedAt)
	}
	n := 0
	_ = kv.Scan([]byte("msg_log/"), func([]byte, []byte) error { n++; return nil })
	if n != 1 {
		t.Fatalf("%d accept records", n)
	}
}

// Badger's group scan (a seek per group) reads what a scan of the whole prefix does.
func TestScanGroupsFrom(t *testing.T) {
	b := openTestBadger(t, t.TempDir(), FsyncInterval)
	m := NewMemory()
	var ops []Op
	for _, uid := range []string{"a", "a%2Fb", "b", "zz"} {
		for ms := range 20 {
			ops = append(ops, Op{Key: fmt.Appendf(nil, "msg_log/%s/%013d/out/m%d", uid, 1000+ms*10, ms), Value: []byte{3}})
		}
	}
	ops = append(ops, Op{Key: []byte("msg_log/noslash"), Value: []byte{1}}, Op{Key: []byte("msg_lox/a/0000000001100/out/x"), Value: []byte{3}})
	for _, kv := range []KV{b, m} {
		if err := kv.Commit(context.Background(), ops...); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range []string{"0000000001095", "0000000001100", "0000000000000", "9"} {
		var got, want []string
		if err := b.ScanGroupsFrom([]byte("msg_log/"), []byte(from), func(k, _ []byte) error { got = append(got, string(k)); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := scanGroupsFrom(m, []byte("msg_log/"), []byte(from), func(k, _ []byte) error { want = append(want, string(k)); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || (from == "0000000001100" && len(got) != 4*10) {
			t.Fatalf("from %s:\n%v\nwant\n%v", from, got, want)
		}
	}
}
