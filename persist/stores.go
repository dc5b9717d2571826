package persist

import (
	"context"
	"errors"
	"time"

	"github.com/gateway/gateway/domain"
)

// ---- schema: store integration records ----
//
//	store/<shop>           domain.Store (v1); credentials sealed (seal.go)
//	oauth_nonce/<nonce>    OAuthNonce (v1), TTL OAuthNonceTTL (10 min): a pending OAuth install
//	template/<uid>         map[topic]domain.Template (v1): the user's templates by topic
//
// The inbox, dedupe marks and recent events of a shop are in inbox.go.

// OAuthNonceTTL is how long an OAuth install may take: the nonce expires from storage then,
// and a callback presenting an older one is refused.
const OAuthNonceTTL = 10 * time.Minute

// OAuthNonce is a pending OAuth install: who started it, for which shop, with which app.
type OAuthNonce struct {
	UserID         string    `json:"userId"`
	Shop           string    `json:"shop"`
	ClientID       string    `json:"clientId"`
	ClientSecret   string    `json:"clientSecret,omitempty"` // sealed
	AppCredentials bool      `json:"appCredentials,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}

// Stores holds the connected stores, the pending OAuth installs and the users' message
// templates. It sits on the same KV as the Inbox, so a connect or disconnect commits records
// and inbox removals together (PutOp, DeleteOp, Inbox.ShopDataOps, Commit).
type Stores struct {
	kv        KV
	records   *Table[domain.Store]
	nonces    *Table[OAuthNonce]
	templates *Table[map[string]domain.Template]
}

// NewStores returns the store tables on kv.
func NewStores(kv KV) *Stores {
	return &Stores{
		kv:        kv,
		records:   NewTable[domain.Store](kv, "store", 1),
		nonces:    NewTable[OAuthNonce](kv, "oauth_nonce", 1),
		templates: NewTable[map[string]domain.Template](kv, "template", 1),
	}
}

// All returns every connected store, in shop order.
func (s *Stores) All() ([]domain.Store, error) {
	var recs []domain.Store
	err := s.records.Scan("", func(_ string, r domain.Store) error { recs = append(recs, r); return nil })
	return recs, err
}

// PutOp is the write of a store's record, for a commit with other ops.
func (s *Stores) PutOp(rec domain.Store) (Op, error) { return s.records.PutOp(rec.Shop, rec) }

// DeleteOp is the removal of a shop's record, for a commit with other ops.
func (s *Stores) DeleteOp(shop string) Op { return s.records.DeleteOp(shop) }

// Commit applies ops (from this store and the Inbox) atomically.
func (s *Stores) Commit(ctx context.Context, ops ...Op) error { return s.kv.Commit(ctx, ops...) }

// PutNonce saves a pending OAuth install under nonce, expiring after OAuthNonceTTL.
func (s *Stores) PutNonce(ctx context.Context, nonce string, n OAuthNonce) error {
	op, err := s.nonces.PutTTLOp(nonce, n, OAuthNonceTTL)
	if err != nil {
		return err
	}
	return s.kv.Commit(ctx, op)
}

// Nonce reads a pending OAuth install; ErrNotFound when unknown or expired.
func (s *Stores) Nonce(nonce string) (OAuthNonce, error) { return s.nonces.Get(nonce) }

// DeleteNonce consumes a nonce.
func (s *Stores) DeleteNonce(ctx context.Context, nonce string) error {
	return s.nonces.Delete(ctx, nonce)
}

// Templates returns the user's templates by topic; nil when they have written none.
func (s *Stores) Templates(uid string) (map[string]domain.Template, error) {
	m, err := s.templates.Get(uid)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return m, err
}

// PutTemplates replaces the user's templates.
func (s *Stores) PutTemplates(ctx context.Context, uid string, all map[string]domain.Template) error {
	return s.templates.Put(ctx, uid, all)
}
