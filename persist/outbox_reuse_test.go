package persist

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// A message's id may be used again once the old message's outcome has expired (a caller's id,
// an Idempotency-Key's derived id), while a receipt of the old message, recorded after its
// outcome, still lives (its record's 7 days run from the receipt). The old message's receipts
// are not the new one's: a read of the new message, or a boot's resend folding them into its
// outcome, would report it delivered and read before it went. A receipt dated before the
// message's acceptance (less a minute of the network's clock) is not laid over it.
func TestOutboxReceiptsOfAnOlderMessageOfTheSameID(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			o := NewOutbox(impl.open(t))
			t0 := time.Now().Truncate(time.Millisecond)
			// The old message's read receipt, whose record outlives its outcome's.
			o.Receipt("m1", domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(t0.Add(-8 * 24 * time.Hour))}, func(error) {})
			o.Flush()
			e := queued("m1", t0)
			if err := o.Accept(context.Background(), &e, ""); err != nil {
				t.Fatal(err)
			}
			// Its own delivered receipt, dated by the network's clock a few seconds behind ours.
			o.Receipt("m1", domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(t0.Add(-5 * time.Second))}, func(error) {})
			o.Flush()
			e.SetStatus(domain.MsgSent, t0)
			o.Settle(e, func(error) {})
			o.Flush()
			got, err := o.Get("m1")
			if err != nil || got.Status != domain.MsgDelivered {
				t.Fatalf("the new message reads %s (%v), want delivered", got.Status, err)
			}
		})
	}
}
