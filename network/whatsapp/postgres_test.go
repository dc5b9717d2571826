package whatsapp

// The device store on PostgreSQL (`--whatsapp-store postgres://`): devices survive a restart,
// and a device is used by one process at a time (advisory locks, devlock.go).

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Link, restart, reconnect and send: the device, its keys and the session table live in
// PostgreSQL.
func TestPostgresStoreKeepsDevicesAcrossRestarts(t *testing.T) {
	t.Parallel()
	h := newPostgresHarness(t)
	if h.net.dialect != dialectPostgres {
		t.Fatalf("dialect %q", h.net.dialect)
	}
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: "PG1", To: phoneB, Kind: domain.KindText, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	h.reopen()
	s = h.open("s1")
	if phone, ok := s.c.Paired(); !ok || phone != phoneA {
		t.Fatalf("after a restart: paired %q %v", phone, ok)
	}
	s.connect()
	s.expect("Connected", isConnected)
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: "PG2", To: phoneB, Kind: domain.KindText, Text: "y"}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := h.net.db.QueryRowContext(ctxT(t), `SELECT count(*) FROM whatsmeow_device`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("whatsmeow_device rows: %d, %v", n, err)
	}
}

// Two gateway processes on one store: the second cannot connect a device the first is using
// (it waits, DISCONNECTED with the reason); once the first lets it go, the second connects.
func TestPostgresDeviceUsedByOneProcess(t *testing.T) {
	t.Parallel()
	h := newPostgresHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)

	other := h.openNetwork()
	t.Cleanup(func() { _ = other.Close() })
	rec := newRecorder()
	c2, err := other.Open("s1", rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	s2 := &session{t: t, c: c2.(*client), rec: rec}
	s2.connect()
	d := s2.expect("Disconnected (device in use)", isDisconnected(true)).(network.Disconnected)
	if !strings.Contains(d.Reason, "in use by another gateway process") {
		t.Fatalf("second process: %+v, want the device-in-use reason", d)
	}
	s2.expectNone("Connected of the second process", 300*time.Millisecond, isConnected)
	if n := h.srv.Online(phoneA); n != 1 {
		t.Fatalf("%d connections of the device, want the first process's only", n)
	}

	s.c.Disconnect() // the first process lets the device go (as a node handing a session over)
	s2.expect("Connected of the second process", isConnected)
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: "L1", To: phoneB, Kind: domain.KindText, Text: "x"}); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send from the process that let go: %v", err)
	}
	ctx := ctxT(t)
	if err := s.c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	s.expect("Disconnected (device in use) of the first process", func(e network.Event) bool {
		d, ok := e.(network.Disconnected)
		return ok && strings.Contains(d.Reason, "in use by another gateway process")
	})
	if n := h.srv.Online(phoneA); n != 1 {
		t.Fatalf("%d connections of the device, want one", n)
	}
}

// The connection holding the locks dies (killed by the server): the locks are gone, so the
// device disconnects at once and connects again once it holds its lock anew.
func TestPostgresLockConnectionLost(t *testing.T) {
	t.Parallel()
	h := newPostgresHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	if !h.net.locks.holds(s.c.device) {
		t.Fatal("connected without holding the device's lock")
	}
	admin, err := sql.Open("postgres", h.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var killed int
	if err := admin.QueryRowContext(ctxT(t), `
		SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d lock holders, %v", killed, err)
	}
	s.expect("Disconnected (lock lost)", func(e network.Event) bool {
		d, ok := e.(network.Disconnected)
		return ok && d.Reconnecting && strings.Contains(d.Reason, "lost the device lock")
	})
	s.expect("Connected again", isConnected)
	if !h.net.locks.holds(s.c.device) {
		t.Fatal("reconnected without the lock")
	}
}
