package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/ecom/ecomtest"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

func newStoreEngine(t *testing.T, kv persist.KV, clk *clock, fake *ecomtest.Platform, sc StoreConfig) *Engine {
	t.Helper()
	net, err := sim.Open(sim.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	sc.Client = ecom.NewClient(ecom.ClientOptions{APIBase: fake.APIBase()})
	sc.PublicURL = "https://gw.example.com/"
	if sc.Sealer == nil {
		sc.Sealer = persist.NewSealer(nil, "") // a key for the test's life
	}
	rs := persist.NewRecords(kv)
	e, err := New(Config{
		Store: rs.Store, Records: recordsOf(rs), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: clk.now, Network: net, Stores: sc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e
}

// An OAuth state is good for 10 minutes, once, for the user and shop it was issued for.
func TestOAuthNonceExpiresAndIsSingleUse(t *testing.T) {
	fake := ecomtest.New()
	defer fake.Close()
	const shop = "acme.myshopify.com"
	fake.AddShop(shop, "Acme", "")
	fake.SetApp("cid", "csecret")
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	e := newStoreEngine(t, persist.NewMemory(), clk, fake, StoreConfig{})
	ctx := context.Background()

	callback := func(authURL, code string) error {
		u, err := url.Parse(authURL)
		if err != nil {
			t.Fatal(err)
		}
		q := url.Values{"code": {code}, "shop": {shop}, "state": {u.Query().Get("state")}, "timestamp": {"1"}}
		q.Set("hmac", ecom.SignOAuthQuery(q, "csecret"))
		_, err = e.Stores.OAuthCallback(ctx, q)
		return err
	}
	reason := func(err error) string {
		var ce *CallbackError
		if !errors.As(err, &ce) {
			t.Fatalf("callback error %v is not a CallbackError", err)
		}
		return ce.Reason
	}

	authURL, _, err := e.Stores.OAuthInit(ctx, "alice", shop, "cid", "csecret")
	if err != nil {
		t.Fatal(err)
	}
	fake.AddCode(shop, "c1", "shpat_x", "read_orders")
	clk.set(clk.now().Add(10*time.Minute + time.Second))
	if err := callback(authURL, "c1"); reason(err) != CallbackInvalidState {
		t.Fatalf("expired state: %v", err)
	}
	if _, err := e.Stores.Get("alice"); !errors.Is(err, domain.ErrStoreNotFound) {
		t.Fatalf("a store was saved after an expired state: %v", err)
	}

	authURL, _, err = e.Stores.OAuthInit(ctx, "alice", shop, "cid", "csecret")
	if err != nil {
		t.Fatal(err)
	}
	clk.set(clk.now().Add(9 * time.Minute))
	if err := callback(authURL, "c1"); err != nil {
		t.Fatalf("callback within 10 minutes: %v", err)
	}
	if v, err := e.Stores.Get("alice"); err != nil || v.Method != domain.StoreMethodOAuth || v.ShopName != "Acme" || v.WebhooksRegistered != 5 {
		t.Fatalf("store %+v err %v", v, err)
	}
	if err := callback(authURL, "c1"); reason(err) != CallbackInvalidState {
		t.Fatalf("replayed state: %v", err)
	}

	// The configured app credentials stand in when oauth-init gives none.
	if _, _, err := e.Stores.OAuthInit(ctx, "alice", shop, "", ""); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("no credentials anywhere: %v", err)
	}
	if _, _, err := e.Stores.OAuthInit(ctx, "alice", "acme.example.com", "cid", "csecret"); !errors.Is(err, domain.ErrInvalidShop) {
		t.Fatalf("bad shop: %v", err)
	}
}

// Credentials are sealed at rest, with the configured key or a 0600 key file made on first use;
// a gateway restarted with the same key reads them back.
func TestStoreSecretsSealedAtRest(t *testing.T) {
	fake := ecomtest.New()
	defer fake.Close()
	const shop = "acme.myshopify.com"
	fake.AddShop(shop, "Acme", "shpat_plaintext_token")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secret.key")
	clk := &clock{t: time.Now()}
	kv := persist.NewMemory()
	e := newStoreEngine(t, kv, clk, fake, StoreConfig{Sealer: persist.NewSealer(nil, keyFile)})
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key file made before any store was connected: %v", err)
	}
	if _, err := e.Stores.ManualConnect(context.Background(), "alice", shop, "shpat_plaintext_token", "hook-secret-plain"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	err = kv.Scan(nil, func(k, v []byte) error {
		for _, s := range []string{"shpat_plaintext_token", "hook-secret-plain"} {
			if bytes.Contains(v, []byte(s)) {
				t.Errorf("%s holds %q in the clear", k, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Stop(context.Background())

	// Same data, same key file: the webhook secret opens (signatures verify).
	e2 := newStoreEngine(t, kv, clk, fake, StoreConfig{Sealer: persist.NewSealer(nil, keyFile)})
	body := []byte(`{"id":1}`)
	w := Webhook{UID: []byte("alice"), Body: body, Header: headers{"X-Shopify-Topic": "orders/create", "X-Shopify-Hmac-Sha256": ecom.SignWebhook(body, "hook-secret-plain")}}
	if res, err := e2.Stores.AcceptWebhook(context.Background(), w); err != nil || res.Status != WebhookIgnored {
		t.Fatalf("signed webhook after a restart: %+v %v", res, err)
	}
	e2.Stop(context.Background())

	// Another key: the secret does not open, and signed webhooks are refused rather than trusted.
	other := make([]byte, 32)
	other[0] = 1
	e3 := newStoreEngine(t, kv, clk, fake, StoreConfig{Sealer: persist.NewSealer(other, "")})
	if _, err := e3.Stores.AcceptWebhook(context.Background(), w); !errors.Is(err, domain.ErrInvalidSignature) {
		t.Fatalf("webhook with an unreadable secret: %v", err)
	}
}

// BenchmarkAcceptWebhook is the receiver's hot path: resolve, verify the signature, dedupe,
// commit the entry and its dedupe mark (memory KV), hand it to the store's actor.
func BenchmarkAcceptWebhook(b *testing.B) {
	fake := ecomtest.New()
	defer fake.Close()
	const shop = "acme.myshopify.com"
	fake.AddShop(shop, "Acme", "shpat_bench")
	net, err := sim.Open(sim.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer net.Close()
	rs := persist.NewRecords(persist.NewMemory())
	e, err := New(Config{
		Store: rs.Store, Records: recordsOf(rs), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Network: net,
		Stores: StoreConfig{Client: ecom.NewClient(ecom.ClientOptions{APIBase: fake.APIBase()}), PublicURL: "https://gw.example.com", Sealer: persist.NewSealer(nil, "")},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Stop(context.Background())
	ctx := context.Background()
	if _, err := e.Stores.ManualConnect(ctx, "alice", shop, "shpat_bench", "hook-secret"); err != nil {
		b.Fatal(err)
	}
	body, err := os.ReadFile("../ecom/testdata/shopify/order.json")
	if err != nil {
		b.Fatal(err)
	}
	h := headers{"X-Shopify-Topic": "orders/create", "X-Shopify-Hmac-Sha256": ecom.SignWebhook(body, "hook-secret")}
	w := Webhook{UID: []byte("alice"), Body: body, Header: h}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		h["X-Shopify-Webhook-Id"] = strconv.Itoa(i)
		if res, err := e.Stores.AcceptWebhook(ctx, w); err != nil || res.Status != WebhookQueued {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// headers are a webhook's request headers, by canonical name.
type headers map[string]string

func (h headers) Peek(name string) []byte { return []byte(h[name]) }
