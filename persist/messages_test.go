package persist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// walk collects up to n entries of uid's history from s, and the cursor after the last.
func walk(t *testing.T, l *MessageLog, uid string, s domain.LogScan, n int) (ids []string, next string) {
	t.Helper()
	err := l.ScanLog(uid, s, func(c string, e domain.LogEntry) (bool, error) {
		ids = append(ids, e.Dir+":"+e.ID)
		next = c
		return len(ids) < n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, next
}

func TestMessageLog(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			kv := impl.open(t)
			ctx := context.Background()
			base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
			o, w, l := outboxAt(kv, base.Add(time.Hour)), NewWebhooks(kv), NewMessageLog(kv)
			var want []string // oldest first
			for i := range 30 {
				at := base.Add(time.Duration(i) * time.Second)
				// "a/b" and "a" are different users: the escaped prefix keeps them apart.
				for _, uid := range []string{"a/b", "a"} {
					if i%3 == 0 {
						m := domain.InboundMessage{ID: fmt.Sprintf("in%02d", i), UserID: uid, SessionID: "s", From: "1555000", Type: "text", Text: "hi", Timestamp: at}
						if err := w.SaveInbound(ctx, m, nil, nil, nil); err != nil {
							t.Fatal(err)
						}
					} else {
						e := domain.OutboxEntry{ID: fmt.Sprintf("out%02d", i), UserID: uid, SessionID: "s", Status: domain.MsgQueued,
							Message: domain.Message{To: "4915", Kind: domain.KindText, Text: "x"}, CreatedAt: domain.MillisOf(at)}
						if err := o.Accept(ctx, &e, ""); err != nil {
							t.Fatal(err)
						}
					}
				}
				if i%3 == 0 {
					want = append(want, fmt.Sprintf("in:in%02d", i))
				} else {
					want = append(want, fmt.Sprintf("out:out%02d", i))
				}
			}
			newest := slices.Clone(want)
			slices.Reverse(newest)

			// Newest first, 7 at a time, by cursor.
			var got []string
			cur := ""
			for range 10 {
				ids, next := walk(t, l, "a", domain.LogScan{Cursor: cur}, 7)
				got = append(got, ids...)
				if len(ids) < 7 {
					break
				}
				cur = next
			}
			if !slices.Equal(got, newest) {
				t.Fatalf("newest first:\n got %v\nwant %v", got, newest)
			}
			// Oldest first from a time, then on by cursor.
			ids, next := walk(t, l, "a/b", domain.LogScan{Since: base.Add(10 * time.Second)}, 5)
			if !slices.Equal(ids, want[10:15]) {
				t.Fatalf("since: %v, want %v", ids, want[10:15])
			}
			ids, _ = walk(t, l, "a/b", domain.LogScan{Since: base.Add(10 * time.Second), Cursor: next}, 100)
			if !slices.Equal(ids, want[15:]) {
				t.Fatalf("since, next page: %v, want %v", ids, want[15:])
			}
			if ids, _ := walk(t, l, "a/", domain.LogScan{}, 100); len(ids) != 0 {
				t.Fatalf("a user whose id is a prefix of another's sees %v", ids)
			}
			if err := l.ScanLog("a", domain.LogScan{Cursor: "not a cursor"}, func(string, domain.LogEntry) (bool, error) { return true, nil }); !errors.Is(err, domain.ErrBadCursor) {
				t.Fatalf("bad cursor: %v", err)
			}
			// An incoming entry carries the whole message.
			_ = l.ScanLog("a", domain.LogScan{}, func(_ string, e domain.LogEntry) (bool, error) {
				if e.Dir == domain.DirIn && (e.In == nil || e.In.Text != "hi" || e.Peer != "1555000") {
					t.Fatalf("incoming entry %+v", e)
				}
				return true, nil
			})
		})
	}
}

func TestAdoptInbound(t *testing.T) {
	kv := NewMemory()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := NewTable[domain.InboundMessage](kv, inboundTable, recordVersion1)
	for i, at := range []time.Time{now.Add(-time.Hour), now.Add(-8 * 24 * time.Hour)} {
		m := domain.InboundMessage{ID: fmt.Sprintf("m%d", i), From: "1555", Type: "text", Text: "old", Timestamp: at}
		op, err := old.PutTTLOp(fmt.Sprintf("u1\x00%013d\x00m%d", at.UnixMilli(), i), m, domain.InboundRetention)
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Commit(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	l := NewMessageLog(kv)
	n, err := l.AdoptInbound(ctx)
	if err != nil || n != 2 {
		t.Fatalf("AdoptInbound = %d, %v", n, err)
	}
	if ids, _ := walk(t, l, "u1", domain.LogScan{}, 10); !slices.Equal(ids, []string{"in:m0"}) {
		t.Fatalf("adopted: %v (the one past its week is dropped)", ids)
	}
	if n, _ := l.AdoptInbound(ctx); n != 0 {
		t.Fatalf("a second run moved %d", n)
	}
}

// An incoming message is kept once per session: the network sending a session's copy again is
// the same message, and another session of the user's getting it (a group both numbers are
// in) keeps its own copy. A message kept under the user's key of before (one per user) is
// read by id and not kept again.
func TestInboundKeptPerSession(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			kv := impl.open(t)
			ctx := context.Background()
			w, l := NewWebhooks(kv), NewMessageLog(kv)
			at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
			m := domain.InboundMessage{ID: "3EB0GROUP1", UserID: "u", SessionID: "s1", From: "1555", Group: "120363000000000001@g.us",
				Type: "text", Kind: "text", Text: "who brings the cake?", Timestamp: at}
			if err := w.SaveInbound(ctx, m, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := w.SaveInbound(ctx, m, nil, nil, nil); !errors.Is(err, domain.ErrRecordExists) {
				t.Fatalf("the same session's copy again: %v, want ErrRecordExists", err)
			}
			m2 := m
			m2.SessionID = "s2"
			if err := w.SaveInbound(ctx, m2, nil, nil, nil); err != nil {
				t.Fatalf("another session's copy: %v", err)
			}
			if err := w.SaveInbound(ctx, m2, nil, nil, nil); !errors.Is(err, domain.ErrRecordExists) {
				t.Fatalf("the other session's copy again: %v, want ErrRecordExists", err)
			}
			// The user's key of before points at the first copy: a node of the previous release
			// (which checks only that key) does not keep the message again.
			if pos, err := kv.Get(userInboundIDKey("u", m.ID)); err != nil || string(pos) != logPos(at, domain.DirIn, m.ID)+"/s1" {
				t.Fatalf("the user's key: %q %v, want s1's copy's position", pos, err)
			}
			if err := kv.Commit(ctx, IfAbsentOp(userInboundIDKey("u", m.ID)), Op{Key: []byte("previous/release"), Value: []byte("x")}); !errors.Is(err, domain.ErrRecordExists) {
				t.Fatalf("the previous release's save: %v, want ErrRecordExists", err)
			}
			var sessions []string
			_ = l.ScanLog("u", domain.LogScan{}, func(_ string, e domain.LogEntry) (bool, error) {
				sessions = append(sessions, e.ID+"@"+e.SessionID)
				return true, nil
			})
			slices.Sort(sessions)
			if want := []string{"3EB0GROUP1@s1", "3EB0GROUP1@s2"}; !slices.Equal(sessions, want) {
				t.Fatalf("history %v, want %v", sessions, want)
			}
			if in, err := l.Inbound("u", m.ID); err != nil || in.SessionID != "s1" {
				t.Fatalf("by id: %+v %v, want s1's copy", in, err)
			}
			if in, err := l.InboundOf("u", m.ID, "s2"); err != nil || in.SessionID != "s2" {
				t.Fatalf("by id for s2: %+v %v, want s2's copy", in, err)
			}
			if in, err := l.InboundOf("u", m.ID, "s3"); err != nil || in.SessionID != "s1" {
				t.Fatalf("by id for s3, which got none: %+v %v, want s1's copy", in, err)
			}

			// Kept before the key was per session: read, and not kept again.
			pos := logPos(at, domain.DirIn, "OLD1")
			old := m
			old.ID = "OLD1"
			put, err := l.t.PutTTLOp(logUserPrefix("u")+pos, domain.LogEntry{Dir: domain.DirIn, ID: "OLD1", SessionID: "s1", Peer: "1555", At: at, In: &old}, domain.InboundRetention)
			if err != nil {
				t.Fatal(err)
			}
			if err := kv.Commit(ctx, put, Op{Key: userInboundIDKey("u", "OLD1"), Value: []byte(pos), TTL: domain.InboundRetention}); err != nil {
				t.Fatal(err)
			}
			if in, err := l.Inbound("u", "OLD1"); err != nil || in.Text != m.Text {
				t.Fatalf("an old message by id: %+v %v", in, err)
			}
			if err := w.SaveInbound(ctx, old, nil, nil, nil); !errors.Is(err, domain.ErrRecordExists) {
				t.Fatalf("an old message sent again: %v, want ErrRecordExists", err)
			}
			// Ids are exact: "X" is not "X/Y".
			slash := m
			slash.ID = "wamid.X/Y"
			if err := w.SaveInbound(ctx, slash, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Inbound("u", "wamid.X"); !errors.Is(err, domain.ErrRecordNotFound) {
				t.Fatalf("wamid.X found as wamid.X/Y's prefix: %v", err)
			}
			if in, err := l.Inbound("u", "wamid.X/Y"); err != nil || in.ID != "wamid.X/Y" {
				t.Fatalf("wamid.X/Y: %+v %v", in, err)
			}
		})
	}
}
