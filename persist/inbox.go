package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gateway/gateway/domain"
)

// ---- schema: the store webhooks' inbox ----
//
//	inbox/<shop>/<seq>                  domain.InboxEntry (v1) until its outcome is recorded;
//	                                    seq is InboxSeq's fixed-width number (processing order)
//	webhook_seen/<shop>/<delivery id>   empty record (v1), TTL WebhookSeenTTL (3 days): dedupe
//	                                    of the platform's deliveries
//	store_sent/<shop>/<event key>       empty record (v1), TTL StoreSentTTL (30 days): a message
//	                                    went out for this order event (ecom.Event.DedupeKey)
//	store_event/<shop>/<slot>           domain.StoreEvent (v1), TTL StoreEventTTL (30 days): the
//	                                    last domain.RecentStoreEvents outcomes, a ring (slot =
//	                                    N % RecentStoreEvents, two digits)

// TTLs of the inbox's marks and records.
const (
	WebhookSeenTTL = 72 * time.Hour // Shopify retries a delivery for 4 h; WooCommerce for less
	StoreSentTTL   = 30 * 24 * time.Hour
	StoreEventTTL  = 30 * 24 * time.Hour
)

const inboxVersion = 1

// Inbox is the store webhooks' durable inbox with its dedupe marks and each shop's recent
// outcomes. Its methods PendingInbox, InboxEntry, LastEventN and AlreadySent are what a
// storeevents actor reads; Finish records an outcome.
type Inbox struct {
	kv      KV
	entries *Table[domain.InboxEntry]
	seen    *Table[struct{}]
	sent    *Table[struct{}]
	events  *Table[domain.StoreEvent]
	// empty is an encoded empty record, the value of every seen and sent mark.
	empty []byte
}

// NewInbox returns the inbox tables on kv.
func NewInbox(kv KV) *Inbox {
	empty, err := Encode(inboxVersion, struct{}{})
	if err != nil {
		panic(err) // an empty struct always encodes
	}
	return &Inbox{
		kv:      kv,
		entries: NewTable[domain.InboxEntry](kv, "inbox", inboxVersion),
		seen:    NewTable[struct{}](kv, "webhook_seen", inboxVersion),
		sent:    NewTable[struct{}](kv, "store_sent", inboxVersion),
		events:  NewTable[domain.StoreEvent](kv, "store_event", inboxVersion),
		empty:   empty,
	}
}

// ---- the webhook receiver ----

// Seen tells whether a delivery of the shop was accepted already (within WebhookSeenTTL).
func (in *Inbox) Seen(shop, deliveryID string) bool {
	_, err := in.kv.Get(in.seen.key(shop + "/" + deliveryID))
	return err == nil
}

// Accept commits an entry whose body json.Valid has checked and, when deliveryID is not "",
// the delivery's dedupe mark, in one commit; ErrExists (nothing written) when that delivery
// was accepted before.
func (in *Inbox) Accept(ctx context.Context, e domain.InboxEntry, deliveryID string) error {
	put, err := in.entryOp(e)
	if err != nil {
		return fmt.Errorf("%w: %w", domain.ErrInboxEntry, err)
	}
	if deliveryID == "" {
		return in.kv.Commit(ctx, put)
	}
	seen := in.seen.key(e.Shop + "/" + deliveryID)
	return in.kv.Commit(ctx, IfAbsentOp(seen), put, Op{Key: seen, Value: in.empty, TTL: WebhookSeenTTL})
}

// entryOp is entries.PutOp for an entry whose body json.Valid has checked: the body is spliced
// in as it came instead of being validated and compacted again by the encoder (the record
// reads back the same through the entries table).
func (in *Inbox) entryOp(e domain.InboxEntry) (Op, error) {
	body := e.Body
	e.Body = nil
	head, err := Encode(in.entries.version, e) // ends with `,"body":null}`
	if err != nil {
		return Op{}, err
	}
	head, ok := bytes.CutSuffix(head, []byte("null}"))
	if !ok {
		return Op{}, errors.New("inbox entry encoding: unexpected shape")
	}
	v := make([]byte, 0, len(head)+len(body)+1)
	v = append(append(append(v, head...), body...), '}')
	return Op{Key: in.entries.key(e.Shop + "/" + e.Seq), Value: v}, nil
}

// ---- boot, connect and disconnect ----

// Pending calls fn for every inbox entry of every shop, in key order, without decoding them.
func (in *Inbox) Pending(fn func(shop, seq string) error) error {
	return in.kv.Scan([]byte(in.entries.prefix), func(key, _ []byte) error {
		shop, seq, ok := strings.Cut(string(key[len(in.entries.prefix):]), "/")
		if !ok {
			return nil
		}
		return fn(shop, seq)
	})
}

// DeleteOp is the removal of one inbox entry, for a commit with other ops.
func (in *Inbox) DeleteOp(shop, seq string) Op { return in.entries.DeleteOp(shop + "/" + seq) }

// ShopDataOps are the deletions of a shop's pending inbox and recent events, and how many
// inbox entries they remove. The dedupe marks stay and expire.
func (in *Inbox) ShopDataOps(shop string) (ops []Op, pending int64, err error) {
	for _, t := range []string{in.entries.prefix, in.events.prefix} {
		err := in.kv.Scan([]byte(t+shop+"/"), func(key, _ []byte) error {
			ops = append(ops, Op{Key: bytes.Clone(key), Delete: true})
			if t == in.entries.prefix {
				pending++
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return ops, pending, nil
}

// DeleteEntries removes pending entries of shop (those of a store no longer connected, found
// at boot) in one commit.
func (in *Inbox) DeleteEntries(ctx context.Context, shop string, seqs []string) error {
	ops := make([]Op, len(seqs))
	for i, seq := range seqs {
		ops[i] = in.DeleteOp(shop, seq)
	}
	return in.kv.Commit(ctx, ops...)
}

// ---- the storeevents actor's storage ----

// PendingInbox lists the seqs of the shop's inbox, in order.
func (in *Inbox) PendingInbox(shop string) ([]string, error) {
	var seqs []string
	prefix := in.entries.prefix + shop + "/"
	err := in.kv.Scan([]byte(prefix), func(key, _ []byte) error {
		seqs = append(seqs, string(key[len(prefix):]))
		return nil
	})
	return seqs, err
}

// InboxEntry reads one entry; found is false once it was removed.
func (in *Inbox) InboxEntry(shop, seq string) (domain.InboxEntry, bool, error) {
	e, err := in.entries.Get(shop + "/" + seq)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return e, false, nil
	}
	return e, err == nil, err
}

// ScanShop calls fn for the shop's pending entries, in order.
func (in *Inbox) ScanShop(shop string, fn func(domain.InboxEntry) error) error {
	return in.entries.Scan(shop+"/", func(_ string, e domain.InboxEntry) error { return fn(e) })
}

// LastEventN is the highest StoreEvent.N recorded for the shop (0 for none).
func (in *Inbox) LastEventN(shop string) (int64, error) {
	var n int64
	err := in.events.Scan(shop+"/", func(_ string, r domain.StoreEvent) error {
		n = max(n, r.N)
		return nil
	})
	return n, err
}

// RecentEvents returns the shop's recorded outcomes, in slot order.
func (in *Inbox) RecentEvents(shop string) ([]domain.StoreEvent, error) {
	var out []domain.StoreEvent
	err := in.events.Scan(shop+"/", func(_ string, r domain.StoreEvent) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// AlreadySent tells whether a message for this event (ecom.Event.DedupeKey) went out already.
func (in *Inbox) AlreadySent(shop, key string) bool {
	_, err := in.kv.Get(in.sent.key(shop + "/" + key))
	return err == nil
}

// AlreadySentMany is AlreadySent for several keys of one shop, in one read.
func (in *Inbox) AlreadySentMany(shop string, keys []string) ([]bool, error) {
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = in.sent.key(shop + "/" + k)
	}
	return Has(in.kv, ks)
}

// Finish records an outcome in one commit: the record in its ring slot, the inbox entry
// removed (seq "" = none), and sentKey marked as sent (ecom.Event.DedupeKey; "" = none). It
// returns ErrNotFound, and writes nothing, when the entry seq was removed meanwhile (its store
// was disconnected).
func (in *Inbox) Finish(ctx context.Context, shop, seq string, rec domain.StoreEvent, sentKey string) error {
	return in.FinishMany(ctx, shop, []domain.FinishedEvent{{Seq: seq, Record: rec, SentKey: sentKey}})
}

// FinishMany records several outcomes of one shop in one commit, as Finish does each; if any of
// their entries was removed meanwhile (a disconnect removes them all), nothing is written and
// it returns ErrNotFound. The entries' presence is a condition of the commit, not a read
// before it (a read waits for the commits in flight).
func (in *Inbox) FinishMany(ctx context.Context, shop string, fs []domain.FinishedEvent) error {
	ops := make([]Op, 0, 3*len(fs))
	for _, f := range fs {
		put, err := in.events.PutTTLOp(eventSlot(shop, f.Record.N), f.Record, StoreEventTTL)
		if err != nil {
			return err
		}
		if f.Seq != "" {
			key := in.entries.key(shop + "/" + f.Seq)
			ops = append(ops, IfPresentOp(key), Op{Key: key, Delete: true})
		}
		ops = append(ops, put)
		if f.SentKey != "" {
			ops = append(ops, Op{Key: in.sent.key(shop + "/" + f.SentKey), Value: in.empty, TTL: StoreSentTTL})
		}
	}
	return in.kv.Commit(ctx, ops...)
}

// eventSlot is the ring slot of the shop's record number n.
func eventSlot(shop string, n int64) string {
	return fmt.Sprintf("%s/%02d", shop, n%domain.RecentStoreEvents)
}
