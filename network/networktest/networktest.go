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
}

// Phones used by the suite.
const (
	PhoneA = "15550101111" // the linked device
	PhoneB = "15550102222" // a recipient on the network
	PhoneC = "15550103333" // a number not on the network
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
	if ok, err := c.IsOnNetwork(ctxT(t), PhoneB); err != nil || !ok {
		t.Fatalf("IsOnNetwork(%s) = %v, %v", PhoneB, ok, err)
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
	if ok, err := c.IsOnNetwork(ctxT(t), PhoneC); err != nil || ok {
		t.Fatalf("IsOnNetwork(%s) = %v, %v; want false", PhoneC, ok, err)
	}
	_, err := c.Send(ctxT(t), text("N1", PhoneC, "x"))
	if !errors.Is(err, network.ErrNotOnNetwork) {
		t.Fatalf("send to a number not on the network: %v, want ErrNotOnNetwork", err)
	}
}

func testUnsupported(t *testing.T, env Env) {
	env.AddAccounts(t, PhoneB)
	c, _ := link(t, env, "s1", PhoneA)
	_, err := c.Send(ctxT(t), domain.Message{ID: "U1", To: PhoneB, Kind: "sticker"})
	if !errors.Is(err, network.ErrUnsupported) {
		t.Fatalf("send sticker: %v, want ErrUnsupported", err)
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
