package persist

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// mediaFiles lists the media files beside the log in dir.
func mediaFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, logMediaDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// imageOf is a new image message accepted at at, its media n bytes of a pattern.
func imageOf(n int, at time.Time) domain.OutboxEntry {
	e := logQueued("", at)
	e.Message.Kind, e.Message.Text, e.Message.MimeType = domain.KindImage, "", "image/png"
	e.Message.Data = make([]byte, n)
	for i := range e.Message.Data {
		e.Message.Data[i] = byte(i*31 + i>>11)
	}
	return e
}

// Media of --media-max-bytes' default (16 MiB), whose base64 alone is over the log's largest
// record, is accepted: kept in a file apart, read back whole by the next process after a kill,
// and removed once the message's outcome is durable. A file no pending message names is
// removed at boot.
func TestLogOutboxMediaApart(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	e := imageOf(16<<20, at)
	want := bytes.Clone(e.Message.Data)
	if err := lo.Accept(context.Background(), &e, ""); err != nil {
		t.Fatalf("accept of 16 MiB of media: %v", err)
	}
	small := imageOf(1000, at) // in its record
	if err := lo.Accept(context.Background(), &small, ""); err != nil {
		t.Fatal(err)
	}
	if files := mediaFiles(t, dir); len(files) != 1 {
		t.Fatalf("media files %v, want the large message's one", files)
	}
	crash(t, lo)
	stray := filepath.Join(dir, logMediaDir, logMediaPrefix+"0123456789abcdef")
	if err := os.WriteFile(stray, []byte("an accept's file whose record never was"), 0o600); err != nil {
		t.Fatal(err)
	}

	lo, pend := openLogOutbox(t, dir, kv, clock)
	if len(pend) != 2 || pend[0] != e.ID || pend[1] != small.ID {
		t.Fatalf("pending after the restart %v, want [%s %s]", pend, e.ID, small.ID)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a media file no pending message names is left at boot: %v", err)
	}
	got := wantStatus(t, lo, e.ID, domain.MsgQueued)
	if !bytes.Equal(got.Message.Data, want) || got.Message.Kind != domain.KindImage || got.Message.MimeType != "image/png" {
		t.Fatalf("read back %d bytes of media (kind %s), want the %d accepted", len(got.Message.Data), got.Message.Kind, len(want))
	}
	if got := wantStatus(t, lo, small.ID, domain.MsgQueued); !bytes.Equal(got.Message.Data, small.Message.Data) {
		t.Fatalf("small media read back as %d bytes", len(got.Message.Data))
	}

	settleLog(t, lo, e.ID, domain.MsgSent, at.Add(time.Second))
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if files := mediaFiles(t, dir); len(files) != 0 {
		t.Fatalf("media files %v once its message settled", files)
	}
	if got := wantStatus(t, lo, e.ID, domain.MsgSent); got.NetworkID != "net-"+e.ID {
		t.Fatalf("settled: %+v", got)
	}
	// The next process does not send it again.
	crash(t, lo)
	if _, pend := openLogOutbox(t, dir, kv, clock); len(pend) != 1 || pend[0] != small.ID {
		t.Fatalf("pending after the settle and a restart %v, want [%s]", pend, small.ID)
	}
}

// A message whose record is over what the log holds is refused as too large (413), not as the
// storage's failure (503, Retry-After): the same message would be refused for ever.
func TestLogOutboxRecordTooLarge(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	e := logQueued("", at)
	e.Message.Caption = strings.Repeat("x", 17<<20)
	err := lo.Accept(context.Background(), &e, "")
	if !errors.Is(err, domain.ErrMediaTooLarge) {
		t.Fatalf("accept of a 17 MiB record: %v, want %v", err, domain.ErrMediaTooLarge)
	}
	if ids := lo.pendingIDs(); len(ids) != 0 {
		t.Fatalf("pending %v after a refused accept", ids)
	}
	ids := acceptLog(t, lo, 1, at) // the log goes on
	wantStatus(t, lo, ids[0], domain.MsgQueued)
}
