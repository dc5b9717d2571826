package whatsapp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestWALogger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	wl := newWALogger(log, "whatsmeow/Client").Sub("Socket")
	wl.Debugf("frame %d", 1) // below the level: dropped
	wl.Infof("dialing %s", "wss://x")
	wl.Warnf("slow %v", 2)
	wl.Errorf("failed: %v", "boom")
	out := buf.String()
	if strings.Contains(out, "frame 1") {
		t.Fatalf("debug line logged at info level:\n%s", out)
	}
	for _, want := range []string{
		`level=INFO msg="dialing wss://x" module=whatsmeow/Client/Socket`,
		`level=WARN msg="slow 2" module=whatsmeow/Client/Socket`,
		`level=ERROR msg="failed: boom" module=whatsmeow/Client/Socket`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestSignalLogger(t *testing.T) {
	var buf bytes.Buffer
	l := signalLogger{log: slog.New(slog.NewTextHandler(&buf, nil))}
	l.Error("SessionCipher.go:239", "Unable to decrypt")
	if !strings.Contains(buf.String(), `level=ERROR msg="Unable to decrypt" caller=SessionCipher.go:239`) {
		t.Fatalf("got %s", buf.String())
	}
}
