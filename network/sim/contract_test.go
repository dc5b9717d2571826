package sim

import (
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/networktest"
)

// The network port's contract, on the sim.
func TestContract(t *testing.T) {
	networktest.Run(t, func(t *testing.T) networktest.Env {
		return &simEnv{n: openSim(t, Options{reconnectDelay: 20 * time.Millisecond})}
	})
}

type simEnv struct{ n *Network }

func (e *simEnv) Network() network.Network { return e.n }

func (e *simEnv) Scan(t *testing.T, session, _, phone string) {
	t.Helper()
	if err := e.n.Scan(session, phone); err != nil {
		t.Fatal(err)
	}
}

func (e *simEnv) EnterCode(t *testing.T, session, _, code string) {
	t.Helper()
	if err := e.n.Pair(session, code); err != nil {
		t.Fatal(err)
	}
}

func (e *simEnv) AddAccounts(*testing.T, ...string) {} // every valid number is on the sim

func (e *simEnv) Unregistered(_ *testing.T, phones ...string) { e.n.SetUnregistered(phones) }

func (e *simEnv) Drop(t *testing.T, session, _ string) {
	t.Helper()
	if err := e.n.Drop(session, false); err != nil {
		t.Fatal(err)
	}
}

func (e *simEnv) Delivered(*testing.T, string, string, string) {} // the sim reports it by itself

func (e *simEnv) Act(t *testing.T, session, _ string, in domain.SimInbound) string {
	t.Helper()
	id, err := e.n.Act(session, in)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *simEnv) Seen(_ *testing.T, sessionPhone, to string) []domain.Delivered {
	return e.n.MessagesFrom(sessionPhone, to)
}

func (e *simEnv) Reads(_ *testing.T, from string) []string { return e.n.Reads(from) }
