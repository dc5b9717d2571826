package natstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Messages reads stream on the server at url with an ordered consumer started now (cfg: where
// it starts; the zero value is the stream's first message) up to the last message the stream
// held when it was read (or a second with nothing more); nil while the stream does not exist.
func Messages(t testing.TB, url, stream string, cfg jetstream.OrderedConsumerConfig) []jetstream.Msg {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n, last := 0, false
		for m := range batch.Messages() {
			out = append(out, m)
			n++
			if meta, err := m.Metadata(); err == nil && meta.NumPending == 0 {
				last = true
			}
		}
		if n == 0 || last {
			return out
		}
	}
}
