package persist

import (
	"context"
	"errors"

	"github.com/gateway/gateway/domain"
)

// ---- schema: store integration records ----
//
//	store/<shop>           domain.Store (v1); credentials sealed (seal.go)
//	oauth_nonce/<nonce>    OAuthNonce (v1), TTL OAuthNonceTTL (10 min): a pending OAuth install
//	template/<uid>         map[topic]domain.Template (v1): the user's templates by topic
//
// The inbox, dedupe marks and recent events of a shop are in inbox.go.

// Stores holds the connected stores, the pending OAuth installs and the users' message
// templates. It sits on the same KV as the Inbox, so a connect or disconnect commits records
// and inbox removals together (PutOp, DeleteOp, Inbox.ShopDataOps, Commit).
type Stores struct {
	kv        KV
	records   *Table[domain.Store]
	nonces    *Table[domain.OAuthNonce]
	templates *Table[map[string]domain.Template]
	inbox     *Inbox // the shops' inbox data, removed with their records
}

// NewStores returns the store tables on kv.
func NewStores(kv KV) *Stores {
	return &Stores{
		kv:        kv,
		records:   NewTable[domain.Store](kv, "store", 1),
		nonces:    NewTable[domain.OAuthNonce](kv, "oauth_nonce", 1),
		templates: NewTable[map[string]domain.Template](kv, "template", 1),
		inbox:     NewInbox(kv),
	}
}

// Replace writes a connect or a disconnect in one commit: put (nil = none) becomes its shop's
// record, the records of the shops in remove go, and the inbox data (pending entries, dedupe
// marks, recent events) of the shops in drop go with them. It returns how many pending inbox
// entries were dropped.
func (s *Stores) Replace(ctx context.Context, put *domain.Store, remove, drop []string) (int64, error) {
	var ops []Op
	if put != nil {
		op, err := s.records.PutOp(put.Shop, *put)
		if err != nil {
			return 0, err
		}
		ops = append(ops, op)
	}
	for _, shop := range remove {
		ops = append(ops, s.records.DeleteOp(shop))
	}
	var dropped int64
	for _, shop := range drop {
		more, n, err := s.inbox.ShopDataOps(shop)
		if err != nil {
			return 0, err
		}
		ops, dropped = append(ops, more...), dropped+n
	}
	return dropped, s.kv.Commit(ctx, ops...)
}

// All returns every connected store, in shop order.
func (s *Stores) All() ([]domain.Store, error) {
	var recs []domain.Store
	err := s.records.Scan("", func(_ string, r domain.Store) error { recs = append(recs, r); return nil })
	return recs, err
}

// PutNonce saves a pending OAuth install under nonce, expiring after OAuthNonceTTL.
func (s *Stores) PutNonce(ctx context.Context, nonce string, n domain.OAuthNonce) error {
	op, err := s.nonces.PutTTLOp(nonce, n, domain.OAuthNonceTTL)
	if err != nil {
		return err
	}
	return s.kv.Commit(ctx, op)
}

// Nonce reads a pending OAuth install; ErrNotFound when unknown or expired.
func (s *Stores) Nonce(nonce string) (domain.OAuthNonce, error) { return s.nonces.Get(nonce) }

// DeleteNonce consumes a nonce.
func (s *Stores) DeleteNonce(ctx context.Context, nonce string) error {
	return s.nonces.Delete(ctx, nonce)
}

// Templates returns the user's templates by topic; nil when they have written none.
func (s *Stores) Templates(uid string) (map[string]domain.Template, error) {
	m, err := s.templates.Get(uid)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return nil, nil
	}
	return m, err
}

// PutTemplates replaces the user's templates.
func (s *Stores) PutTemplates(ctx context.Context, uid string, all map[string]domain.Template) error {
	return s.templates.Put(ctx, uid, all)
}
