package natskv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// whileUnrouted sends again only what reached no responder (nothing was stored), until it
// goes through or the time is up; any other failure, above all a timeout whose outcome is
// unknown, is returned after one try.
func TestWhileUnrouted(t *testing.T) {
	ctx := context.Background()
	tries := 0
	err := whileUnrouted(ctx, func() error {
		tries++
		switch tries {
		case 1:
			return nats.ErrNoResponders
		case 2:
			return jetstream.ErrNoStreamResponse
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Fatalf("after two no-responders answers: %v after %d tries, want success after 3", err, tries)
	}

	for _, final := range []error{nats.ErrTimeout, context.DeadlineExceeded, nats.ErrConnectionClosed, errors.New("wrong last sequence")} {
		tries = 0
		err = whileUnrouted(ctx, func() error { tries++; return final })
		if !errors.Is(err, final) || tries != 1 {
			t.Fatalf("%v: %v after %d tries, want it returned after 1 (it may have been applied)", final, err, tries)
		}
	}

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	tries = 0
	err = whileUnrouted(short, func() error { tries++; return nats.ErrNoResponders })
	if !errors.Is(err, nats.ErrNoResponders) || tries < 2 {
		t.Fatalf("no responders until the time is up: %v after %d tries, want ErrNoResponders after several", err, tries)
	}
}
