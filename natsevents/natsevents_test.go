package natsevents_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/natsevents"
	"github.com/gateway/gateway/persist/natstest"
)

func event(i int, uid string) domain.EventRecord {
	return domain.EventRecord{Seq: uint64(i), ID: fmt.Sprintf("evt_%016x%08d", i, i), UserID: uid, Type: domain.EventMessageStatus,
		Body: fmt.Appendf(nil, `{"type":"message.status","timestamp":"2026-03-01T09:30:00.000Z","data":{"n":%d}}`, i)}
}

func open(t *testing.T, o natsevents.Options) *natsevents.Publisher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := natsevents.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// all reads every message of stream from its start, and checks the stream holds want.
func all(t *testing.T, url, stream string, want int) []jetstream.Msg {
	t.Helper()
	out := natstest.Messages(t, url, stream, jetstream.OrderedConsumerConfig{})
	if len(out) != want {
		t.Fatalf("stream holds %d messages, want %d", len(out), want)
	}
	return out
}

// Forward makes the stream (7 days, the de-duplication window), publishes each event on
// <prefix>.<user>.<type> with its id as Nats-Msg-Id, and a second copy of an id is dropped.
func TestForward(t *testing.T) {
	srv := natstest.Start(t)
	p := open(t, natsevents.Options{URL: srv.URL, Prefix: "acme.events"})
	if p.Stream() != "acme_events" {
		t.Fatalf("stream %q", p.Stream())
	}
	var evs []domain.EventRecord
	for i := range 10 {
		evs = append(evs, event(i+1, "user.one"))
	}
	if n, err := p.Forward(context.Background(), evs); n != 10 || err != nil {
		t.Fatalf("Forward = %d, %v", n, err)
	}
	// The last page again (a restart before the outbox forgot it): stored once.
	if n, err := p.Forward(context.Background(), evs[5:]); n != 5 || err != nil {
		t.Fatalf("Forward again = %d, %v", n, err)
	}
	msgs := all(t, srv.URL, "acme_events", 10)
	for i, m := range msgs {
		if m.Subject() != "acme.events.user%2Eone.message.status" || m.Headers().Get("Nats-Msg-Id") != evs[i].ID || m.Headers().Get("Gateway-Event-Id") != evs[i].ID ||
			string(m.Data()) != string(evs[i].Body) || m.Headers().Get("Gateway-User-Id") != "user.one" {
			t.Fatalf("message %d: %s %v %s", i, m.Subject(), m.Headers(), m.Data())
		}
	}
	nc, _ := nats.Connect(srv.URL)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, _ := js.Stream(context.Background(), "acme_events")
	cfg := st.CachedInfo().Config
	if cfg.MaxAge != 7*24*time.Hour || cfg.Duplicates != natsevents.Duplicates || cfg.Subjects[0] != "acme.events.>" {
		t.Fatalf("stream config %+v", cfg)
	}
}

// A server that is down fails a publish at once (the events stay in the caller's outbox), and
// neither a start while it is down nor its return needs anything but the next publish.
func TestServerDown(t *testing.T) {
	srv := natstest.Start(t)
	srv.Stop()
	start := time.Now()
	p := open(t, natsevents.Options{URL: srv.URL, Timeout: 2 * time.Second})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Open waited %v for a server that is down", took)
	}
	start = time.Now()
	if n, err := p.Forward(context.Background(), []domain.EventRecord{event(1, "u1")}); n != 0 || err == nil {
		t.Fatalf("Forward while down = %d, %v", n, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Forward while down took %v", took)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := p.Forward(context.Background(), []domain.EventRecord{event(1, "u1"), event(2, "u1")})
		if err == nil && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Forward after the restart = %d, %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Down again with the stream made: the same.
	srv.Stop()
	if _, err := p.Forward(context.Background(), []domain.EventRecord{event(3, "u1")}); err == nil {
		t.Fatal("Forward to a stopped server succeeded")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		if n, err := p.Forward(context.Background(), []domain.EventRecord{event(3, "u1")}); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no publish after the second restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	all(t, srv.URL, "gateway_events", 3)
}

// What waiting does not cure fails Open: a prefix whose subjects another stream captures (the
// records stream of --store nats on the same server, with the default prefixes), a stream of
// that name on other subjects, a prefix NATS does not take.
func TestOpenRefusals(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "gateway_records", Subjects: []string{"gateway.*.*.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "other", Subjects: []string{"elsewhere.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []natsevents.Options{
		{URL: srv.URL}, // gateway.events.> overlaps gateway.*.*.>
		{URL: srv.URL, Prefix: "other"},
		{URL: srv.URL, Prefix: "a.*"},
		{URL: srv.URL, Prefix: "a..b"},
		{URL: srv.URL, Prefix: "$JS.x"},
	} {
		_, err := natsevents.Open(ctx, o)
		if !errors.Is(err, natsevents.ErrConfig) {
			t.Errorf("Open(%q) = %v, want ErrConfig", o.Prefix, err)
		}
	}
	// Outside the records' subjects it works beside them.
	p := open(t, natsevents.Options{URL: srv.URL, Prefix: "events.gateway"})
	if n, err := p.Forward(ctx, []domain.EventRecord{event(1, "u1")}); n != 1 || err != nil {
		t.Fatalf("Forward = %d, %v", n, err)
	}
}

func TestToken(t *testing.T) {
	for uid, want := range map[string]string{
		"u1": "u1", "auth0|5f7c8ec7": "auth0|5f7c8ec7", "a.b": "a%2Eb", "a b": "a%20b", "50%": "50%25",
		"x*y>z": "x%2Ay%3Ez", "é": "%C3%A9", "": "%00",
	} {
		if got := natsevents.Token(uid); got != want {
			t.Errorf("Token(%q) = %q, want %q", uid, got, want)
		}
	}
	if got := natsevents.Subject("gateway.events", "u.1", domain.EventSessionStatus); got != "gateway.events.u%2E1.session.status" {
		t.Fatalf("Subject = %q", got)
	}
}
