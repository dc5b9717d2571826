package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/cloud"
	"github.com/gateway/gateway/network/cloud/fakegraph"
	"github.com/gateway/gateway/persist"
)

// memLog is a SendLog (and a cloud.ResendLog) in memory.
type memLog struct {
	mu      sync.Mutex
	recs    map[string]network.SendRecord
	resends map[string]domain.CloudResend // by session id/message id
}

var (
	_ cloud.ResendLog = (*memLog)(nil)
	_ cloud.ResendLog = persist.SendLog{}
)

func newMemLog() *memLog {
	return &memLog{recs: map[string]network.SendRecord{}, resends: map[string]domain.CloudResend{}}
}

func (l *memLog) ResendLater(_ context.Context, sessionID, id string, r domain.CloudResend) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resends[sessionID+"/"+id] = r
	return nil
}

func (l *memLog) Resent(_ context.Context, sessionID, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.resends, sessionID+"/"+id)
	return nil
}

func (l *memLog) Resends(sessionID string, fn func(id string, r domain.CloudResend) error) error {
	l.mu.Lock()
	kept := map[string]domain.CloudResend{}
	for k, r := range l.resends {
		if id, ok := strings.CutPrefix(k, sessionID+"/"); ok {
			kept[id] = r
		}
	}
	l.mu.Unlock()
	for id, r := range kept {
		if err := fn(id, r); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) resending(sessionID, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.resends[sessionID+"/"+id]
	return ok
}

// messages is a network.MessageSource in memory.
type messages map[string]domain.Message

func (m messages) Message(_ context.Context, id string) (domain.Message, bool) {
	msg, ok := m[id]
	return msg, ok
}

func (l *memLog) Begin(_ context.Context, id string, at time.Time) (network.SendRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.recs[id]
	if old.Begun.IsZero() {
		l.recs[id] = network.SendRecord{Begun: at}
	}
	return old, nil
}

func (l *memLog) Taken(_ context.Context, id, nid string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[id]
	r.NetworkID = nid
	l.recs[id] = r
	return nil
}

func (l *memLog) Get(id string) (network.SendRecord, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.recs[id]
	return r, ok, nil
}

func (l *memLog) ByNetworkID(nid string) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, r := range l.recs {
		if r.NetworkID == nid {
			return id, true, nil
		}
	}
	return "", false, nil
}

func (l *memLog) Forget(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.recs, id)
	return nil
}

// harness: the fake Graph API, the network on it, one open session whose webhooks reach the
// network through a receiver, and the events it reported.
type harness struct {
	t      *testing.T
	fake   *fakegraph.Server
	net    *cloud.Network
	client network.Client
	log    *memLog
	app    *fakegraph.App

	mu       sync.Mutex
	events   []network.Event
	rejected int
	// hold, when set, takes the Dones of the events that carry one (the test answers them);
	// else they are answered at once, as a store that commits in no time.
	hold chan network.Done
}

const (
	numberID = "106540352242922"
	waba     = "102290129340398"
	token    = "EAAJB-token"
	secret   = "app-secret"
	customer = "16505551234"
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, fake: fakegraph.New(), log: newMemLog(), app: &fakegraph.App{Secret: secret}}
	t.Cleanup(h.fake.Close)
	h.fake.AddNumber(fakegraph.Number{ID: numberID, WABA: waba, Display: "+1 555-078-3881", Name: "Lucky Shrub", Token: token, App: h.app})
	h.fake.AddTemplate(waba, cloudapi.MessageTemplate{Name: "order_update", Language: "en_US", Status: "APPROVED", Category: "UTILITY",
		Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Order {{1}} is {{2}}."}}})
	h.net = cloud.New(cloud.Options{GraphURL: h.fake.URL(), InDoubt: 300 * time.Millisecond})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, r.URL.Query().Get(cloudapi.HubChallenge))
			return
		}
		body, _ := io.ReadAll(r.Body)
		err := h.net.Webhook(body, r.Header.Get(cloudapi.SignatureHeader))
		switch {
		case errors.Is(err, domain.ErrInvalidSignature):
			h.mu.Lock()
			h.rejected++
			h.mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
		case err != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(recv.Close)
	if err := h.fake.Subscribe(h.app, recv.URL+"/hook", "verify-me"); err != nil {
		t.Fatal(err)
	}
	acct := domain.CloudAccount{PhoneNumberID: numberID, WABAID: waba, AccessToken: token, AppSecret: secret, Phone: "15550783881"}
	c, err := h.net.Open("s1", func(ev network.Event) {
		h.mu.Lock()
		h.events = append(h.events, ev)
		hold := h.hold
		h.mu.Unlock()
		if d := network.DoneOf(ev); d != nil {
			if hold != nil {
				hold <- d
			} else {
				d(nil)
			}
		}
	}, network.WithAccount(acct), network.WithSendLog(h.log))
	if err != nil {
		t.Fatal(err)
	}
	h.client = c
	return h
}

// wait polls for an event cond accepts.
func (h *harness) wait(what string, cond func(network.Event) bool) network.Event {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for _, ev := range h.events {
			if cond(ev) {
				h.mu.Unlock()
				return ev
			}
		}
		h.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("no %s among %v", what, h.events)
	return nil
}

func receiptOf(id string, st network.ReceiptStatus) func(network.Event) bool {
	return func(ev network.Event) bool {
		r, ok := ev.(network.MessageReceipt)
		return ok && r.Status == st && len(r.IDs) == 1 && r.IDs[0] == id
	}
}

func TestConnectAndTemplates(t *testing.T) {
	h := newHarness(t)
	if err := h.client.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.wait("Connected", func(ev network.Event) bool { c, ok := ev.(network.Connected); return ok && c.Phone == "15550783881" })
	num, err := h.net.Check(context.Background(), domain.CloudAccount{PhoneNumberID: numberID, WABAID: waba, AccessToken: token})
	if err != nil || num.Throughput != 80 || num.VerifiedName != "Lucky Shrub" || num.DisplayPhone != "+1 555-078-3881" {
		t.Fatalf("check: %+v %v", num, err)
	}
	if _, err := h.net.Check(context.Background(), domain.CloudAccount{PhoneNumberID: numberID, AccessToken: "wrong"}); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("a wrong token checks as %v, want validation_failed", err)
	}
	for i := range 120 { // three pages of Meta's 100 with the fake's paging
		h.fake.AddTemplate(waba, cloudapi.MessageTemplate{Name: "t" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Language: "en", Status: "PENDING", Category: "MARKETING"})
	}
	ts, err := h.net.Templates(context.Background(), domain.CloudAccount{WABAID: waba, AccessToken: token})
	if err != nil || len(ts) != 121 || ts[0].Name != "order_update" || ts[0].Body != "Order {{1}} is {{2}}." || ts[0].BodyParams() != 2 {
		t.Fatalf("templates: %d %v", len(ts), err)
	}
}

func TestSendStatusesAndIncoming(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// A customer writes first: the service window opens, and a reply may go as it is.
	in, err := h.fake.Write(numberID, fakegraph.Inbound{From: customer, Name: "Sheena", Text: "Does it come in blue? ✨"})
	if err != nil {
		t.Fatal(err)
	}
	ev := h.wait("the incoming message", func(ev network.Event) bool { i, ok := ev.(network.Incoming); return ok && i.ID == in })
	got := ev.(network.Incoming)
	if got.From != customer || got.PushName != "Sheena" || got.Message.Text != "Does it come in blue? ✨" || got.Message.Kind != domain.KindText {
		t.Fatalf("incoming %+v", got)
	}
	rc, err := h.client.Send(ctx, domain.Message{ID: "m1", To: customer, Kind: domain.KindText, Text: "yes", ReplyTo: &domain.MessageRef{ID: in}})
	if err != nil || !strings.HasPrefix(rc.ID, "wamid.") {
		t.Fatalf("send: %v %v", rc, err)
	}
	sent := h.fake.Sent(customer)
	if len(sent) != 1 || sent[0].Request.BizOpaqueCallbackData != "m1" || sent[0].Request.Context == nil || sent[0].Request.Context.MessageID != in {
		t.Fatalf("the fake got %+v", sent)
	}
	r := h.wait("delivered", receiptOf("m1", network.StatusDelivered)).(network.MessageReceipt)
	if r.Category != "service" {
		t.Fatalf("pricing category %q", r.Category)
	}
	if err := h.fake.Read(rc.ID); err != nil {
		t.Fatal(err)
	}
	h.wait("read", receiptOf("m1", network.StatusRead))

	// The customer reacts to our message: named by our id.
	if _, err := h.fake.Write(numberID, fakegraph.Inbound{From: customer, React: true, ReplyTo: rc.ID, Emoji: "👍"}); err != nil {
		t.Fatal(err)
	}
	h.wait("the reaction", func(ev network.Event) bool {
		r, ok := ev.(network.Reaction)
		return ok && r.Target == "m1" && r.Emoji == "👍"
	})
	// They tap a button.
	if _, err := h.fake.Write(numberID, fakegraph.Inbound{From: customer, Button: "confirm", Text: "Confirm"}); err != nil {
		t.Fatal(err)
	}
	h.wait("the button reply", func(ev network.Event) bool {
		i, ok := ev.(network.Incoming)
		return ok && i.Message.Kind == domain.KindButtonReply && i.Message.ButtonID == "confirm" && i.Message.Text == "Confirm"
	})
	// A template with parameters, and a medium uploaded from its bytes.
	if _, err := h.client.Send(ctx, domain.Message{ID: "m2", To: customer, Kind: domain.KindTemplate,
		Template: &domain.TemplateSend{Name: "order_update", Language: "en_US", Params: []string{"#1001", "shipped"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Send(ctx, domain.Message{ID: "m3", To: customer, Kind: domain.KindImage, Data: []byte("\x89PNG fake"), MimeType: "image/png", Caption: "blue"}); err != nil {
		t.Fatal(err)
	}
	sent = h.fake.Sent(customer)
	if len(sent) != 3 || sent[1].Request.Template.Components[0].Parameters[1].Text != "shipped" || sent[2].Request.Image.ID == "" || sent[2].MediaBytes != 9 {
		t.Fatalf("the fake got %+v", sent)
	}
	h.wait("the template's pricing", func(ev network.Event) bool {
		r, ok := ev.(network.MessageReceipt)
		return ok && r.IDs[0] == "m2" && r.Category == "utility"
	})
	if err := h.client.MarkRead(ctx, domain.MessageRef{ID: in}); err != nil || len(h.fake.Reads()) != 1 {
		t.Fatalf("read mark: %v %v", err, h.fake.Reads())
	}
	if _, err := h.client.Send(ctx, domain.Message{ID: "m4", To: customer, Kind: domain.KindPoll}); !errors.Is(err, domain.ErrNotOnCloud) {
		t.Fatalf("a poll: %v", err)
	}
	if _, err := h.client.Groups(ctx); !errors.Is(err, domain.ErrNotOnCloud) {
		t.Fatalf("groups: %v", err)
	}
}

func TestGraphErrors(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.fake.Write(numberID, fakegraph.Inbound{From: customer, Text: "hi"})
	h.wait("the incoming message", func(ev network.Event) bool { _, ok := ev.(network.Incoming); return ok })

	h.fake.Fail(customer, fakegraph.Failure{Code: cloudapi.CodeThroughput, OnAnswer: true})
	_, err := h.client.Send(ctx, domain.Message{ID: "r1", To: customer, Kind: domain.KindText, Text: "a"})
	if after, ok := network.RetryAfter(err); !ok || !errors.Is(err, network.ErrRateLimited) || after < time.Second {
		t.Fatalf("130429 answers %v, want a wait", err)
	}
	if _, err := h.client.Send(ctx, domain.Message{ID: "r1", To: customer, Kind: domain.KindText, Text: "a"}); err != nil {
		t.Fatalf("the retry: %v", err)
	}

	// Outside the window (Meta says so in a failed status).
	h.fake.CloseWindow(numberID, customer)
	if _, err := h.client.Send(ctx, domain.Message{ID: "w1", To: customer, Kind: domain.KindText, Text: "late"}); err != nil {
		t.Fatal(err)
	}
	r := h.wait("failed", receiptOf("w1", network.StatusFailed)).(network.MessageReceipt)
	if !errors.Is(r.Err, domain.ErrOutsideServiceWindow) {
		t.Fatalf("131047 fails with %v", r.Err)
	}
	// 131026 on the answer.
	h.fake.Fail(customer, fakegraph.Failure{Code: cloudapi.CodeUndeliverable, OnAnswer: true})
	if _, err := h.client.Send(ctx, domain.Message{ID: "u1", To: customer, Kind: domain.KindTemplate,
		Template: &domain.TemplateSend{Name: "order_update", Language: "en_US", Params: []string{"1", "2"}}}); !errors.Is(err, domain.ErrRecipientNotReachable) {
		t.Fatalf("131026: %v", err)
	}
	// A template with the wrong parameters.
	if _, err := h.client.Send(ctx, domain.Message{ID: "u2", To: customer, Kind: domain.KindTemplate,
		Template: &domain.TemplateSend{Name: "order_update", Language: "en_US", Params: []string{"1"}}}); !errors.Is(err, domain.ErrTemplateNotApproved) {
		t.Fatalf("132000: %v", err)
	}
	// A revoked token: the session goes down with token_invalid; the message is not failed.
	h.fake.SetToken(numberID, "new")
	if _, err := h.client.Send(ctx, domain.Message{ID: "t1", To: customer, Kind: domain.KindTemplate,
		Template: &domain.TemplateSend{Name: "order_update", Language: "en_US", Params: []string{"1", "2"}}}); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("190: %v", err)
	}
	h.wait("token_invalid", func(ev network.Event) bool {
		d, ok := ev.(network.Disconnected)
		return ok && d.StatusReason == network.ReasonTokenInvalid && !d.Reconnecting
	})
}

func TestBadSignatureChangesNothing(t *testing.T) {
	h := newHarness(t)
	body := h.fake.Body(numberID, cloudapi.Value{Messages: []cloudapi.InboundMessage{{From: customer, ID: "wamid.forged", Timestamp: "1749416383",
		Type: "text", Text: &cloudapi.Text{Body: "forged"}}}})
	if err := h.net.Webhook(body, cloudapi.Sign(body, "not-the-secret")); !errors.Is(err, domain.ErrInvalidSignature) {
		t.Fatalf("a forged webhook: %v", err)
	}
	if err := h.net.Webhook(body, ""); !errors.Is(err, domain.ErrInvalidSignature) {
		t.Fatalf("an unsigned webhook: %v", err)
	}
	h.mu.Lock()
	n := len(h.events)
	h.mu.Unlock()
	if n != 0 {
		t.Fatalf("a refused webhook made events: %v", h.events)
	}
	if err := h.net.Webhook(body, cloudapi.Sign(body, secret)); err != nil {
		t.Fatal(err)
	}
	h.wait("the signed message", func(ev network.Event) bool { i, ok := ev.(network.Incoming); return ok && i.ID == "wamid.forged" })
}

// A send whose answer was lost (the process died after the request went out) is not made
// again while Meta's status may still name it; the status settles it.
func TestInDoubtSendSettledByItsStatus(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.fake.Write(numberID, fakegraph.Inbound{From: customer, Text: "hi"})
	h.wait("the incoming message", func(ev network.Event) bool { _, ok := ev.(network.Incoming); return ok })
	if _, err := h.client.Send(ctx, domain.Message{ID: "d1", To: customer, Kind: domain.KindText, Text: "once"}); err != nil {
		t.Fatal(err)
	}
	h.wait("sent", receiptOf("d1", network.StatusDelivered))
	// Forget Meta's id, as if the answer had been lost after the request went out.
	h.log.mu.Lock()
	h.log.recs["d1"] = network.SendRecord{Begun: time.Now()}
	h.log.mu.Unlock()
	if _, err := h.client.Send(ctx, domain.Message{ID: "d1", To: customer, Kind: domain.KindText, Text: "once"}); !errors.Is(err, network.ErrUnknownOutcome) {
		t.Fatalf("an in-doubt send: %v, want it held", err)
	}
	// Meta's read status names it: taken.
	if err := h.fake.Read(h.fake.Sent(customer)[0].ID); err != nil {
		t.Fatal(err)
	}
	h.wait("read", receiptOf("d1", network.StatusRead))
	rc, err := h.client.Send(ctx, domain.Message{ID: "d1", To: customer, Kind: domain.KindText, Text: "once"})
	if err != nil || rc.ID != h.fake.Sent(customer)[0].ID || len(h.fake.Sent(customer)) != 1 {
		t.Fatalf("settled by its status: %v %v, %d sent", rc, err, len(h.fake.Sent(customer)))
	}
	// One begun and never taken goes again once InDoubt has passed.
	h.log.mu.Lock()
	h.log.recs["d2"] = network.SendRecord{Begun: time.Now().Add(-time.Second)}
	h.log.mu.Unlock()
	if _, err := h.client.Send(ctx, domain.Message{ID: "d2", To: customer, Kind: domain.KindText, Text: "again"}); err != nil {
		t.Fatal(err)
	}
	if n := len(h.fake.Sent(customer)); n != 2 {
		t.Fatalf("%d sent, want 2", n)
	}
}

// A message Meta failed for its rate limits in a status webhook is kept in the send log until
// it goes again: a client closed before the backoff ended (the process restarted, the session
// moved to another node) leaves it to the session's next client, which sends it once.
func TestRateLimitedResendOutlivesItsClient(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	acct := domain.CloudAccount{PhoneNumberID: numberID, WABAID: waba, AccessToken: token, AppSecret: secret, Phone: "15550783881"}
	src := messages{"r1": {ID: "r1", To: customer, Kind: domain.KindText, Text: "after the rate limit"}}
	sink := func(ev network.Event) { network.DoneOf(ev).Call(nil) } // recorded at once
	if _, err := h.net.Open("s1", sink, network.WithAccount(acct), network.WithSendLog(h.log), network.WithMessageSource(src)); err != nil {
		t.Fatal(err)
	}
	h.fake.Write(numberID, fakegraph.Inbound{From: customer, Text: "hi"})
	h.fake.Fail(customer, fakegraph.Failure{Code: cloudapi.CodeThroughput}) // in the failed status
	if _, err := h.client.Send(ctx, src["r1"]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.log.resending("s1", "r1") {
		if time.Now().After(deadline) {
			t.Fatal("the failed status did not keep the message to send again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.client.Disconnect() // before the backoff (a second) ends
	tries := func() int {
		n := 0
		for _, s := range h.fake.Sent(customer) {
			if s.Request.BizOpaqueCallbackData == "r1" {
				n++
			}
		}
		return n
	}
	if n := tries(); n != 1 {
		t.Fatalf("%d tries before the client closed, want 1", n)
	}

	// The session's next client (another process): it sends the message once.
	n2 := cloud.New(cloud.Options{GraphURL: h.fake.URL(), InDoubt: 300 * time.Millisecond})
	c2, err := n2.Open("s1", sink, network.WithAccount(acct), network.WithSendLog(h.log), network.WithMessageSource(src))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Disconnect()
	if err := c2.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for tries() < 2 || h.log.resending("s1", "r1") {
		if time.Now().After(deadline) {
			t.Fatalf("after the next client connected: %d tries, kept to resend: %v", tries(), h.log.resending("s1", "r1"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := tries(); n != 2 {
		t.Fatalf("%d tries, want 2 (the failed one and the one after the backoff)", n)
	}
}

// The webhook is answered only once what it carries is durable: the incoming message, the
// reaction and the status each carry a Done, and Webhook returns when all were called; a
// failed one or one never called (past CommitWait) is domain.ErrUnavailable, Meta's 503.
func TestWebhookAnswersOnceDurable(t *testing.T) {
	h := newHarness(t)
	h.mu.Lock()
	h.hold = make(chan network.Done, 6)
	h.mu.Unlock()
	v := cloudapi.Value{
		Messages: []cloudapi.InboundMessage{{From: customer, ID: "wamid.in1", Timestamp: "1749416383", Type: "text", Text: &cloudapi.Text{Body: "hello"}},
			{From: customer, ID: "wamid.in2", Timestamp: "1749416383", Type: cloudapi.TypeReaction, Reaction: &cloudapi.Reaction{MessageID: "wamid.out0", Emoji: "👍"}}},
		Statuses: []cloudapi.Status{{ID: "wamid.out1", Status: cloudapi.StatusDelivered, Timestamp: "1749416384", RecipientID: customer,
			BizOpaqueCallbackData: "msg-1"}},
	}
	body := h.fake.Body(numberID, v)
	post := func() chan error {
		res := make(chan error, 1)
		go func() { res <- h.net.Webhook(body, cloudapi.Sign(body, secret)) }()
		return res
	}
	// held takes the Dones of the message, the reaction and the status: the first two, and
	// the third.
	held := func() (network.Done, network.Done) {
		t.Helper()
		var ds []network.Done
		for len(ds) < 3 {
			select {
			case d := <-h.hold:
				ds = append(ds, d)
			case <-time.After(5 * time.Second):
				t.Fatalf("%d of the 3 events handed on", len(ds))
			}
		}
		return func(err error) { ds[0](err); ds[1](err) }, ds[2]
	}
	notYet := func(res chan error, what string) {
		t.Helper()
		select {
		case err := <-res:
			t.Fatalf("the webhook was answered (%v) before %s", err, what)
		case <-time.After(100 * time.Millisecond):
		}
	}

	res := post()
	first, second := held()
	notYet(res, "anything was recorded")
	first(nil)
	notYet(res, "the second event was recorded")
	second(errors.New("disk full"))
	if err := <-res; !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("a webhook whose status was not recorded: %v, want ErrUnavailable (503)", err)
	}

	// Meta sends it again: both recorded now, 200.
	res = post()
	first, second = held()
	first(nil)
	second(nil)
	if err := <-res; err != nil {
		t.Fatal(err)
	}

	// Nobody answers: CommitWait bounds the wait.
	n := cloud.New(cloud.Options{GraphURL: h.fake.URL(), CommitWait: 50 * time.Millisecond})
	acct := domain.CloudAccount{PhoneNumberID: numberID, WABAID: waba, AccessToken: token, AppSecret: secret}
	if _, err := n.Open("s2", func(network.Event) {}, network.WithAccount(acct)); err != nil {
		t.Fatal(err)
	}
	if err := n.Webhook(body, cloudapi.Sign(body, secret)); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("a webhook nobody recorded: %v, want ErrUnavailable", err)
	}
	// A closed session's events are not handed on: 503, nothing waited for.
	n.Close()
	if err := n.Webhook(body, cloudapi.Sign(body, secret)); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("a webhook for a closed session: %v", err)
	}
}

// An item the gateway refuses as invalid (here a message with no id) is skipped: the rest of
// the notification is recorded and answered 200, not a 503 Meta would retry for 7 days.
func TestWebhookSkipsAnInvalidItem(t *testing.T) {
	h := newHarness(t)
	h.mu.Lock()
	h.hold = make(chan network.Done, 4)
	h.mu.Unlock()
	v := cloudapi.Value{Messages: []cloudapi.InboundMessage{
		{From: customer, ID: "wamid.good", Timestamp: "1749416383", Type: "text", Text: &cloudapi.Text{Body: "hello"}},
		{From: customer, ID: "", Timestamp: "1749416383", Type: "text", Text: &cloudapi.Text{Body: "no id"}},
	}}
	body := h.fake.Body(numberID, v)
	res := make(chan error, 1)
	go func() { res <- h.net.Webhook(body, cloudapi.Sign(body, secret)) }()
	for i := range 2 {
		select {
		case d := <-h.hold:
			if i == 0 {
				d(nil)
			} else {
				d(fmt.Errorf("%w: an incoming message needs a user and an id", domain.ErrValidation))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of the 2 events handed on", i)
		}
	}
	if err := <-res; err != nil {
		t.Fatalf("a notification with one invalid item: %v, want it answered (the item skipped)", err)
	}
}
