package main

// Identity edge cases against the in-process OpenID provider (zitadel/oidc's OP, as in
// e2e_oidc_test.go): an unknown key id while the keys are fresh, access tokens, a not-before
// past the skew, and the dashboard while the provider hangs.

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/goccy/go-json"
)

func TestOIDCEdgeCases(t *testing.T) {
	sideBySide(t)
	o := startRealOP(t)
	tg := startGW(t, "--auth", "oidc", "--oidc-issuer", o.issuer, "--oidc-audience", opClient, "--dashboard-client-id", opClient)
	client := o.idToken("test-user2", opClient)
	want(t, tg.do("GET", "/api/client/status", bearerAuth(client), nil), 200, "")
	claims := claimsOf(t, client)
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for key, val := range claims {
			c[key] = val
		}
		c[k] = v
		return c
	}
	signing := o.store.active

	t.Run("unknown kid while the keys are fresh", func(t *testing.T) {
		tg := tg.with(t)
		// Every claim of a token issued a moment ago, signed by a stranger under a kid the
		// provider never published: refused (401) once the keys are read again, never
		// answered as a provider outage (503).
		stranger := newOPKey(t, "k-evil")
		start := time.Now()
		r := tg.do("GET", "/api/client/status", bearerAuth(forge(t, jose.RS256, stranger.key, "k-evil", claims)), nil)
		want(t, r, 401, "invalid_token")
		t.Logf("refused after %v", time.Since(start).Round(time.Millisecond))
		// A junk kid again right away (inside the fetch cooldown): still 401.
		want(t, tg.do("GET", "/api/admin/users", bearerAuth(forge(t, jose.RS256, stranger.key, "k-evil-2", claims)), nil), 401, "invalid_token")
		if n := tg.metric(`gateway_id_token_decisions_total{outcome="unavailable"}`); n > 0 {
			t.Fatalf("%v decisions counted as a provider outage", n)
		}
		// The real token still works.
		want(t, tg.do("GET", "/api/client/status", bearerAuth(client), nil), 200, "")
	})

	t.Run("access tokens are not ID tokens", func(t *testing.T) {
		tg := tg.with(t)
		for _, typ := range []string{"at+jwt", "application/at+jwt"} {
			tok := forgeTyp(t, jose.RS256, signing.key, signing.id, typ, claims)
			want(t, tg.do("GET", "/api/client/status", bearerAuth(tok), nil), 401, "invalid_token")
		}
	})

	t.Run("not before", func(t *testing.T) {
		tg := tg.with(t)
		now := time.Now()
		late := forge(t, jose.RS256, signing.key, signing.id, with("nbf", now.Add(3*time.Minute).Unix()))
		want(t, tg.do("GET", "/api/client/status", bearerAuth(late), nil), 401, "invalid_token")
		soon := forge(t, jose.RS256, signing.key, signing.id, with("nbf", now.Add(20*time.Second).Unix()))
		want(t, tg.do("GET", "/api/client/status", bearerAuth(soon), nil), 200, "")
	})

	t.Run("dashboard config from discovery", func(t *testing.T) {
		tg := tg.with(t)
		r := tg.do("GET", "/dashboard/config.json", nil, nil)
		want(t, r, 200, "")
		oidc, _ := r.obj()["oidc"].(map[string]any)
		if oidc["authorizationEndpoint"] != o.issuer+"/auth" || oidc["tokenEndpoint"] != o.issuer+"/oauth/token" {
			t.Fatalf("config: %s", r.raw)
		}
	})
}

// hangProxy stands in front of the provider under the provider's issuer address: while hang
// is set it accepts requests and never answers them.
type hangProxy struct {
	url  string
	hang atomic.Bool
}

func newHangProxy(t *testing.T, target *string) *hangProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{url: "http://" + ln.Addr().String()}
	p.hang.Store(true)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.hang.Load() {
			<-r.Context().Done()
			return
		}
		u, _ := url.Parse("http://" + *target)
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.ErrorLog = nil
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// The dashboard never waits for the provider: started while it hangs, five parallel loads of
// each page are answered within a second (they took 3, 6, 9, 12 and 15 s), and once the
// provider answers, the sign-in configuration has its endpoints without a restart.
func TestDashboardWhileTheProviderHangs(t *testing.T) {
	var target string
	px := newHangProxy(t, &target)
	o := startRealOPAt(t, px.url)
	target = o.addr
	tg := startGW(t, "--auth", "oidc", "--oidc-issuer", px.url, "--oidc-audience", opClient, "--dashboard-client-id", opClient)

	hc := &http.Client{Timeout: 10 * time.Second}
	type answer struct {
		path   string
		status int
		took   time.Duration
		csp    string
		body   string
	}
	var mu sync.Mutex
	var got []answer
	var wg sync.WaitGroup
	for range 5 {
		for _, path := range []string{"/dashboard/", "/dashboard/config.json"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				res, err := hc.Get(tg.url + path)
				a := answer{path: path, took: time.Since(start)}
				if err == nil {
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					a.status, a.csp, a.body = res.StatusCode, res.Header.Get("Content-Security-Policy"), string(b)
				}
				mu.Lock()
				got = append(got, a)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, a := range got {
		if a.status != 200 || a.took > time.Second {
			t.Errorf("%s while the provider hangs: %d after %v", a.path, a.status, a.took)
		}
		if a.path == "/dashboard/" && !strings.Contains(a.csp, "connect-src 'self' "+px.url+";") {
			t.Errorf("CSP without the issuer's origin: %q", a.csp)
		}
		if a.path == "/dashboard/config.json" && !strings.Contains(a.body, `"error":"the identity provider cannot be reached`) {
			t.Errorf("config while the provider hangs: %s", a.body)
		}
	}
	px.hang.Store(false)
	eventually(t, 15*time.Second, "the sign-in endpoints once the provider answers", func() bool {
		var c struct {
			OIDC struct {
				TokenEndpoint string `json:"tokenEndpoint"`
			} `json:"oidc"`
		}
		r := tg.do("GET", "/dashboard/config.json", nil, nil)
		return json.Unmarshal(r.raw, &c) == nil && c.OIDC.TokenEndpoint == px.url+"/oauth/token"
	})
}
