package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/identity"
)

// fleet is what provisioning made through the API: the admin and the users, each with a
// session linked through the sim, an API key and (when the gateway has the route) a store.
type fleet struct {
	adminToken string
	users      []benchUser
	stores     bool   // every user has a store connected with webhookSecret
	storesNote string // why not, when stores is false
	// idle are extra users with a store but no linked session: their stores accept webhooks
	// into the inbox and hold them there (the events wait for the session), so webhooks sent
	// to them measure the route alone.
	idle []benchUser
}

// idleStores is how many idle users (stores without a linked session) a fleet has.
const idleStores = 20

type benchUser struct {
	id        string
	token     string // client ID token
	sessionID string
	phone     string // the session's own number (the sender)
	key       string // raw API key
	shop      string // store domain
}

// webhookSecret signs every bench store's webhooks (one secret for all stores keeps the
// generator to one HMAC state per connection; the gateway's cost is the same).
const webhookSecret = "bench-webhook-signing-secret"

func userID(i int) string      { return fmt.Sprintf("bench-u%05d", i) }
func senderPhone(i int) string { return fmt.Sprintf("4930%07d", i) }
func shopDomain(i int) string  { return fmt.Sprintf("bench-u%05d.myshopify.com", i) }

// provisionOptions says what to provision.
type provisionOptions struct {
	users       int
	concurrency int
	scan        bool // link by POST /api/dev/sim/scan (false: the gateway runs --sim-autopair)
	keys        bool
	stores      bool
	// mint makes ID tokens (nil: `gateway token` and the dev issuer's key file in the
	// gateway's data dir; a cluster's key is in its store: bench cluster mints through a node).
	mint func(uid, role string) (string, error)
}

// provision makes the fleet through the public API: the admin token from `gateway token`,
// then per user: a client token from the dev issuer, GET /api/client/qr (creates the profile and the session),
// the sim scan, an API key from the admin, and a store; finally it waits until every
// session reports CONNECTED.
func provision(ctx context.Context, g *gatewayProc, o provisionOptions) (*fleet, error) {
	mint := o.mint
	if mint == nil {
		// Client tokens come from the dev issuer in-process: the code `gateway token` runs,
		// with the same key file, without a process start per user (which dominated
		// provisioning at 10,000 users).
		_, issuer, err := identity.NewDev(g.data)
		if err != nil {
			return nil, err
		}
		mint = func(uid, role string) (string, error) {
			if role == "admin" {
				return mintToken(g.bin, g.data, uid, role)
			}
			return issuer.Mint(identity.TokenRequest{UID: uid, Name: "Bench " + uid, Email: uid + "@bench.example.com", TTL: 6 * time.Hour})
		}
	}
	admin, err := mint("bench-admin", "admin")
	if err != nil {
		return nil, err
	}
	f := &fleet{adminToken: admin, users: make([]benchUser, o.users)}
	for i := range f.users {
		f.users[i] = benchUser{id: userID(i), phone: senderPhone(i), shop: shopDomain(i)}
	}
	f.stores = o.stores
	var storesMissing atomic.Bool
	err = parallel(ctx, o.users, o.concurrency, func(i int) error {
		u := &f.users[i]
		var err error
		u.token, err = mint(u.id, "")
		if err != nil {
			return err
		}
		st, body, err := g.api.do("GET", "/api/client/qr", []header{bearer(u.token)}, nil)
		if err := want2xx("GET /api/client/qr", st, body, err); err != nil {
			return err
		}
		var qr struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(body, &qr); err != nil || qr.SessionID == "" {
			return fmt.Errorf("GET /api/client/qr: no sessionId in %.200s", body)
		}
		u.sessionID = qr.SessionID
		if o.scan {
			st, body, err = g.api.do("POST", "/api/dev/sim/scan", nil, mustJSON(map[string]string{"sessionId": u.sessionID, "phone": u.phone}))
			if err := want2xx("POST /api/dev/sim/scan", st, body, err); err != nil {
				return err
			}
		}
		if o.keys {
			if u.key, err = createKey(g.api, admin, u.id); err != nil {
				return err
			}
		}
		if o.stores && !storesMissing.Load() {
			st, body, err = g.api.do("POST", "/api/ecom/native-connect", []header{bearer(u.token)},
				mustJSON(map[string]string{"shop": u.shop, "webhookSecret": webhookSecret}))
			if err == nil && routeMissing(st, body) {
				storesMissing.Store(true)
				return nil
			}
			if err := want2xx("POST /api/ecom/native-connect", st, body, err); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if storesMissing.Load() {
		f.stores, f.storesNote = false, "POST /api/ecom/native-connect is not served yet (stores cannot be connected)"
	}
	if f.stores {
		f.idle = make([]benchUser, idleStores)
		err = parallel(ctx, idleStores, o.concurrency, func(i int) error {
			u := &f.idle[i]
			*u = benchUser{id: userID(o.users + i), phone: senderPhone(o.users + i), shop: shopDomain(o.users + i)}
			var err error
			if u.token, err = mint(u.id, ""); err != nil {
				return err
			}
			// The profile and an unlinked session, then the store.
			st, body, err := g.api.do("GET", "/api/client/qr", []header{bearer(u.token)}, nil)
			if err := want2xx("GET /api/client/qr", st, body, err); err != nil {
				return err
			}
			st, body, err = g.api.do("POST", "/api/ecom/native-connect", []header{bearer(u.token)},
				mustJSON(map[string]string{"shop": u.shop, "webhookSecret": webhookSecret}))
			return want2xx("POST /api/ecom/native-connect", st, body, err)
		})
		if err != nil {
			return nil, err
		}
	}
	if err := waitConnected(ctx, g, f, o.concurrency, 2*time.Minute); err != nil {
		return nil, err
	}
	return f, nil
}

// createKey makes an API key with every scope for the user and returns its raw key.
func createKey(api *apiClient, admin, uid string) (string, error) {
	st, body, err := api.do("POST", "/api/admin/apikeys", []header{bearer(admin)},
		mustJSON(map[string]any{"userId": uid, "name": "bench", "scopes": []string{"send_text", "send_media", "send_bulk"}}))
	if err := want2xx("POST /api/admin/apikeys", st, body, err); err != nil {
		return "", err
	}
	var k struct {
		RawKey string `json:"rawKey"`
	}
	if err := json.Unmarshal(body, &k); err != nil || k.RawKey == "" {
		return "", fmt.Errorf("POST /api/admin/apikeys: no rawKey in %.200s", body)
	}
	return k.RawKey, nil
}

// waitConnected polls each user's GET /api/client/status until it reports CONNECTED.
func waitConnected(ctx context.Context, g *gatewayProc, f *fleet, concurrency int, total time.Duration) error {
	deadline := time.Now().Add(total)
	return parallel(ctx, len(f.users), concurrency, func(i int) error {
		for {
			st, body, err := g.api.do("GET", "/api/client/status", []header{bearer(f.users[i].token)}, nil)
			if err := want2xx("GET /api/client/status", st, body, err); err != nil {
				return err
			}
			var s struct {
				Status string `json:"status"`
			}
			if json.Unmarshal(body, &s) == nil && s.Status == "CONNECTED" {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("user %s: session not CONNECTED after %v: %s", f.users[i].id, total, body)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// parallel runs fn(0..n-1) on up to k goroutines and returns the first error.
func parallel(ctx context.Context, n, k int, fn func(i int) error) error {
	var (
		next  atomic.Int64
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) { once.Do(func() { first = err }) }
	var failed atomic.Bool
	for range min(n, k) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					fail(err)
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// want2xx turns a transport error or a non-2xx answer into an error naming the call.
func want2xx(call string, status int, body []byte, err error) error {
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return fmt.Errorf("%s: status %d: %.300s", call, status, body)
	}
	return nil
}

// routeMissing tells the gateway's "no such route" answer (404, code not_found) from a 404
// about a resource.
func routeMissing(status int, body []byte) bool {
	if status != 404 {
		return false
	}
	var e struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(body, &e) == nil && e.Code == "not_found"
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values built in this package get here
	}
	return b
}
