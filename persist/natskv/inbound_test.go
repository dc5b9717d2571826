package natskv_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// The history's index of incoming messages is per session on NATS too (its keys are subjects:
// a lookup by id scans the id's own subjects): a session's copy again is refused, another
// session's kept, and an id is not found as the prefix of another ("wamid.X" of "wamid.X/Y").
func TestInboundKeptPerSessionOnNATS(t *testing.T) {
	srv := natstest.Start(t)
	kv, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "in", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	ctx := context.Background()
	w, l := persist.NewWebhooks(kv), persist.NewMessageLog(kv)
	m := domain.InboundMessage{ID: "3EB0GROUP1", UserID: "u", SessionID: "s1", From: "1555", Group: "120363000000000001@g.us",
		Type: "text", Kind: "text", Text: "who brings the cake?", Timestamp: time.Now().UTC().Truncate(time.Millisecond)}
	if err := w.SaveInbound(ctx, m, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.SaveInbound(ctx, m, nil, nil, nil); !errors.Is(err, domain.ErrRecordExists) {
		t.Fatalf("the same session's copy again: %v", err)
	}
	m2 := m
	m2.SessionID = "s2"
	if err := w.SaveInbound(ctx, m2, nil, nil, nil); err != nil {
		t.Fatalf("another session's copy: %v", err)
	}
	var got []string
	if err := l.ScanLog("u", domain.LogScan{}, func(_ string, e domain.LogEntry) (bool, error) {
		got = append(got, e.ID+"@"+e.SessionID)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"3EB0GROUP1@s1", "3EB0GROUP1@s2"}) {
		t.Fatalf("history %v", got)
	}
	if in, err := l.Inbound("u", m.ID); err != nil || in.SessionID != "s1" {
		t.Fatalf("by id: %+v %v", in, err)
	}
	slash := m
	slash.ID = "wamid.X/Y"
	if err := w.SaveInbound(ctx, slash, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inbound("u", "wamid.X"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("wamid.X: %v", err)
	}
	if in, err := l.Inbound("u", "wamid.X/Y"); err != nil || in.ID != "wamid.X/Y" {
		t.Fatalf("wamid.X/Y: %+v %v", in, err)
	}
}
