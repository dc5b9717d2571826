package whatsapp

import (
	"testing"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/networktest"
)

// The network port's contract, on WhatsApp over the fake server.
func TestContract(t *testing.T) {
	networktest.Run(t, func(t *testing.T) networktest.Env { return &fakeEnv{h: newHarness(t)} })
}

// The same contract with the device store on PostgreSQL (`--whatsapp-store postgres://`).
func TestContractPostgres(t *testing.T) {
	networktest.Run(t, func(t *testing.T) networktest.Env { return &fakeEnv{h: newPostgresHarness(t)} })
}

type fakeEnv struct{ h *harness }

func (e *fakeEnv) Network() network.Network { return e.h.net }

func (e *fakeEnv) Scan(t *testing.T, _, qr, phone string) {
	t.Helper()
	if err := e.h.srv.Scan(qr, phone); err != nil {
		t.Fatal(err)
	}
}

func (e *fakeEnv) EnterCode(t *testing.T, _, phone, code string) {
	t.Helper()
	if err := e.h.srv.EnterCode(phone, code); err != nil {
		t.Fatal(err)
	}
}

func (e *fakeEnv) AddAccounts(_ *testing.T, phones ...string) { e.h.srv.AddAccount(phones...) }

func (e *fakeEnv) Unregistered(*testing.T, ...string) {} // numbers not added are not on the fake

func (e *fakeEnv) Drop(t *testing.T, _, phone string) {
	t.Helper()
	if n := e.h.srv.StreamError(phone, "503"); n == 0 {
		t.Fatalf("no connection of %s to drop", phone)
	}
}

func (e *fakeEnv) Delivered(t *testing.T, sender, recipient, id string) {
	t.Helper()
	if _, err := e.h.srv.Receipt(sender, recipient, "", id); err != nil {
		t.Fatal(err)
	}
}

func (e *fakeEnv) Act(t *testing.T, session, sessionPhone string, in domain.SimInbound) string {
	t.Fatal("TODO")
	return ""
}

func (e *fakeEnv) Seen(t *testing.T, sessionPhone, to string) []domain.Delivered {
	t.Fatal("TODO")
	return nil
}

func (e *fakeEnv) Reads(t *testing.T, from string) []string {
	t.Fatal("TODO")
	return nil
}
