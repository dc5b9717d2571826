package main

// Events on NATS JetStream (DESIGN.md section 20, --events-nats), on the real binary: a single
// node (Badger, or the test store) publishes every event to a NATS server of its own, through
// a NATS outage and a kill -9.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/persist/natstest"
)

// streamMsg is one message of the events stream.
type streamMsg struct {
	subject, id, text string
	message, status   string // message.status
	at                time.Time
}

// readStream reads the events stream from its start with an ordered consumer started now (or
// from since, when set).
func readStream(t *testing.T, url, stream string, since time.Time) []streamMsg {
	t.Helper()
	var cfg jetstream.OrderedConsumerConfig
	if !since.IsZero() {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since}
	}
	var out []streamMsg
	for _, m := range natstest.Messages(t, url, stream, cfg) {
		var body struct {
			Type string `json:"type"`
			Data struct {
				Text      string `json:"text"`
				MessageID string `json:"messageId"`
				Status    string `json:"status"`
			} `json:"data"`
		}
		if err := json.Unmarshal(m.Data(), &body); err != nil {
			t.Fatalf("message %s: %v", m.Data(), err)
		}
		meta, _ := m.Metadata()
		out = append(out, streamMsg{subject: m.Subject(), id: m.Headers().Get("Nats-Msg-Id"), text: body.Data.Text,
			message: body.Data.MessageID, status: body.Data.Status, at: meta.Timestamp})
	}
	return out
}

// subjectLen is how many messages the stream holds on subject (0 while it does not exist).
func subjectLen(url, stream, subject string) int {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0
	}
	return int(info.State.Subjects[subject])
}

// inboundMany has customers write n messages to the session, texts prefix0..prefix<n-1>, from
// four writers at once.
func (tg *testGW) inboundMany(session, prefix string, n int) {
	tg.t.Helper()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				r := tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": session, "from": fmt.Sprintf("1555030%04d", i%50), "text": fmt.Sprintf("%s%d", prefix, i)})
				if r.status != 200 {
					tg.t.Errorf("inbound %d: %d %s", i, r.status, r.raw)
					return
				}
			}
		})
	}
	wg.Wait()
}

// inboundUntilFails is inboundMany from one writer that stops at the first refusal or error (the
// gateway was killed): it returns how many were accepted.
func inboundUntilFails(url, session, prefix string, n int) int {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		body := fmt.Sprintf(`{"sessionId":%q,"from":"1555030%04d","text":"%s%d"}`, session, i%50, prefix, i)
		res, err := client.Post(url+"/api/dev/sim/inbound", "application/json", strings.NewReader(body))
		if err != nil {
			return i
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return i
		}
	}
	return n
}

// keptTexts lists the texts of the incoming messages the history holds (each is kept in the
// commit that queues its message.received event).
func (tg *testGW) keptTexts(tok string) []string {
	tg.t.Helper()
	var out []string
	cursor := ""
	for {
		r := tg.do("GET", "/api/client/messages?direction=in&limit=1000&cursor="+cursor, bearerAuth(tok), nil)
		want(tg.t, r, 200, "")
		for _, m := range r.obj()["messages"].([]any) {
			out = append(out, m.(map[string]any)["text"].(string))
		}
		next, _ := r.obj()["next"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// A consumer started after 1,000 events replays all of them from the stream's start, each once
// by id, and from a time the events since it. A NATS server that is down blocks no send and
// fails none, nor the gateway's start: events wait in the outbox, through a kill -9 of the
// gateway, and go when it is back; a kill -9 between commits and publishes loses none, and a
// repeat carries the same Nats-Msg-Id, which JetStream drops.
func TestEventsOnJetStream(t *testing.T) {
	sideBySide(t)
	ns := natstest.Start(t)
	const prefix, stream = "acme.events", "acme_events"
	received, statusSubject := prefix+".alice.message.received", prefix+".alice.message.status"
	data := t.TempDir()
	args := []string{"--events-nats", ns.URL, "--events-subject-prefix", prefix}
	p := startProc(t, data, args...)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	// 1,002 events: 334 messages sent (by eight senders at once), each queued, sent, delivered.
	var mu sync.Mutex
	sent := map[string]bool{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 334; i += 8 {
				r := tg.with(t).do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": fmt.Sprintf("1555031%04d", i), "message": "m"})
				if r.status != 200 {
					t.Errorf("send %d: %d %s", i, r.status, r.raw)
					return
				}
				mu.Lock()
				sent[r.str("message_id")] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(sent) != 334 {
		t.Fatalf("%d messages sent", len(sent))
	}
	eventually(t, 60*time.Second, "1,002 message.status events on the stream", func() bool { return subjectLen(ns.URL, stream, statusSubject) == 1002 })
	// A consumer started now replays them from the stream's start.
	msgs := readStream(t, ns.URL, stream, time.Time{})
	ids := map[string]bool{}
	steps := map[string]int{}
	var statuses []streamMsg
	for _, m := range msgs {
		if ids[m.id] || m.id == "" {
			t.Fatalf("id %q twice (or none) on the stream", m.id)
		}
		ids[m.id] = true
		if m.subject == statusSubject {
			steps[m.message+"/"+m.status]++
			statuses = append(statuses, m)
		}
	}
	for id := range sent {
		for _, st := range []string{"queued", "sent", "delivered"} {
			if n := steps[id+"/"+st]; n != 1 {
				t.Fatalf("%s %s is on the stream %d times", id, st, n)
			}
		}
	}
	// From a time: the events stored since then.
	later := readStream(t, ns.URL, stream, statuses[500].at)
	if later[0].id != statuses[500].id || len(later) < 502 {
		t.Fatalf("from the 501st's time: %d messages, the first %s (want at least 502 from %s)", len(later), later[0].id, statuses[500].id)
	}

	// NATS goes down: sends are not held up, events wait. (A live stream shows when the send's
	// events are committed: the engine commits events a moment after the change they report,
	// and a kill -9 before that loses them by design.)
	live := openStream(t, tg, "/api/client/events/stream?token="+s.tok, nil)
	ns.Stop()
	start := time.Now()
	r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550400001", "message": "while NATS is down"})
	want(t, r, 200, "")
	downID := r.str("message_id")
	tg.inboundMany(s.session, "b", 100)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a send and 100 incoming messages took %v with NATS down", took)
	}
	eventually(t, 20*time.Second, "the message's events committed", func() bool {
		return len(live.labels(func(e sseEvent) bool { return e.Body.Data["messageId"] == downID })) == 3
	})
	eventually(t, 30*time.Second, "the 100 incoming messages kept", func() bool { return len(tg.keptTexts(s.tok)) == 100 })
	// ...and the gateway dies with their events unpublished, and starts while NATS is down.
	p.kill9(t)
	p = startProc(t, data, args...)
	tg = p.gw(t, data)
	if err := ns.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the session connected again", func() bool {
		return tg.do("GET", "/api/client/status", bearerAuth(s.tok), nil).str("status") == "CONNECTED"
	})
	eventually(t, 30*time.Second, "the events that waited, published", func() bool {
		return subjectLen(ns.URL, stream, received) == 100 && subjectLen(ns.URL, stream, statusSubject) >= 1005
	})
	// Now with NATS up, killed while it publishes.
	before := subjectLen(ns.URL, stream, received)
	accepted := make(chan int, 1)
	go func() { accepted <- inboundUntilFails(p.url, s.session, "c", 2000) }()
	eventually(t, 30*time.Second, "publishing again", func() bool { return subjectLen(ns.URL, stream, received) > before+20 })
	p.kill9(t)
	// (The embedded sim runs in the killed process: what it took and had not handed to the
	// session yet dies with it, and only what the gateway kept is owed to the stream.)
	t.Logf("killed with %d of the second batch of incoming messages on the stream, of %d the sim took", subjectLen(ns.URL, stream, received)-before, <-accepted)
	p = startProc(t, data, args...)
	tg = p.gw(t, data)

	// Every incoming message the gateway kept is on the stream once, under one id; so are the
	// send's events made while NATS was down, and the bulk's.
	kept := tg.keptTexts(s.tok)
	eventually(t, 30*time.Second, "every kept message on the stream", func() bool { return subjectLen(ns.URL, stream, received) >= len(kept) })
	all := readStream(t, ns.URL, stream, time.Time{})
	seen := map[string]int{}
	byID := map[string]bool{}
	steps = map[string]int{}
	for _, m := range all {
		if byID[m.id] {
			t.Fatalf("id %s twice on the stream", m.id)
		}
		byID[m.id] = true
		switch m.subject {
		case received:
			seen[m.text]++
		case statusSubject:
			steps[m.message+"/"+m.status]++
		}
	}
	for _, text := range kept {
		if seen[text] != 1 {
			t.Fatalf("kept message %q is on the stream %d times", text, seen[text])
		}
	}
	if len(seen) != len(kept) {
		t.Fatalf("%d distinct incoming messages on the stream, %d kept", len(seen), len(kept))
	}
	if steps[downID+"/sent"] != 1 || steps[downID+"/delivered"] != 1 {
		t.Fatalf("the send made while NATS was down: %v", steps)
	}
	t.Logf("%d events on the stream, %d incoming messages kept", len(all), len(kept))
}
