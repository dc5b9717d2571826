package persist

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

func queued(id string, at time.Time) domain.OutboxEntry {
	e := domain.OutboxEntry{ID: id, SessionID: "s1", UserID: "u1", Message: domain.Message{ID: id, To: "491511234567", Kind: domain.KindText, Text: "hi"}, CreatedAt: domain.MillisOf(at)}
	e.SetStatus(domain.MsgQueued, at)
	return e
}

// outboxAt returns an outbox over kv whose clock reads at: a test's fixed dates stay the
// outbox's present whatever day it runs. With the real clock, messages dated 2026-11-23 took
// the outcome's body-renewal path from 2026-11-30 on (a week later), and two tests failed in CI.
func outboxAt(kv KV, at time.Time) *Outbox {
	o := NewOutbox(kv)
	o.now = func() time.Time { return at }
	return o
}

// Outcomes and receipts go through the background writer: every one lands, each caller is
// answered once, and a receipt queued behind its outcome ends up in the same record.
func TestOutboxBackgroundWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	o := outboxAt(NewMemory(), t0.Add(time.Minute))
	ctx := context.Background()
	const n = 700 // more than one batch
	var answered, failed atomic.Int64
	done := func(err error) {
		answered.Add(1)
		if err != nil {
			failed.Add(1)
		}
	}
	for i := range n {
		e := queued(fmt.Sprintf("m%04d", i), t0)
		if err := o.Accept(ctx, &e, ""); err != nil {
			t.Fatal(err)
		}
		e.SetStatus(domain.MsgSent, t0.Add(time.Second))
		o.Settle(e, done)
		o.Receipt(e.ID, domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(t0.Add(2 * time.Second))}, done)
	}
	o.Flush()
	if got := answered.Load(); got != 2*n || failed.Load() != 0 {
		t.Fatalf("answered %d (failed %d), want %d", got, failed.Load(), 2*n)
	}
	if p, err := o.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after flush: %d, %v", len(p), err)
	}
	for i := range n {
		e, err := o.Get(fmt.Sprintf("m%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		var got []domain.MessageStatus
		for _, c := range e.History {
			got = append(got, c.Status)
		}
		if e.Status != domain.MsgDelivered || fmt.Sprint(got) != "[queued sent delivered]" {
			t.Fatalf("%s: status %s, history %v", e.ID, e.Status, got)
		}
	}
}

// failingKV refuses any commit that writes a key containing bad.
type failingKV struct {
	KV
	bad []byte
}

func (f failingKV) Commit(ctx context.Context, ops ...Op) error {
	for _, op := range ops {
		if bytes.Contains(op.Key, f.bad) {
			return errors.New("refused")
		}
	}
	return f.KV.Commit(ctx, ops...)
}

// A write the store refuses fails alone: the others of its batch land.
func TestOutboxBackgroundWriteFailsAlone(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	o := outboxAt(failingKV{NewMemory(), []byte("bad")}, t0.Add(time.Minute))
	ctx := context.Background()
	errs := map[string]*atomic.Value{}
	for _, id := range []string{"good1", "bad", "good2"} {
		e := queued(id, t0)
		if id != "bad" {
			if err := o.Accept(ctx, &e, ""); err != nil {
				t.Fatal(err)
			}
		}
		e.SetStatus(domain.MsgSent, t0)
		v := &atomic.Value{}
		errs[id] = v
		o.Settle(e, func(err error) { v.Store(fmt.Sprint(err)) })
	}
	o.Flush()
	for id, v := range errs {
		want := "<nil>"
		if id == "bad" {
			want = "refused"
		}
		if got := v.Load(); got != want {
			t.Fatalf("%s: answered %v, want %s", id, got, want)
		}
		if id != "bad" {
			if e, err := o.Get(id); err != nil || e.Status != domain.MsgSent {
				t.Fatalf("%s: %+v %v", id, e, err)
			}
		}
	}
}

// recordingKV notes every op it commits.
type recordingKV struct {
	KV
	mu  sync.Mutex
	ops []Op
}

func (r *recordingKV) Commit(ctx context.Context, ops ...Op) error {
	r.mu.Lock()
	for _, op := range ops {
		r.ops = append(r.ops, Op{Key: slices.Clone(op.Key), Value: slices.Clone(op.Value), Delete: op.Delete, TTL: op.TTL})
	}
	r.mu.Unlock()
	return r.KV.Commit(ctx, ops...)
}

// A message costs two records: its accept record (the body, listed by the history) and its
// outcome, which carries where the body is; a receipt after the outcome's commit is a small
// record of its own. Nothing but the accept record carries the text.
func TestOutboxTwoRecordsPerMessage(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			rec := &recordingKV{KV: impl.open(t)}
			o := NewOutbox(rec)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Millisecond)
			e := queued("m1", now)
			e.Message.Text = strings.Repeat("the body of the message ", 10)
			if err := o.Accept(ctx, &e, "5e88489"); err != nil {
				t.Fatal(err)
			}
			e.SetStatus(domain.MsgSent, now.Add(time.Second))
			e.NetworkID, e.Attempts = "net1", 1
			o.Settle(e, func(err error) {
				if err != nil {
					t.Error(err)
				}
			})
			o.Flush()
			o.Receipt(e.ID, domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(now.Add(3 * time.Second))}, func(error) {})
			o.Flush()
			var shape []string
			bodies := 0
			for _, op := range rec.ops {
				k := string(op.Key)
				if bytes.Contains(op.Value, []byte("the body of the message")) {
					bodies++
				}
				switch {
				case op.Delete:
					shape = append(shape, "del "+k)
				default:
					shape = append(shape, fmt.Sprintf("put %s ttl=%v", k, op.TTL))
				}
				if !strings.HasPrefix(k, "msg_log/") && len(op.Value) > 200 {
					t.Errorf("%s: %d bytes, want a small record", k, len(op.Value))
				}
			}
			want := []string{fmt.Sprintf("put msg_log/u1/%013d/out/m1 ttl=336h0m0s", now.UnixMilli()),
				"put outbox_status/m1 ttl=168h0m0s", "put outbox_receipt/m1/read ttl=168h0m0s"}
			if fmt.Sprint(shape) != fmt.Sprint(want) || bodies != 1 {
				t.Fatalf("writes:\n%s\nwant:\n%s\n(%d with the body)", strings.Join(shape, "\n"), strings.Join(want, "\n"), bodies)
			}
			for _, o := range []*Outbox{o, NewOutbox(rec)} { // this process, and the next
				got, err := o.Get("m1")
				if err != nil {
					t.Fatal(err)
				}
				var hist []string
				for _, c := range got.History {
					hist = append(hist, c.Status)
				}
				if got.Status != domain.MsgRead || got.NetworkID != "net1" || got.Attempts != 1 || got.Message.Text != e.Message.Text ||
					fmt.Sprint(hist) != "[queued sent read]" {
					t.Fatalf("read back: %+v", got)
				}
				if r, err := o.IdemOf("m1"); err != nil || r.BodyHash != "5e88489" || r.MessageID != "m1" {
					t.Fatalf("the key's record: %+v %v", r, err)
				}
			}
		})
	}
}

// A message reads as queued while its mark stands, and as not found once its outcome expired
// (its body lives longer than the outcome).
func TestOutboxGetAsItStands(t *testing.T) {
	kv := NewMemory()
	o := NewOutbox(kv)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := o.Accept(ctx, ptr(queued("m1", now)), ""); err != nil {
		t.Fatal(err)
	}
	if e, err := o.Get("m1"); err != nil || e.Status != domain.MsgQueued {
		t.Fatalf("queued: %+v %v", e, err)
	}
	if _, err := o.Get("nope"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	e := queued("m1", now)
	e.SetStatus(domain.MsgFailed, now)
	e.Code, e.Error = "network_error", "boom"
	o.Settle(e, func(error) {})
	o.Flush()
	if got, err := o.Get("m1"); err != nil || got.Status != domain.MsgFailed || got.Code != "network_error" {
		t.Fatalf("failed: %+v %v", got, err)
	}
	// The outcome expires (here: removed) while the body still lives: gone.
	if err := kv.Commit(ctx, Op{Key: []byte("outbox_status/m1"), Delete: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Get("m1"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("after its outcome expired: %v", err)
	}
}

// An outbox written by an earlier version (the pending entry whole; the body with a pending
// mark; the outcome as the whole entry again) reads the same, and Pending moves its pending
// entries to this layout.
func TestOutboxReadsTheOlderLayout(t *testing.T) {
	kv := NewMemory()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := NewTable[domain.OutboxEntry](kv, "outbox_pending", 1)
	if err := old.Put(ctx, "p1", queued("p1", now)); err != nil {
		t.Fatal(err)
	}
	// Version 2: the body at outbox/<id> and a mark of the body's expiry.
	p2 := queued("p2", now.Add(time.Millisecond))
	v2 := body{ID: p2.ID, SessionID: p2.SessionID, UserID: p2.UserID, Message: p2.Message, CreatedAt: p2.CreatedAt}
	v2.Message.ID = ""
	bv2, err := Encode(bodyVersion2, v2)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit(ctx, Op{Key: []byte("outbox/p2"), Value: bv2}, Op{Key: []byte("outbox_pending/p2"),
		Value: binary.BigEndian.AppendUint64([]byte{pendingMarkV2}, uint64(now.Add(bodyTTL).Unix()))}); err != nil {
		t.Fatal(err)
	}
	done := queued("d1", now)
	done.SetStatus(domain.MsgSent, now)
	if err := NewTable[domain.OutboxEntry](kv, "outbox", 1).Put(ctx, "d1", done); err != nil {
		t.Fatal(err)
	}
	if err := NewTable[domain.StatusChange](kv, "outbox_receipt", 1).Put(ctx, "d1/delivered", domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(now)}); err != nil {
		t.Fatal(err)
	}
	o := NewOutbox(kv)
	if e, err := o.Get("d1"); err != nil || e.Status != domain.MsgDelivered {
		t.Fatalf("an older outcome: %+v %v", e, err)
	}
	if e, err := o.Get("p2"); err != nil || e.Status != domain.MsgQueued || e.Message.Text != "hi" {
		t.Fatalf("an older pending body: %+v %v", e, err)
	}
	p, err := o.Pending()
	if err != nil || len(p) != 2 || p[0].ID != "p1" || p[1].ID != "p2" || p[0].Message.Text != "hi" || p[1].Message.Text != "hi" {
		t.Fatalf("pending: %+v %v", p, err)
	}
	for _, id := range []string{"p1", "p2"} {
		mark, err := kv.Get([]byte("outbox_pending/" + id))
		if err != nil || mark[0] != pendingMarkV3 {
			t.Fatalf("%s: mark after the move: %q %v", id, mark, err)
		}
		if _, err := kv.Get([]byte("outbox/" + id)); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("%s: the older body stays: %v", id, err)
		}
		// Another process (not booted) finds it by its mark.
		if e, err := NewOutbox(kv).Get(id); err != nil || e.Status != domain.MsgQueued {
			t.Fatalf("%s: moved entry: %+v %v", id, e, err)
		}
	}
	for _, sent := range p {
		sent.SetStatus(domain.MsgSent, now)
		o.Settle(sent, func(error) {})
	}
	o.Flush()
	if p, err := NewOutbox(kv).Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after the outcome: %+v %v", p, err)
	}
	if _, err := kv.Get([]byte("outbox_pending/p1")); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("the mark stays after the outcome: %v", err)
	}
}

// A marked body close to its expiry is written again while its message is queued; at boot a
// mark whose body is gone is dropped (and logged) instead of failing the boot.
func TestOutboxRenewsQueuedBodies(t *testing.T) {
	kv := NewMemory()
	o := NewOutbox(kv)
	ctx := context.Background()
	now := time.Now()
	clock := now
	o.now = func() time.Time { return clock }
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := o.Accept(ctx, ptr(queued(id, now)), ""); err != nil {
			t.Fatal(err)
		}
	}
	clock = now.Add(markAfter + time.Second)
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit(ctx, Op{Key: acceptKey("u1", now.UnixMilli(), "b"), Delete: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := o.Renew(); err != nil || n != 0 {
		t.Fatalf("Renew with fresh bodies: %d %v", n, err)
	}
	clock = now.Add(bodyTTL - renewBelow + time.Hour) // less than renewBelow left
	if n, err := o.Renew(); err != nil || n != 1 {
		t.Fatalf("renewed %d, %v", n, err)
	}
	mark, err := kv.Get([]byte("outbox_pending/a"))
	if err != nil {
		t.Fatal(err)
	}
	if exp := time.Unix(int64(binary.BigEndian.Uint64(mark[1:9])), 0); exp.Before(clock.Add(bodyTTL - time.Minute)) {
		t.Fatalf("renewed body expires %v, want about %v", exp, clock.Add(bodyTTL))
	}
	p, err := NewOutbox(kv).Pending()
	if err != nil || len(p) != 1 || p[0].ID != "a" {
		t.Fatalf("pending: %+v, %v", p, err)
	}
	if _, err := kv.Get([]byte("outbox_pending/b")); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("mark of the expired body: %v", err)
	}
}

func TestAccountSnapshotRoundTrip(t *testing.T) {
	a := NewAccounts(NewMemory())
	for _, uid := range []string{"alice", `we"ird\id` + "\n\x01é\xff"} {
		want := domain.Allowance{UserID: uid, Period: "2026-11", Sent: 12345, Mark: 67890}
		if err := a.PutAccount(context.Background(), want); err != nil {
			t.Fatal(err)
		}
		got, err := a.GetAccount(uid)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(uid, "\xff") && got != want {
			t.Fatalf("read back %+v, want %+v", got, want)
		}
		if strings.Contains(uid, "\xff") && (got.Sent != want.Sent || got.Mark != want.Mark || got.Period != want.Period) {
			t.Fatalf("read back %+v", got)
		}
	}
}

// The outcome and accept records written by hand read back as their JSON types, and an accept
// record as its history entry.
func TestHandWrittenRecordsDecode(t *testing.T) {
	e := domain.OutboxEntry{ID: "m1", UserID: "u/1", Status: domain.MsgFailed, NetworkID: "n\"1", LID: "12345", SentAt: 17, Code: "network_error",
		Error: "boom\n\"quoted\"", Attempts: 2, UpdatedAt: 42, CreatedAt: 1764000000123,
		History: []domain.StatusChange{{Status: domain.MsgQueued, At: 10}, {Status: domain.MsgSent, At: 20}, {Status: domain.MsgFailed, At: 42}}}
	c := outcome{Status: domain.MsgFailed, NetworkID: "n\"1", LID: "12345", SentAt: 17, Code: "network_error", Error: "boom\n\"quoted\"", Attempts: 2, UpdatedAt: 42,
		History: []step{{domain.MsgSent, 20}, {domain.MsgFailed, 42}}, Pos: "u%2F1/1764000000123"}
	var back outcome
	if _, err := Decode(appendOutcome(nil, &e), statusVersion2, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", back) != fmt.Sprintf("%+v", c) {
		t.Fatalf("outcome read back as %+v, want %+v", back, c)
	}
	// A user id with what JSON escapes (escaped for the path first), and a scheduled message's
	// first step, which the body holds.
	for _, uid := range []string{"a\"b\\c<&>", "\xff\x01é"} {
		e := domain.OutboxEntry{ID: "m2", UserID: uid, Status: domain.MsgSent, UpdatedAt: 1, CreatedAt: 5,
			History: []domain.StatusChange{{Status: domain.MsgScheduled, At: 1}, {Status: domain.MsgSent, At: 2}}}
		var back outcome
		if _, err := Decode(appendOutcome([]byte("prefix"), &e)[len("prefix"):], statusVersion2, &back); err != nil {
			t.Fatal(err)
		}
		if back.Pos != posOf(uid, 5) || len(back.History) != 1 || back.History[0] != (step{domain.MsgSent, 2}) {
			t.Fatalf("uid %q: outcome read back as %+v, want pos %q and one step", uid, back, posOf(uid, 5))
		}
	}
	// The accept record's key, written in one array with its record, is the key its pos names.
	for _, uid := range []string{"u1", "a/b c", "\xff\"é"} {
		if got, want := string(acceptKey(uid, 1764000000123, "m3")), string(acceptKeyAt(posOf(uid, 1764000000123), "m3")); got != want {
			t.Fatalf("accept key %q, want %q", got, want)
		}
	}
	var short outcome
	if _, err := Decode(appendOutcome(nil, &domain.OutboxEntry{Status: domain.MsgSent, UpdatedAt: 1}), statusVersion2, &short); err != nil || short.Status != domain.MsgSent || short.UpdatedAt != 1 {
		t.Fatalf("short outcome: %+v %v", short, err)
	}
	o := NewOutbox(NewMemory())
	for _, k := range []domain.Kind{domain.KindText, domain.KindReaction} {
		op, err := o.acceptOp(context.Background(), domain.OutboxEntry{ID: "m1", UserID: "u", SessionID: `s"1`, Message: domain.Message{To: "4915", Kind: k}, CreatedAt: 1764000000123}, "")
		if err != nil {
			t.Fatal(err)
		}
		e, listed, err := decodeLog(op.Key[len("msg_log/u/"):], op.Value)
		if err != nil || e.SessionID != `s"1` || e.Peer != "4915" || e.ID != "m1" || e.Dir != domain.DirOut || e.At.UnixMilli() != 1764000000123 || listed != (k == domain.KindText) {
			t.Fatalf("%s: history entry read back as %+v %v %v", k, e, listed, err)
		}
		if id, pos, ok := acceptOfKey(op.Key); !ok || id != "m1" || pos != "u/1764000000123" {
			t.Fatalf("key %q read as %q %q %v", op.Key, id, pos, ok)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// blobKV is a KV with large values kept apart (what persist/natskv's object store is to the
// records stream), counting what goes where.
type blobKV struct {
	*Memory
	mu      sync.Mutex
	objects map[string][]byte
	puts    int
}

func (b *blobKV) PutBlob(_ context.Context, name string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[name] = slices.Clone(data)
	b.puts++
	return nil
}

func (b *blobKV) GetBlob(_ context.Context, name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.objects[name]
	if !ok {
		return nil, domain.ErrRecordNotFound
	}
	return slices.Clone(d), nil
}

func (b *blobKV) DeleteBlob(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, name)
	return nil
}

// Media over BlobMin on a store that keeps large values apart: the body record holds a
// reference (it stays small), and the message reads back whole (Get, Pending) from the object.
// Small media stays in the record.
func TestOutboxMediaApart(t *testing.T) {
	kv := &blobKV{Memory: NewMemory(), objects: map[string][]byte{}}
	o := NewOutbox(kv)
	ctx := context.Background()
	now := time.Now()
	big, small := queued("big", now), queued("small", now)
	big.Message.Kind, big.Message.Data = domain.KindImage, bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB
	small.Message.Kind, small.Message.Data = domain.KindImage, []byte("tiny image")
	for _, e := range []domain.OutboxEntry{big, small} {
		if err := o.Accept(ctx, &e, ""); err != nil {
			t.Fatal(err)
		}
	}
	if kv.puts != 1 || len(kv.objects["media-big"]) != len(big.Message.Data) {
		t.Fatalf("%d objects put (%v), want the big media's only", kv.puts, len(kv.objects))
	}
	rec, err := kv.Get(acceptKey(big.UserID, int64(big.CreatedAt), big.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) > 4<<10 || !bytes.Contains(rec, []byte(`"dataRef":"media-big"`)) {
		t.Fatalf("the big message's body record: %d bytes, %.200q", len(rec), rec)
	}
	for _, e := range []domain.OutboxEntry{big, small} {
		got, err := o.Get(e.ID)
		if err != nil || !bytes.Equal(got.Message.Data, e.Message.Data) {
			t.Fatalf("Get(%s): %d bytes of media, %v; want %d", e.ID, len(got.Message.Data), err, len(e.Message.Data))
		}
	}
	pending, err := o.Pending()
	if err != nil || len(pending) != 2 {
		t.Fatalf("Pending: %d, %v", len(pending), err)
	}
	for _, e := range pending {
		if want := map[string]int{"big": len(big.Message.Data), "small": len(small.Message.Data)}[e.ID]; len(e.Message.Data) != want {
			t.Fatalf("pending %s: %d bytes of media, want %d", e.ID, len(e.Message.Data), want)
		}
	}
	// Its object gone (expired), the message says so instead of sending without its media.
	delete(kv.objects, "media-big")
	if _, err := o.Get("big"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("Get without its media object: %v", err)
	}
}

// A failure the network reported while the send was in doubt (a receipt of status failed,
// with its code), queued just behind its outcome, is folded into the outcome's record with its
// code and error, as a read lays it when it is its own record: folded without them, a kill -9
// before the engine's own failed outcome lands kept a failed message that says not why.
func TestOutboxFoldedFailureKeepsItsCode(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	o := outboxAt(NewMemory(), t0.Add(time.Minute))
	e := queued("mfail", t0)
	if err := o.Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	e.SetStatus(domain.MsgSent, t0.Add(time.Second))
	failed := domain.StatusChange{Status: domain.MsgFailed, At: domain.MillisOf(t0.Add(2 * time.Second)),
		Code: "outside_service_window", Error: "outside the 24 h service window"}
	var answered atomic.Int32
	done := func(err error) {
		if err != nil {
			t.Error(err)
		}
		answered.Add(1)
	}
	// One batch, the receipt behind its outcome (the background writer's gather).
	kept, parts := o.prepareBatch([]bgWrite{{id: e.ID, entry: settleOf(&e), done: done}, {id: e.ID, receipt: failed, done: done}}, false)
	if len(kept) != 1 {
		t.Fatalf("%d writes kept, want the receipt folded into the outcome", len(kept))
	}
	for _, p := range parts {
		o.finishPart(kept, p, o.kv.Commit(context.Background(), p.ops...))
	}
	if answered.Load() != 2 {
		t.Fatalf("%d answered, want 2", answered.Load())
	}
	got, err := o.Get(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.MsgFailed || got.Code != failed.Code || got.Error != failed.Error {
		t.Fatalf("status %s code %q error %q, want failed with the receipt's code and error", got.Status, got.Code, got.Error)
	}
}
