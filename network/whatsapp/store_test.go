package whatsapp

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/types"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

func TestSQLiteDSN(t *testing.T) {
	dsn, err := sqliteDSN("/data/whatsapp.db")
	if err != nil {
		t.Fatal(err)
	}
	path, query, ok := strings.Cut(dsn, "?")
	if !ok || path != "/data/whatsapp.db" {
		t.Fatalf("dsn %q", dsn)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	pragmas := strings.Join(q["_pragma"], " ")
	for _, want := range []string{"foreign_keys(1)", "journal_mode(WAL)", "busy_timeout(10000)"} {
		if !strings.Contains(pragmas, want) {
			t.Errorf("dsn %q lacks pragma %s", dsn, want)
		}
	}
	if q.Get("_txlock") != "immediate" {
		t.Errorf("dsn %q: want _txlock=immediate", dsn)
	}
	for _, bad := range []string{"", "/tmp/a?b.db"} {
		if _, err := sqliteDSN(bad); err == nil {
			t.Errorf("sqliteDSN(%q) accepted", bad)
		}
	}
}

// The pragmas reach SQLite: foreign keys on (sqlstore insists) and WAL.
func TestOpenConfiguresSQLite(t *testing.T) {
	n, err := Open(Options{DBPath: filepath.Join(t.TempDir(), "wa.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	var fk int
	var mode string
	if err := n.db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v", fk, err)
	}
	if err := n.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	if n.sendTimeout != DefaultSendTimeout {
		t.Fatalf("send timeout %v, want the default", n.sendTimeout)
	}
}

func TestSessionTable(t *testing.T) {
	n, err := Open(Options{DBPath: filepath.Join(t.TempDir(), "wa.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	dev1 := types.JID{User: "15550001111", Server: types.DefaultUserServer, Device: 7}
	dev2 := types.JID{User: "15550001111", Server: types.DefaultUserServer, Device: 8}

	if _, ok, err := lookupSessionDevice(ctx, n.db, "s1"); ok || err != nil {
		t.Fatalf("empty table: ok=%v err=%v", ok, err)
	}
	if err := saveSessionDevice(ctx, n.db, "s1", dev1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if jid, ok, err := lookupSessionDevice(ctx, n.db, "s1"); err != nil || !ok || jid != dev1 {
		t.Fatalf("lookup = %v, %v, %v; want %v", jid, ok, err, dev1)
	}
	// Relinking replaces the session's device.
	if err := saveSessionDevice(ctx, n.db, "s1", dev2, time.Now()); err != nil {
		t.Fatal(err)
	}
	if jid, _, _ := lookupSessionDevice(ctx, n.db, "s1"); jid != dev2 {
		t.Fatalf("after relink: %v", jid)
	}
	// A device belongs to one session: another session taking it drops the stale row.
	if err := saveSessionDevice(ctx, n.db, "s2", dev2, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := lookupSessionDevice(ctx, n.db, "s1"); ok {
		t.Fatal("s1 still maps to a device now owned by s2")
	}
	// Forgetting an old device leaves a newer one alone.
	if err := forgetSessionDevice(ctx, n.db, "s2", dev1); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := lookupSessionDevice(ctx, n.db, "s2"); !ok {
		t.Fatal("forgetting another device removed the row")
	}
	if err := forgetSessionDevice(ctx, n.db, "s2", dev2); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := lookupSessionDevice(ctx, n.db, "s2"); ok {
		t.Fatal("row still there")
	}
}

// A row whose device is gone from the store (deleted while the gateway was down) is dropped and
// the session starts unpaired.
func TestOpenDropsStaleSessionRow(t *testing.T) {
	n, err := Open(Options{DBPath: filepath.Join(t.TempDir(), "wa.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	gone := types.JID{User: "15550001111", Server: types.DefaultUserServer, Device: 3}
	if err := saveSessionDevice(ctx, n.db, "s1", gone, time.Now()); err != nil {
		t.Fatal(err)
	}
	c, err := n.Open("s1", func(network.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Paired(); ok {
		t.Fatal("session with a missing device reports paired")
	}
	if _, ok, _ := lookupSessionDevice(ctx, n.db, "s1"); ok {
		t.Fatal("stale row kept")
	}
}

func TestOpenAndCloseErrors(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without a path succeeded")
	}
	n, err := Open(Options{DBPath: filepath.Join(t.TempDir(), "wa.db"), SendTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Open("", func(network.Event) {}); err == nil {
		t.Fatal("empty session id accepted")
	}
	if _, err := n.Open("s1", nil); err == nil {
		t.Fatal("nil sink accepted")
	}
	c, err := n.Open("s1", func(network.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := n.Open("s2", func(network.Event) {}); !errors.Is(err, errClosed) {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := c.Connect(context.Background()); !errors.Is(err, errClosed) {
		t.Fatalf("Connect after Close: %v", err)
	}
	if _, err := c.Send(context.Background(), domain.Message{ID: "1", To: "15550002222", Kind: domain.KindText, Text: "x"}); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("Send after Close: %v", err)
	}
}
