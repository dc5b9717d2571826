package simhttp

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/networktest"
	"github.com/gateway/gateway/network/sim"
)

// serveSim runs a sim network behind a Server on a loopback port, as `gateway sim` does.
func serveSim(t *testing.T) (*sim.Network, string) {
	t.Helper()
	s, err := sim.Open(sim.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps := NewServer(s, nil)
	srv := &fasthttp.Server{Handler: ps.Handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ps.Close()
		_ = srv.Shutdown()
		_ = s.Close()
	})
	return s, "http://" + ln.Addr().String()
}

func dial(t *testing.T, url string) *Network {
	t.Helper()
	n, err := Dial(Options{URL: url, PollWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// The network port's contract, on the sim in another process's place (over HTTP).
func TestContract(t *testing.T) {
	networktest.Run(t, func(t *testing.T) networktest.Env {
		s, url := serveSim(t)
		return &remoteEnv{sim: s, n: dial(t, url)}
	})
}

type remoteEnv struct {
	sim *sim.Network
	n   *Network
}

func (e *remoteEnv) Network() network.Network { return e.n }

func (e *remoteEnv) Scan(t *testing.T, session, _, phone string) {
	t.Helper()
	if err := e.sim.Scan(session, phone); err != nil {
		t.Fatal(err)
	}
}

func (e *remoteEnv) EnterCode(t *testing.T, session, _, code string) {
	t.Helper()
	if err := e.sim.Pair(session, code); err != nil {
		t.Fatal(err)
	}
}

func (e *remoteEnv) AddAccounts(*testing.T, ...string) {}

func (e *remoteEnv) Unregistered(_ *testing.T, phones ...string) { e.sim.SetUnregistered(phones) }

func (e *remoteEnv) Drop(t *testing.T, session, _ string) {
	t.Helper()
	if err := e.sim.Drop(session, false); err != nil {
		t.Fatal(err)
	}
}

func (e *remoteEnv) Delivered(*testing.T, string, string, string) {}

func (e *remoteEnv) Act(t *testing.T, session, _ string, in domain.SimInbound) string {
	t.Helper()
	id, err := e.sim.Act(session, in)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *remoteEnv) Seen(_ *testing.T, sessionPhone, to string) []domain.Delivered {
	return e.sim.MessagesFrom(sessionPhone, to)
}

func (e *remoteEnv) Reads(_ *testing.T, from string) []string { return e.sim.Reads(from) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// Two nodes share one sim: a session moves to the node that connects it last (the other
// hears its link was replaced and can no longer send or cut the link), and a message id is
// delivered once whichever node sends it.
func TestSessionMovesBetweenNodes(t *testing.T) {
	s, url := serveSim(t)
	a, b := dial(t, url), dial(t, url)
	recA, recB := networktest.NewRecorder(), networktest.NewRecorder()
	ca, _ := a.Open("s1", recA.Sink)
	if err := ca.Connect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	recA.Expect(t, "QR on a", networktest.Is(network.QRCode{}))
	if err := s.Scan("s1", networktest.PhoneA); err != nil {
		t.Fatal(err)
	}
	recA.Expect(t, "Connected on a", networktest.Is(network.Connected{}))
	msg := domain.Message{ID: "3EB0AAAA0001", To: networktest.PhoneB, Kind: domain.KindText, Text: "hi"}
	r1, err := ca.Send(ctx(t), msg)
	if err != nil {
		t.Fatal(err)
	}

	// Node b takes the session over (a failover).
	cb, _ := b.Open("s1", recB.Sink)
	if err := cb.Connect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c := recB.Expect(t, "Connected on b", networktest.Is(network.Connected{})).(network.Connected); c.Phone != networktest.PhoneA {
		t.Fatalf("b connected as %q", c.Phone)
	}
	d := recA.Expect(t, "a replaced", networktest.Is(network.Disconnected{})).(network.Disconnected)
	if d.StatusReason != network.ReasonReplaced || d.Reconnecting {
		t.Fatalf("a heard %+v, want replaced, not reconnecting", d)
	}
	if _, err := ca.Send(ctx(t), domain.Message{ID: "3EB0AAAA0002", To: networktest.PhoneB, Kind: domain.KindText, Text: "x"}); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send from the replaced node: %v, want ErrNotConnected", err)
	}
	ca.Disconnect() // the old node stopping its actor must not cut b's link
	// b re-sends the message a sent (its outcome was unknown to b): delivered once.
	r2, err := cb.Send(ctx(t), msg)
	if err != nil || r2.ID != r1.ID {
		t.Fatalf("re-send on b: %+v, %v", r2, err)
	}
	if got := s.Messages(networktest.PhoneB); len(got) != 1 || got[0].ID != msg.ID {
		t.Fatalf("delivered %+v, want %s once", got, msg.ID)
	}
	recB.Expect(t, "receipt on b", networktest.Is(network.MessageReceipt{}))
	// Closing node a (it stopped) leaves b's session online; closing b takes it offline.
	_ = a.Close()
	if _, err := cb.Send(ctx(t), domain.Message{ID: "3EB0AAAA0003", To: networktest.PhoneB, Kind: domain.KindText, Text: "y"}); err != nil {
		t.Fatalf("send on b after a closed: %v", err)
	}
	_ = b.Close()
	c, _ := s.Open("s1", nil)
	if _, err := c.Send(ctx(t), domain.Message{ID: "3EB0AAAA0004", To: networktest.PhoneB, Kind: domain.KindText}); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("after every node closed the session is still online: %v", err)
	}
}

// Errors keep their kind and fields across the wire.
func TestErrorsRoundTrip(t *testing.T) {
	until := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, err := range []error{
		&network.TimelockError{Until: until, Code: 463},
		&network.RetryLaterError{Err: network.ErrRateLimited, Code: 429, After: 3 * time.Second},
		&network.RetryLaterError{Err: network.ErrRefused, Code: 479, After: time.Second},
		network.ErrNotOnNetwork, network.ErrNotReachable, network.ErrBanned, network.ErrOutdated,
		network.ErrUnknownOutcome, network.ErrUnsupported, network.ErrAlreadyPaired, domain.ErrNotConnected,
		sim.ErrBadPhone,
	} {
		got := decodeError(encodeError(err))
		var want error = err
		var te *network.TimelockError
		var re *network.RetryLaterError
		switch {
		case errors.As(err, &te):
			var gt *network.TimelockError
			if !errors.As(got, &gt) || !gt.Until.Equal(until) || gt.Code != 463 || !errors.Is(got, network.ErrTimelock) {
				t.Errorf("timelock came back as %#v", got)
			}
			continue
		case errors.As(err, &re):
			var gr *network.RetryLaterError
			if !errors.As(got, &gr) || gr.After != re.After || gr.Code != re.Code || !errors.Is(got, re.Err) {
				t.Errorf("%v came back as %#v", err, got)
			}
			continue
		}
		if !errors.Is(got, want) {
			t.Errorf("%v came back as %v", err, got)
		}
	}
}

// A sim that is not there: calls fail as a down link, a send that never left is
// ErrNotConnected (nothing was sent).
func TestSimDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "http://" + ln.Addr().String()
	ln.Close()
	n := dial(t, url)
	c, _ := n.Open("s1", func(network.Event) {})
	if err := c.Connect(ctx(t)); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("connect to a sim that is down: %v", err)
	}
	if _, err := c.Send(ctx(t), domain.Message{ID: "X1", To: networktest.PhoneB, Kind: domain.KindText}); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send to a sim that is down: %v", err)
	}
}
