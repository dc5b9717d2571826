package whatsapp

// The device store under an offline-sync burst (README, "WhatsApp device store"): many
// devices decrypting at once. whatsmeow decrypts each message inside the store's
// DoDecryptionTxn, a write transaction: on SQLite every device of the process queues for one
// write lock (busy timeout 10 s), on PostgreSQL they take row locks. A bench, not a test:
//
//	make bench-wastore                      # 200 devices, 3 messages each
//	go test -run XXX -bench DecryptionBurst -benchtime 1x ./network/whatsapp -burst-devices 50
//
// Each store gets the same burst in the same run; compare the two lines (the fake server's
// encryption runs on the same machine and costs both the same).

import (
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/network"
)

var (
	burstDevices  = flag.Int("burst-devices", 200, "DecryptionBurst: linked devices")
	burstMessages = flag.Int("burst-messages", 3, "DecryptionBurst: messages to each device (the first a prekey message)")
)

func BenchmarkDecryptionBurst(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		b.Run(store, func(b *testing.B) {
			var h *harness
			if store == "postgres" {
				h = newPostgresHarness(b)
			} else {
				h = newHarness(b)
			}
			sessions := linkMany(b, h, *burstDevices)
			const customer = "15559990000"
			h.srv.AddAccount(customer)
			b.ResetTimer()
			for range b.N {
				lat, lost := burst(b, h, sessions, customer, *burstMessages)
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "last-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
				b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
				b.ReportMetric(float64(lost), "lost")
			}
		})
	}
}

// linkMany links n sessions, each to its own phone, a few at a time.
func linkMany(b *testing.B, h *harness, n int) []*session {
	sessions := make([]*session, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s := h.open(fmt.Sprintf("burst-%d", i))
			h.link(s, fmt.Sprintf("1555100%04d", i))
			sessions[i] = s
		})
	}
	wg.Wait()
	for i := range n {
		phone := fmt.Sprintf("1555100%04d", i)
		waitFor(b, "the device's key upload", func() bool { return h.srv.HasKeys(phone) })
	}
	return sessions
}

// burst sends msgs messages to every device at once and returns each message's latency from
// the start of the burst to its Incoming event, and how many never arrived.
func burst(b *testing.B, h *harness, sessions []*session, customer string, msgs int) ([]time.Duration, int) {
	start := time.Now()
	var wg sync.WaitGroup
	ids := make([][]string, len(sessions))
	for i := range sessions {
		wg.Go(func() {
			for range msgs {
				id, err := h.srv.SendText(customer, fmt.Sprintf("1555100%04d", i), "burst")
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = append(ids[i], id)
			}
		})
	}
	wg.Wait()
	var lat []time.Duration
	lost := 0
	deadline := time.Now().Add(2 * time.Minute)
	for i, s := range sessions {
		for _, id := range ids[i] {
			at, ok := s.arrival(id, deadline)
			if !ok {
				lost++
				at = time.Now()
			}
			lat = append(lat, at.Sub(start))
		}
	}
	return lat, lost
}

// arrival waits until the Incoming event of id and returns when the recorder got it.
func (s *session) arrival(id string, deadline time.Time) (time.Time, bool) {
	for {
		s.rec.mu.Lock()
		for i, e := range s.rec.events {
			if in, ok := e.(network.Incoming); ok && in.ID == id {
				at := s.rec.at[i]
				s.rec.mu.Unlock()
				return at, true
			}
		}
		s.rec.mu.Unlock()
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
