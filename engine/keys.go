package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/gateway/gateway/actors/key"
	"github.com/gateway/gateway/domain"
)

// Key format and scopes (SPEC.md section 2.1).
const (
	KeyPrefix   = "svc_live_"
	keyHexLen   = 48
	ScopeText   = "send_text"
	ScopeMedia  = "send_media"
	ScopeBulk   = "send_bulk"
	ScopeRead   = "read_messages" // GET /api/v1/messages?direction=in (DESIGN.md section 10)
	StatusOn    = "active"
	StatusOff   = "revoked"
	keyActorKnd = "key"
)

// AllScopes are the scopes a key can have, and the default for a new key.
var AllScopes = []string{ScopeText, ScopeMedia, ScopeBulk, ScopeRead}

// Keys is the API key facet: issuing, listing, changing and deleting keys, and checking a raw
// key on every v1 call. Each key is an actor (actors/key) that owns its record and daily
// counter; the facet's registry finds it by id and by the SHA-256 of the raw key.
type Keys struct {
	e        *Engine
	idx      keyIndex
	authPool sync.Pool // *authCall
}

func newKeys(e *Engine) *Keys {
	k := &Keys{e: e}
	k.idx.init()
	k.authPool.New = func() any {
		return &authCall{msg: key.Authorize{Reply: make(chan key.Result, 1)}, timer: newStoppedTimer()}
	}
	return k
}

// boot respawns one actor per stored key.
func (k *Keys) boot(keys []domain.APIKey) int {
	for _, rec := range keys {
		k.spawn(rec)
	}
	return len(keys)
}

// keyEntry is the registry entry of one key: its actor, the last record it published
// (key.Publisher), and the SHA-256 of the raw key.
type keyEntry struct {
	actorRef[domain.APIKey]
	hash [sha256.Size]byte
	// counter is the key's record and daily count, shared with its actor: a call the durable
	// marks cover is counted without a message (key.Counter).
	counter *key.Counter
	// answer is the validate route's answer for this key (ValidAnswer), rendered once.
	answer atomic.Pointer[keyAnswer]
}

// keyAnswer is a rendered validate answer and what it was rendered from: the record the
// actor published and the user directory's version (the answer names the owner's client
// name). It holds no secret: the answer is what the route returns.
//
// on, expiring and expires are the record's revocation and expiry (Status == StatusOn,
// ExpiresAt != nil, *ExpiresAt), copied as the answer is rendered: a published record is never changed (a change
// publishes a new one, and ExpiresAt is set once, at creation), so each call checks them on
// the answer's cache line instead of first loading the record's (a miss under load).
type keyAnswer struct {
	rec      *domain.APIKey
	users    uint64
	on       bool
	expiring bool
	expires  time.Time
	body     []byte
}

// keyIndex finds key actors by key id (the registry) and by the SHA-256 of the raw key
// (byHash: written under the registry's mu, read without it; every v1 call reads it, and an
// RWMutex's reader count is one cache line every core writes).
type keyIndex struct {
	registry[string, *keyEntry]
	byHash atomic.Pointer[hashTable]
}

func (x *keyIndex) init() {
	x.registry.init()
	x.byHash.Store(newHashTable(0))
}

func (x *keyIndex) hash(h [sha256.Size]byte) *keyEntry { return x.byHash.Load().find(&h) }

func (x *keyIndex) add(id string, e *keyEntry) {
	x.mu.Lock()
	x.byID[id] = e
	t := x.byHash.Load()
	if t.full() {
		t = t.rebuilt()
		t.put(e)
		x.byHash.Store(t)
	} else {
		t.put(e)
	}
	x.mu.Unlock()
}

func (x *keyIndex) remove(id string) {
	x.mu.Lock()
	if e := x.byID[id]; e != nil {
		x.byHash.Load().remove(e)
		delete(x.byID, id)
	}
	x.mu.Unlock()
}

// ofOwner lists a user's keys (by the records their actors published).
func (x *keyIndex) ofOwner(uid string) []*keyEntry {
	var out []*keyEntry
	x.each(func(_ string, e *keyEntry) bool {
		if v := e.view.Load(); v != nil && v.UserID == uid {
			out = append(out, e)
		}
		return true
	})
	return out
}

// spawn starts a key's actor from its record and registers it.
func (k *Keys) spawn(rec domain.APIKey) *keyEntry {
	h, err := hex.DecodeString(rec.Hash)
	ent := &keyEntry{}
	if err == nil && len(h) == sha256.Size {
		copy(ent.hash[:], h)
	}
	ent.view.Store(&rec)
	deps := key.Deps{Store: k.e.cfg.Store, Clock: clockFunc(k.e.cfg.Now), Log: k.e.log, Block: k.e.cfg.KeyBlock, Publisher: ent}
	ent.counter = key.NewCounter(rec.ID, k.e.Users.keyPlan(rec.UserID))
	ent.pid = k.e.spawn(key.New(ent.counter, deps), keyActorKnd, rec.ID)
	k.idx.add(rec.ID, ent)
	return ent
}

// KeyRequest is an administrator's request for a new key.
type KeyRequest struct {
	UserID    string
	Name      string
	ExpiresAt *time.Time
	Scopes    []string // nil = all
}

// KeyView is a key as the admin and client views show it.
type KeyView struct {
	domain.Grant
	ClientName string
}

// Create issues a key for a user and returns its record and the raw key, which is not
// stored anywhere (only its SHA-256 is).
func (k *Keys) Create(ctx context.Context, r KeyRequest) (KeyView, string, error) {
	if _, err := k.e.Users.Get(r.UserID); err != nil {
		return KeyView{}, "", err
	}
	if strings.TrimSpace(r.Name) == "" {
		return KeyView{}, "", fmt.Errorf("%w: name is required", domain.ErrValidation)
	}
	if err := checkName("name", r.Name); err != nil {
		return KeyView{}, "", err
	}
	scopes, err := NormalizeScopes(r.Scopes)
	if err != nil {
		return KeyView{}, "", err
	}
	var secret [keyHexLen / 2]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return KeyView{}, "", fmt.Errorf("%w: entropy: %w", domain.ErrUnavailable, err)
	}
	raw := KeyPrefix + hex.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(raw))
	rec := domain.APIKey{
		ID: uuid.NewString(), UserID: r.UserID, Name: r.Name,
		Hash: hex.EncodeToString(sum[:]), Last4: raw[len(raw)-4:],
		Status: StatusOn, Scopes: scopes, CreatedAt: k.e.now().UTC(), ExpiresAt: r.ExpiresAt,
	}
	if err := k.e.cfg.Store.PutKey(ctx, rec); err != nil {
		return KeyView{}, "", fmt.Errorf("%w: save key: %w", domain.ErrUnavailable, err)
	}
	k.spawn(rec)
	plan := k.e.Users.keyPlan(rec.UserID)
	view := KeyView{Grant: domain.Grant{Key: rec, Plan: plan.Name, Limit: plan.Limit}, ClientName: k.e.Users.clientName(rec.UserID)}
	k.e.log.Info("api key created", "key_id", rec.ID, "user_id", rec.UserID)
	return view, raw, nil
}

// NormalizeScopes checks scopes against the known ones, removes repeats, and defaults nil to all.
func NormalizeScopes(in []string) ([]string, error) {
	if in == nil {
		return slices.Clone(AllScopes), nil
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: scopes must not be empty (any of %s)", domain.ErrValidation, strings.Join(AllScopes, ", "))
	}
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("%w: unknown scope %q (any of %s)", domain.ErrValidation, s, strings.Join(AllScopes, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// List returns every key (owner "" ) or one owner's keys, oldest first, with live counters.
func (k *Keys) List(owner string) ([]KeyView, error) {
	var ents []*keyEntry
	if owner == "" {
		ents = k.idx.all()
	} else {
		ents = k.idx.ofOwner(owner)
	}
	out := make([]KeyView, 0, len(ents))
	for _, ent := range ents {
		r, err := k.get(ent)
		if err != nil {
			return nil, err
		}
		out = append(out, KeyView{Grant: r.Grant, ClientName: k.e.Users.clientName(r.Key.UserID)})
	}
	SortKeys(out)
	return out, nil
}

// SortKeys puts keys in the admin list's order: oldest first (then by id).
func SortKeys(ks []KeyView) {
	slices.SortFunc(ks, func(a, b KeyView) int {
		if c := a.Key.CreatedAt.Compare(b.Key.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key.ID, b.Key.ID)
	})
}

// get asks the key's actor for its current view.
func (k *Keys) get(ent *keyEntry) (key.Result, error) {
	msg := &key.Get{Reply: make(chan key.Result, 1)}
	return ask(context.Background(), k.e, ent.pid, msg, msg.Reply, k.e.cfg.AskTimeout, "key")
}

// Update renames a key and/or sets its status (active or revoked).
func (k *Keys) Update(ctx context.Context, id string, name, status *string) error {
	if name != nil && strings.TrimSpace(*name) == "" {
		return fmt.Errorf("%w: name must not be empty", domain.ErrValidation)
	}
	if name != nil {
		if err := checkName("name", *name); err != nil {
			return err
		}
	}
	if status != nil && *status != StatusOn && *status != StatusOff {
		return fmt.Errorf("%w: status must be active or revoked", domain.ErrValidation)
	}
	ent := k.idx.get(id)
	if ent == nil {
		return fmt.Errorf("%w: %s", domain.ErrKeyNotFound, id)
	}
	msg := &key.Update{Name: name, Status: status, Reply: make(chan error, 1)}
	k.e.hw.Send(ent.pid, msg)
	return k.waitErr(ctx, msg.Reply)
}

// Delete removes a key permanently.
func (k *Keys) Delete(ctx context.Context, id string) error {
	ent := k.idx.get(id)
	if ent == nil {
		return fmt.Errorf("%w: %s", domain.ErrKeyNotFound, id)
	}
	msg := &key.Delete{Reply: make(chan error, 1)}
	k.e.hw.Send(ent.pid, msg)
	if err := k.waitErr(ctx, msg.Reply); err != nil {
		return err
	}
	k.idx.remove(id)
	k.e.log.Info("api key deleted", "key_id", id)
	return nil
}

func (k *Keys) waitErr(ctx context.Context, reply chan error) error {
	err, werr := waitReply(ctx, reply, k.e.cfg.AskTimeout, "key")
	if werr != nil {
		return werr
	}
	return err
}

// Validate tells whether a raw key is usable now, without counting a call. It reads the
// record the key actor published, so it costs no actor round trip.
func (k *Keys) Validate(raw []byte) (KeyView, error) {
	ent := k.idx.hash(sha256.Sum256(raw))
	if ent == nil {
		return KeyView{}, domain.ErrUnknownKey
	}
	rec := ent.view.Load()
	return k.viewOf(rec), k.usable(rec)
}

// viewOf is what Validate answers of a key's record.
func (k *Keys) viewOf(rec *domain.APIKey) KeyView {
	return KeyView{Grant: domain.Grant{Key: *rec}, ClientName: k.e.Users.clientName(rec.UserID)}
}

// usable says why a known key may not be used now (nil: it may).
func (k *Keys) usable(rec *domain.APIKey) error {
	if rec.Status != StatusOn {
		return domain.ErrKeyRevoked
	}
	if rec.ExpiresAt != nil && !k.e.now().Before(*rec.ExpiresAt) {
		return domain.ErrKeyExpired
	}
	return nil
}

// ValidAnswer is Validate for the route that answers it: the answer of a valid key, which
// render writes from its view. The answer is kept with the key and given again while the key's
// published record and the user directory are unchanged (a new record, a renamed owner or any
// other profile change renders it anew); revocation and expiry are checked on every call, as
// by Validate. The caller must not modify the answer. On an error there is no answer.
func (k *Keys) ValidAnswer(raw []byte, render func(dst []byte, v *KeyView) []byte) ([]byte, error) {
	ent := k.idx.hash(sha256.Sum256(raw))
	if ent == nil {
		return nil, domain.ErrUnknownKey
	}
	rec := ent.view.Load()
	// The directory's version is read before the client name: a profile stored after this
	// read raises the version, so an answer rendered from the older name is never reused.
	users := k.e.Users.Version()
	if a := ent.answer.Load(); a != nil && a.rec == rec && a.users == users {
		// rec's own revocation and expiry, as usable checks them (keyAnswer).
		switch {
		case !a.on:
			return nil, domain.ErrKeyRevoked
		case a.expiring && !k.e.now().Before(a.expires):
			return nil, domain.ErrKeyExpired
		}
		return a.body, nil
	}
	if err := k.usable(rec); err != nil {
		return nil, err
	}
	v := k.viewOf(rec)
	a := &keyAnswer{rec: rec, users: users, on: rec.Status == StatusOn, body: render(nil, &v)}
	if rec.ExpiresAt != nil {
		a.expiring, a.expires = true, *rec.ExpiresAt
	}
	ent.answer.Store(a)
	return a.body, nil
}

// setPlan gives a user's keys their new plan's cap.
func (k *Keys) setPlan(uid string, plan key.Plan) {
	for _, ent := range k.idx.ofOwner(uid) {
		k.e.hw.Send(ent.pid, key.SetPlan{Plan: plan})
	}
}

// Refund gives back a call Authorize granted that the gateway could not serve (answered 503,
// a full disk say): it does not count against the key's daily cap.
func (k *Keys) Refund(g domain.Grant) {
	if ent := k.idx.get(g.Key.ID); ent != nil && !g.Reset.IsZero() {
		k.e.hw.Send(ent.pid, key.Refund{Day: g.Reset.Add(-24 * time.Hour).UTC().Format(time.DateOnly)})
	}
}

// authCall is a pooled Authorize message with its reply channel and timer.
type authCall struct {
	msg   key.Authorize
	timer *time.Timer
}

// Authorize counts one API call of the raw key for scope ("" = none needed). The error is nil
// when the call may proceed; the grant's limits are filled in either way once the key is known.
func (k *Keys) Authorize(raw []byte, scope string) (domain.Grant, error) {
	ent := k.idx.hash(sha256.Sum256(raw))
	if ent == nil {
		return domain.Grant{}, domain.ErrUnknownKey
	}
	if r, ok := ent.counter.TryAuthorize(k.e.now(), scope); ok {
		return r.Grant, r.Err
	}
	call := k.authPool.Get().(*authCall)
	call.msg.Scope = scope
	call.timer.Reset(k.e.cfg.AskTimeout)
	k.e.hw.Send(ent.pid, &call.msg)
	select {
	case r := <-call.msg.Reply:
		call.timer.Stop()
		k.authPool.Put(call)
		return r.Grant, r.Err
	case <-call.timer.C:
		// The reply may still come: this call (and its channel) is not reused.
		return domain.Grant{}, fmt.Errorf("%w: key actor did not answer", domain.ErrUnavailable)
	case <-k.e.stopCtx.Done():
		call.timer.Stop()
		select {
		case r := <-call.msg.Reply:
			return r.Grant, r.Err
		default:
		}
		// The partition stopped here (fenced: its lease lapsed while NATS elected a leader)
		// and its actors with it. Nothing of the request was stored: the next owner runs it.
		return domain.Grant{}, fmt.Errorf("%w: the key's partition stopped on this node", domain.ErrNodeUnavailable)
	}
}
