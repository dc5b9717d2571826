// Package networktest is the contract every network adapter keeps: one suite of tests run
// against each implementation of network.Network (the sim, and WhatsApp over its fake server),
// so the core can be tested on the fast one with confidence that the real one behaves the same.
// Each adapter's tests call Run with an Env that plays the outside world (the phone scanning a
// QR code, a recipient's device, the link dropping). It imports only the standard library and
// the network port.
package networktest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Env is one fresh network and the controls of the world around it.
type Env interface {
	// Network is the implementation under test (closed by the Env's own cleanup).
	Network() network.Network
	// Scan plays the phone scanning the QR code qr that session showed, linking it to phone.
	Scan(t *testing.T, session, qr, phone string)
	// EnterCode plays the user typing the pair code that PairPhone gave for phone on session.
	EnterCode(t *testing.T, session, phone, code string)
	// AddAccounts puts numbers on the network (recipients that exist).
	AddAccounts(t *testing.T, phones ...string)
	// Unregistered makes numbers not on the network.
	Unregistered(t *testing.T, phones ...string)
	// Drop makes the link of session (linked to phone) drop for a moment; it comes back.
	Drop(t *testing.T, session, phone string)
	// Delivered plays the recipient's device reporting that it got message id from sender
	// (networks that report delivery by themselves, like the sim, need do nothing).
	Delivered(t *testing.T, sender, recipient, id string)
	// Act plays the phone in.From acting on session (linked to phone sessionPhone): writing to
	// it (quoting in.ReplyTo), reacting, voting in a poll, editing or revoking a message it
	// wrote, in a direct conversation or in in.Group. It returns the id of what it sent.
	Act(t *testing.T, session, sessionPhone string, in domain.SimInbound) string
	// Seen is what the phone of to (a number, or a group id: a member's view) shows of the
	// messages sessionPhone sent there, in order, with edits and revokes laid over the messages
	// they change (as the sim's GET /api/dev/sim/messages lists them).
	Seen(t *testing.T, sessionPhone, to string) []domain.Delivered
	// Reads lists the ids of the messages from from that a session marked read.
	Reads(t *testing.T, from string) []string
}

// Phones used by the suite.
const (
	PhoneA = "15550101111" // the linked device
	PhoneB = "15550102222" // a recipient on the network
	PhoneC = "15550103333" // a number not on the network
	PhoneD = "15550104444" // another recipient on the network
)

// Wait is how long the suite waits for an event.
const Wait = 15 * time.Second

// Run runs the contract suite; newEnv makes a fresh Env for each test.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	tests := []struct {
		name string
		fn   func(t *testing.T, env Env)
	}{
		{"LinkByQR", testLinkByQR},
		{"LinkByPairCode", testLinkByPairCode},
		{"SendBeforeLinkIsNotConnected", testSendBeforeLink},
		{"SendTextUsesCallerID", testSendText},
		{"ResendSameIDIsSafe", testResendSameID},
		{"NotOnNetwork", testNotOnNetwork},
		{"UnsupportedKind", testUnsupported},
		{"DeliveryReceipt", testDeliveryReceipt},
		{"DropReconnects", testDropReconnects},
		{"LogoutUnlinks", testLogout},
		{"OpenAgainKeepsTheClient", testOpenAgain},
		{"Lookup", testLookup},
		{"ReplyQuotesTheMessage", testReply},
		{"TypingThenText", testTyping},
		{"ReactionAndItsRemoval", testReaction},
		{"EditAndRevoke", testEditRevoke},
		{"PollAndVotes", testPoll},
		{"IncomingReplyReactionEditRevoke", testIncomingConversation},
		{"MarkRead", testMarkRead},
		{"Groups", testGroups},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newEnv(t))
		})
	}
}

// Recorder is a sink that keeps every event and lets a test wait for them in order.
type Recorder struct {
	mu     sync.Mutex
	events []network.Event
	next   int
	wake   chan struct{}
}

// NewRecorder returns an empty recorder; pass its Sink to Network.Open.
func NewRecorder() *Recorder { return &Recorder{wake: make(chan struct{}, 1)} }

// Sink records an event; it never blocks.
func (r *Recorder) Sink(e network.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Expect waits for the next event matching match (skipping others) and returns it.
func (r *Recorder) Expect(t *testing.T, what string, match func(network.Event) bool) network.Event {
	t.Helper()
	deadline := time.After(Wait)
	for {
		r.mu.Lock()
		for r.next < len(r.events) {
			e := r.events[r.next]
			r.next++
			if match(e) {
				r.mu.Unlock()
				return e
			}
		}
		seen := fmt.Sprintf("%#v", r.events)
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("no %s event within %v; events so far: %s", what, Wait, seen)
		}
	}
}

// Is matches events of the type of example.
func Is(example network.Event) func(network.Event) bool {
	want := reflect.TypeOf(example)
	return func(e network.Event) bool { return reflect.TypeOf(e) == want }
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, env Env, session string) (network.Client, *Recorder) {
	t.Helper()
	rec := NewRecorder()
	c, err := env.Network().Open(session, rec.Sink)
	if err != nil {
		t.Fatalf("Open(%s): %v", session, err)
	}
	return c, rec
}

// link links session to phone by QR and waits for Connected.
func link(t *testing.T, env Env, session, phone string) (network.Client, *Recorder) {
	t.Helper()
	c, rec := open(t, env, session)
	if err := c.Connect(ctxT(t)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	qr := rec.Expect(t, "QRCode", Is(network.QRCode{})).(network.QRCode)
	if qr.Code == "" {
		t.Fatal("empty QR code")
	}
	env.Scan(t, session, qr.Code, phone)
	if p := rec.Expect(t, "Paired", Is(network.Paired{})).(network.Paired); p.Phone != phone {
		t.Fatalf("Paired.Phone = %q, want %q", p.Phone, phone)
	}
	if c := rec.Expect(t, "Connected", Is(network.Connected{})).(network.Connected); c.Phone != phone {
		t.Fatalf("Connected.Phone = %q, want %q", c.Phone, phone)
	}
	return c, rec
}

func text(id, to, body string) domain.Message {
	return domain.Message{ID: id, To: to, Kind: domain.KindText, Text: body}
}

func testLinkByQR(t *testing.T, env Env) {
	c, _ := open(t, env, "s1")
	if _, ok := c.Paired(); ok {
		t.Fatal("a new session reports paired")
	}
	c, _ = link(t, env, "s1", PhoneA)
	if phone, ok := c.Paired(); !ok || phone != PhoneA {
		t.Fatalf("Paired() = %q, %v", phone, ok)
	}
}

func testLinkByPairCode(t *testing.T, env Env) {
	c, rec := open(t, env, "s1")
	code, err := c.PairPhone(ctxT(t), "+"+PhoneA)
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.ReplaceAll(code, "-", "")) != 8 {
		t.Fatalf("pair code %q, want eight characters", code)
	}
	env.EnterCode(t, "s1", PhoneA, code)
	if p := rec.Expect(t, "Paired", Is(network.Paired{})).(network.Paired); p.Phone != PhoneA {
		t.Fatalf("Paired.Phone = %q", p.Phone)
	}
	rec.Expect(t, "Connected", Is(network.Connected{}))
	if _, err := c.PairPhone(ctxT(t), PhoneA); !errors.Is(err, network.ErrAlreadyPaired) {
		t.Fatalf("PairPhone when paired: %v, want ErrAlreadyPaired", err)
	}
}

func testSendBeforeLink(t *testing.T, env Env) {
	c, _ := open(t, env, "s1")
	_, err := c.Send(ctxT(t), text("B1", PhoneB, "x"))
	if !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send before linking: %v, want ErrNotConnected", err)
	}
}

func testSendText(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, _ := link(t, env, "s1", PhoneA)
	const id = "3EB0C0FFEE00000000000001"
	r, err := c.Send(ctxT(t), text(id, PhoneB, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != id || r.At.IsZero() {
		t.Fatalf("receipt %+v, want id %s and a time", r, id)
	}
	if r.LID == "" {
		t.Fatalf("receipt %+v names no LID of the recipient", r)
	}
}

// A re-send under the same id (the core's answer to ErrUnknownOutcome) succeeds with the
// same id: the network dedupes on it.
func testResendSameID(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, _ := link(t, env, "s1", PhoneA)
	const id = "3EB0C0FFEE00000000000002"
	r1, err := c.Send(ctxT(t), text(id, PhoneB, "once"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Send(ctxT(t), text(id, PhoneB, "once"))
	if err != nil || r2.ID != r1.ID {
		t.Fatalf("re-send: %+v, %v; want the same id %s", r2, err, r1.ID)
	}
}

func testNotOnNetwork(t *testing.T, env Env) {
	env.Unregistered(t, PhoneC)
	c, _ := link(t, env, "s1", PhoneA)
	_, err := c.Send(ctxT(t), text("N1", PhoneC, "x"))
	if !errors.Is(err, network.ErrNotOnNetwork) {
		t.Fatalf("send to a number not on the network: %v, want ErrNotOnNetwork", err)
	}
}

func testUnsupported(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, _ := link(t, env, "s1", PhoneA)
	_, err := c.Send(ctxT(t), domain.Message{ID: "U1", To: PhoneB, Kind: "hologram"})
	if !errors.Is(err, network.ErrUnsupported) {
		t.Fatalf("send a kind no network has: %v, want ErrUnsupported", err)
	}
}

func testDeliveryReceipt(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, rec := link(t, env, "s1", PhoneA)
	const id = "3EB0C0FFEE00000000000003"
	if _, err := c.Send(ctxT(t), text(id, PhoneB, "x")); err != nil {
		t.Fatal(err)
	}
	env.Delivered(t, PhoneA, PhoneB, id)
	r := rec.Expect(t, "delivered receipt", func(e network.Event) bool {
		r, ok := e.(network.MessageReceipt)
		return ok && r.Status == network.StatusDelivered
	}).(network.MessageReceipt)
	if len(r.IDs) != 1 || r.IDs[0] != id || r.From != PhoneB || r.At.IsZero() {
		t.Fatalf("receipt %+v, want delivered %s from %s", r, id, PhoneB)
	}
}

func testDropReconnects(t *testing.T, env Env) {
	_, rec := link(t, env, "s1", PhoneA)
	env.Drop(t, "s1", PhoneA)
	d := rec.Expect(t, "Disconnected", Is(network.Disconnected{})).(network.Disconnected)
	if !d.Reconnecting || d.StatusReason != network.ReasonNetwork {
		t.Fatalf("drop: %+v, want Reconnecting with reason network", d)
	}
	rec.Expect(t, "Connected", Is(network.Connected{}))
}

func testLogout(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, rec := link(t, env, "s1", PhoneA)
	if err := c.Logout(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rec.Expect(t, "LoggedOut", Is(network.LoggedOut{}))
	if _, ok := c.Paired(); ok {
		t.Fatal("still paired after Logout")
	}
	if _, err := c.Send(ctxT(t), text("L1", PhoneB, "x")); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send after logout: %v, want ErrNotConnected", err)
	}
	// A new link is possible.
	if err := c.Connect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rec.Expect(t, "QRCode", Is(network.QRCode{}))
}

// Opening an open session again gives the same client (its link kept), its events now going
// to the new sink (a restarted session actor takes them over).
func testOpenAgain(t *testing.T, env Env) {
	c1, _ := link(t, env, "s1", PhoneA)
	rec2 := NewRecorder()
	c2, err := env.Network().Open("s1", rec2.Sink)
	if err != nil {
		t.Fatal(err)
	}
	if phone, ok := c2.Paired(); !ok || phone != PhoneA {
		t.Fatalf("reopened client Paired() = %q, %v", phone, ok)
	}
	_ = c1
	env.Drop(t, "s1", PhoneA)
	rec2.Expect(t, "Disconnected on the new sink", Is(network.Disconnected{}))
}

func testLookup(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	env.Unregistered(t, PhoneC)
	c, _ := link(t, env, "s1", PhoneA)
	got, err := c.Lookup(ctxT(t), []string{PhoneB, PhoneC})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Phone != PhoneB || !got[0].OnNetwork || got[0].LID == "" || got[0].LID == PhoneB ||
		got[1].Phone != PhoneC || got[1].OnNetwork || got[1].LID != "" {
		t.Fatalf("Lookup = %+v, want %s on the network with a LID and %s not", got, PhoneB, PhoneC)
	}
}

// sent sends m and fails the test on an error.
func sent(t *testing.T, c network.Client, m domain.Message) network.Receipt {
	t.Helper()
	r, err := c.Send(ctxT(t), m)
	if err != nil {
		t.Fatalf("send %s %s: %v", m.Kind, m.ID, err)
	}
	return r
}

// seen waits until to's phone shows n messages from sessionPhone and returns them.
func seen(t *testing.T, env Env, sessionPhone, to string, n int) []domain.Delivered {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		got := env.Seen(t, sessionPhone, to)
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("%s shows %d messages from %s, want %d: %+v", to, len(got), sessionPhone, n, got)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testReply(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, _ := link(t, env, "s1", PhoneA)
	sent(t, c, text("3EB0C0FFEE00000000000010", PhoneB, "your order shipped"))
	reply := text("3EB0C0FFEE00000000000011", PhoneB, "tracking: 1Z999")
	reply.ReplyTo = &domain.MessageRef{ID: "3EB0C0FFEE00000000000010", FromMe: true, Kind: domain.KindText, Text: "your order shipped"}
	sent(t, c, reply)
	got := seen(t, env, PhoneA, PhoneB, 2)
	if got[1].ReplyTo != "3EB0C0FFEE00000000000010" || got[1].Quoted != "your order shipped" || got[1].Text != "tracking: 1Z999" {
		t.Fatalf("the reply shows %+v, want it quoting the first message", got[1])
	}
}

func testTyping(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, _ := link(t, env, "s1", PhoneA)
	m := text("3EB0C0FFEE00000000000012", PhoneB, "one moment")
	m.Typing = true
	start := time.Now()
	sent(t, c, m)
	if d := time.Since(start); d < time.Second {
		t.Fatalf("a send with typing took %v, want at least the second of typing", d)
	}
	if got := seen(t, env, PhoneA, PhoneB, 1); !got[0].Typing || got[0].Text != "one moment" {
		t.Fatalf("the phone shows %+v, want typing before the text", got[0])
	}
}

func testReaction(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, rec := link(t, env, "s1", PhoneA)
	// Reacting to a message the contact wrote, then taking the reaction back.
	in := env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Text: "is it in stock?"})
	rec.Expect(t, "the incoming text", Is(network.Incoming{}))
	target := &domain.MessageRef{ID: in, From: PhoneB}
	sent(t, c, domain.Message{ID: "3EB0C0FFEE00000000000013", To: PhoneB, Kind: domain.KindReaction, Target: target, Emoji: "👍"})
	sent(t, c, domain.Message{ID: "3EB0C0FFEE00000000000014", To: PhoneB, Kind: domain.KindReaction, Target: target, Emoji: ""})
	got := seen(t, env, PhoneA, PhoneB, 2)
	if got[0].Type != "reaction" || got[0].Target != in || got[0].Emoji != "👍" || got[1].Target != in || got[1].Emoji != "" {
		t.Fatalf("the phone shows %+v, want 👍 on %s then its removal", got, in)
	}
}

func testEditRevoke(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, _ := link(t, env, "s1", PhoneA)
	const first, second = "3EB0C0FFEE00000000000015", "3EB0C0FFEE00000000000016"
	sent(t, c, text(first, PhoneB, "total: 10 EUR"))
	sent(t, c, text(second, PhoneB, "sent by mistake"))
	sent(t, c, domain.Message{ID: "3EB0C0FFEE00000000000017", To: PhoneB, Kind: domain.KindEdit, Text: "total: 12 EUR",
		Target: &domain.MessageRef{ID: first, FromMe: true}})
	sent(t, c, domain.Message{ID: "3EB0C0FFEE00000000000018", To: PhoneB, Kind: domain.KindRevoke,
		Target: &domain.MessageRef{ID: second, FromMe: true}})
	got := seen(t, env, PhoneA, PhoneB, 2)
	if got[0].ID != first || got[0].Text != "total: 12 EUR" || !got[0].Edited || got[0].Revoked {
		t.Fatalf("the edited message shows %+v", got[0])
	}
	if got[1].ID != second || !got[1].Revoked {
		t.Fatalf("the revoked message shows %+v", got[1])
	}
}

// pollID is the suite's poll; testPoll and testIncomingConversation vote in it.
const pollID = "3EB0C0FFEE00000000000019"

func sendPoll(t *testing.T, c network.Client, multiple bool) {
	t.Helper()
	sent(t, c, domain.Message{ID: pollID, To: PhoneB, Kind: domain.KindPoll, Question: "Confirm your order?",
		Options: []string{"Yes", "No", "Call me"}, Multiple: multiple})
}

func testPoll(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, rec := link(t, env, "s1", PhoneA)
	sendPoll(t, c, true)
	got := seen(t, env, PhoneA, PhoneB, 1)
	if got[0].Type != "poll" || got[0].Question != "Confirm your order?" || !reflect.DeepEqual(got[0].Options, []string{"Yes", "No", "Call me"}) || !got[0].Multiple {
		t.Fatalf("the phone shows %+v, want the poll", got[0])
	}
	// Two votes from the same phone: the second replaces the first (decrypted to names).
	env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Type: domain.SimPollVote, MessageID: pollID, Options: []string{"Yes"}})
	env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Type: domain.SimPollVote, MessageID: pollID, Options: []string{"No", "Call me"}})
	for _, want := range [][]string{{"Yes"}, {"No", "Call me"}} {
		v := rec.Expect(t, "a poll vote", Is(network.PollVote{})).(network.PollVote)
		if v.Poll != pollID || v.From != PhoneB || v.FromLID == "" || !sameSet(v.Options, want) {
			t.Fatalf("vote %+v, want %v from %s on %s", v, want, PhoneB, pollID)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}

func testIncomingConversation(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, rec := link(t, env, "s1", PhoneA)
	const ours = "3EB0C0FFEE00000000000020"
	sent(t, c, text(ours, PhoneB, "your parcel left"))
	// The contact writes, quoting our message.
	id := env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Text: "thanks!", ReplyTo: ours})
	in := rec.Expect(t, "the incoming reply", Is(network.Incoming{})).(network.Incoming)
	if in.ID != id || in.From != PhoneB || in.FromLID == "" || in.Message.Kind != domain.KindText || in.Message.Text != "thanks!" ||
		in.Message.ReplyTo == nil || in.Message.ReplyTo.ID != ours || !in.Message.ReplyTo.FromMe || in.Message.ReplyTo.Text != "your parcel left" {
		t.Fatalf("incoming %+v (replyTo %+v), want a reply to %s", in, in.Message.ReplyTo, ours)
	}
	// It reacts to ours, edits its message, then revokes it.
	env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Type: domain.SimReaction, MessageID: ours, Emoji: "❤️"})
	r := rec.Expect(t, "the reaction", Is(network.Reaction{})).(network.Reaction)
	if r.Target != ours || r.Emoji != "❤️" || r.From != PhoneB {
		t.Fatalf("reaction %+v", r)
	}
	env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Type: domain.SimEdit, MessageID: id, Text: "thanks a lot!"})
	e := rec.Expect(t, "the edit", Is(network.Edited{})).(network.Edited)
	if e.Target != id || e.Message.Text != "thanks a lot!" || e.From != PhoneB {
		t.Fatalf("edit %+v", e)
	}
	env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Type: domain.SimRevoke, MessageID: id})
	if v := rec.Expect(t, "the revoke", Is(network.Revoked{})).(network.Revoked); v.Target != id || v.From != PhoneB {
		t.Fatalf("revoke %+v", v)
	}
}

func testMarkRead(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, rec := link(t, env, "s1", PhoneA)
	id := env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneB, Text: "hello?"})
	in := rec.Expect(t, "the incoming text", Is(network.Incoming{})).(network.Incoming)
	if err := c.MarkRead(ctxT(t), domain.MessageRef{ID: in.ID, From: in.From, FromLID: in.FromLID}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(Wait)
	for !contains(env.Reads(t, PhoneB), id) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never saw %s read: %v", PhoneB, id, env.Reads(t, PhoneB))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func testGroups(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB, PhoneD)
	c, rec := link(t, env, "s1", PhoneA)
	g, err := c.CreateGroup(ctxT(t), "Order 1001", []string{PhoneB})
	if err != nil {
		t.Fatal(err)
	}
	if !domain.IsGroup(g.ID) || g.Name != "Order 1001" || !g.Admin || !hasMember(g, PhoneA, true) || !hasMember(g, PhoneB, false) {
		t.Fatalf("created %+v, want the session's phone as admin and %s in it", g, PhoneB)
	}
	list, err := c.Groups(ctxT(t))
	if err != nil || len(list) != 1 || list[0].ID != g.ID {
		t.Fatalf("Groups = %+v, %v; want the new group", list, err)
	}
	g2, err := c.UpdateParticipants(ctxT(t), g.ID, []string{PhoneD}, []string{PhoneB})
	if err != nil || !hasMember(g2, PhoneD, false) || hasMember(g2, PhoneB, false) {
		t.Fatalf("after adding %s and removing %s: %+v, %v", PhoneD, PhoneB, g2, err)
	}
	link, err := c.InviteLink(ctxT(t), g.ID)
	if err != nil || !strings.HasPrefix(link, "https://chat.whatsapp.com/") {
		t.Fatalf("InviteLink = %q, %v", link, err)
	}
	if _, err := c.InviteLink(ctxT(t), "120363000000000000@g.us"); !errors.Is(err, domain.ErrGroupNotFound) {
		t.Fatalf("invite link of a group the session is not in: %v, want ErrGroupNotFound", err)
	}
	// A message to the group, and one a member writes in it.
	sent(t, c, text("3EB0C0FFEE00000000000021", g.ID, "hello group"))
	if got := seen(t, env, PhoneA, g.ID, 1); got[0].Text != "hello group" {
		t.Fatalf("the group shows %+v", got)
	}
	env.Act(t, "s1", PhoneA, domain.SimInbound{From: PhoneD, Text: "hi all", Group: g.ID})
	in := rec.Expect(t, "a group message", Is(network.Incoming{})).(network.Incoming)
	if in.Group != g.ID || in.From != PhoneD || in.Message.Text != "hi all" {
		t.Fatalf("incoming %+v, want %s writing in %s", in, PhoneD, g.ID)
	}
}

func hasMember(g domain.Group, phone string, admin bool) bool {
	for _, p := range g.Participants {
		if p.Phone == phone {
			return p.Admin == admin
		}
	}
	return false
}
