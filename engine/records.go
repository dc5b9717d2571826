package engine

import (
	"context"
	"time"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/actors/campaign"
	"github.com/gateway/gateway/actors/key"
	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// What the engine needs from storage: typed stores, each declared here (or by the actor that
// consumes it) as the methods the engine calls. node builds them all on one KV
// (persist.NewRecords) and hands them over in Config; the engine never sees the KV, its keys
// or its transactions.

// Store is the users and API keys.
type Store interface {
	key.Store
	GetUser(id string) (domain.User, error)
	PutUser(ctx context.Context, u domain.User) error
	ListUsers() ([]domain.User, error)
	ListKeys() ([]domain.APIKey, error)
}

// Records are the typed stores besides Store.
type Records struct {
	Outbox      Outbox
	Accounts    account.Store
	Sessions    SessionStore
	Protections Protections
	Campaigns   CampaignStore
	Shops       ShopStore
	Inbox       InboxStore
	History     MessageHistory
	Notes       NotesStore
	StoreLoop   StoreLoopStore
	// The Cloud API's (cloud.go; nil without a cloud network).
	SendLog        network.SendLog
	CloudTemplates CloudTemplateStore
	Routings       RoutingStore
	Windows        WindowStore
	// The Cloud-API-shaped front's uploads (front.go; nil: uploads are refused).
	FrontMedia FrontMediaStore
	// Recount counts at boot what a kill -9 left out of the account snapshots (nil: nothing
	// is recounted, and the count is written every 20 ms; allowance_recount.go).
	Recount AccountRecounter
}

// CloudTemplateStore keeps each cloud session's templates as last synced (persist.CloudTemplates).
type CloudTemplateStore interface {
	CloudTemplates(sessionID string) (domain.TemplateSet, error)
	PutCloudTemplates(ctx context.Context, sessionID string, set domain.TemplateSet) error
	DeleteCloudTemplates(ctx context.Context, sessionID string) error
}

// RoutingStore keeps each account's routing (persist.Routings).
type RoutingStore interface {
	Routing(uid string) (domain.Routing, error)
	PutRouting(ctx context.Context, uid string, r domain.Routing) error
}

// WindowStore keeps each contact's 24-hour service window with a cloud number
// (persist.Windows): when the contact last wrote.
type WindowStore interface {
	LastInbound(sessionID, contact string) (time.Time, error)
	Wrote(ctx context.Context, sessionID, contact string, at time.Time) error
	DeleteSession(ctx context.Context, sessionID string) error
}

// NotesStore keeps what happened to messages after they were written (persist.MessageNotes):
// reactions, the last edit, a revoke, poll votes; one record per (user, message).
type NotesStore interface {
	Notes(uid, id string) (domain.MessageNotes, error)
	PutNotes(ctx context.Context, uid, id string, n domain.MessageNotes) error
}

// Protections are the session protection records (persist.Protections): what the session
// actors read and write, and the removal of a deleted session's.
type Protections interface {
	session.Records
	DeleteSession(ctx context.Context, sessionID string) error
	// Book lists up to limit numbers of a linked phone's contact book after number after.
	Book(sessionID, phone, after string, limit int) ([]domain.BookEntry, error)
}

// Outbox is the durable outbox and the Idempotency-Keys' records (persist.Outbox).
type Outbox interface {
	// Accept commits an accepted entry in one record, with the Idempotency-Key's body hash when
	// idemHash is set (the entry's id is then the one derived from the key). It may move the
	// entry's time up (a clock stepped back: see persist.Outbox).
	Accept(ctx context.Context, e *domain.OutboxEntry, idemHash string) error
	AcceptMany(ctx context.Context, es []domain.OutboxEntry) error
	// Idem reads an idempotency record of its own (a campaign's); IdemOf the one a message
	// carries (by the message's id).
	Idem(idemID string) (domain.IdemRecord, error)
	IdemOf(messageID string) (domain.IdemRecord, error)
	Get(id string) (domain.OutboxEntry, error)
	// Pending lists what is pending (boot), Checkpoint lets the next boot read less (every
	// checkpointEvery).
	Pending() ([]domain.OutboxEntry, error)
	Checkpoint() error
	// Renew writes again the bodies of messages queued long enough for them to near their
	// expiry (run daily); it returns how many.
	Renew() (int, error)
	// Settle and Receipt write in the background (batched); done gets the outcome.
	Settle(e domain.OutboxEntry, done func(error))
	Receipt(id string, c domain.StatusChange, done func(error))
	// Receipts reads the receipts recorded of a message on their own, furthest last (one a
	// boot sends again may have some from before its outcome).
	Receipts(id string) ([]domain.StatusChange, error)
	// Flush waits for the background writes.
	Flush()
	// Requeue writes a queued message's accept record again (a waiting message released to
	// the session its contact wrote to).
	Requeue(ctx context.Context, e domain.OutboxEntry) error
}

// SessionStore is the sessions' records (persist.Sessions).
type SessionStore interface {
	session.Store
	DeleteSession(ctx context.Context, id string) error
	ListSessions() ([]domain.Session, error)
}

// CampaignStore is the campaigns' records (persist.Campaigns).
type CampaignStore interface {
	campaign.Store
	// Accept writes a new campaign and, when idemID is not empty, its request's idempotency
	// record, in one commit.
	Accept(ctx context.Context, c domain.Campaign, idemID string, rec domain.IdemRecord) error
	Each(fn func(domain.Campaign) error) error
}

// ShopStore is the connected stores, pending OAuth installs and templates (persist.Stores).
type ShopStore interface {
	All() ([]domain.Store, error)
	// Replace writes a connect or disconnect in one commit: put (nil = none), the records of
	// remove deleted, the inbox data of drop deleted; it returns the pending entries dropped.
	Replace(ctx context.Context, put *domain.Store, remove, drop []string) (int64, error)
	PutNonce(ctx context.Context, nonce string, n domain.OAuthNonce) error
	Nonce(nonce string) (domain.OAuthNonce, error)
	DeleteNonce(ctx context.Context, nonce string) error
	Templates(uid string) (map[string]domain.Template, error)
	PutTemplates(ctx context.Context, uid string, all map[string]domain.Template) error
}

// InboxStore is the store webhooks' durable inbox (persist.Inbox): what the engine calls, and
// what the storeevents actors read through it.
type InboxStore interface {
	Accept(ctx context.Context, e domain.InboxEntry, deliveryID string) error
	Pending(fn func(shop, seq string) error) error
	DeleteEntries(ctx context.Context, shop string, seqs []string) error
	ScanShop(shop string, fn func(domain.InboxEntry) error) error
	RecentEvents(shop string) ([]domain.StoreEvent, error)
	PendingInbox(shop string) ([]string, error)
	InboxEntry(shop, seq string) (domain.InboxEntry, bool, error)
	LastEventN(shop string) (int64, error)
	AlreadySentMany(shop string, keys []string) ([]bool, error)
	FinishMany(ctx context.Context, shop string, fs []domain.FinishedEvent) error
}

// Sealer seals secrets at rest and opens them (persist.Sealer).
type Sealer interface {
	Seal(plain string) (string, error)
	Open(sealed string) (string, error)
}
