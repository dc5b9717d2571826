//go:build ui

package uitest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// fakeIdP is an OpenID provider on loopback with the authorization-code flow and PKCE (S256):
// its authorization endpoint approves at once, as a user who is already signed in there.
type fakeIdP struct {
	t        *testing.T
	srv      *httptest.Server
	key      *rsa.PrivateKey
	clientID string
	mu       sync.Mutex
	codes    map[string]pending
	redeemed int
}

type pending struct{ challenge, nonce, redirect string }

func newFakeIdP(t *testing.T, clientID string) *fakeIdP {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	idp := &fakeIdP{t: t, key: key, clientID: clientID, codes: map[string]pending{}}
	idp.srv = httptest.NewServer(http.HandlerFunc(idp.serve))
	t.Cleanup(idp.srv.Close)
	return idp
}

func (idp *fakeIdP) serve(w http.ResponseWriter, r *http.Request) {
	base := idp.srv.URL
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		writeJSON(w, map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
			"jwks_uri": base + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"}})
	case "/jwks":
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &idp.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	case "/authorize":
		q := r.URL.Query()
		if q.Get("client_id") != idp.clientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "bad authorization request: "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		code := "code-" + q.Get("state")
		idp.mu.Lock()
		idp.codes[code] = pending{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
		idp.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	case "/token":
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_ = r.ParseForm()
		idp.mu.Lock()
		p, ok := idp.codes[r.PostForm.Get("code")]
		delete(idp.codes, r.PostForm.Get("code"))
		idp.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok, r.PostForm.Get("grant_type") != "authorization_code", r.PostForm.Get("client_id") != idp.clientID:
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_grant"})
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != p.challenge:
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_grant", "error_description": "PKCE verification failed"})
			return
		case r.PostForm.Get("redirect_uri") != p.redirect:
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_grant", "error_description": "redirect_uri differs"})
			return
		}
		idp.mu.Lock()
		idp.redeemed++
		idp.mu.Unlock()
		writeJSON(w, map[string]any{"id_token": idp.mint("olivia", "Olivia", p.nonce), "access_token": "at", "token_type": "Bearer", "expires_in": 3600})
	case "/v1/accounts:signInWithPassword":
		// Firebase's Identity Toolkit, as the dashboard calls it (a JSON POST, so CORS preflight).
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "POST")
			w.Header().Set("Access-Control-Allow-Headers", "content-type")
			return
		}
		var req struct {
			Email, Password   string
			ReturnSecureToken bool
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if r.URL.Query().Get("key") != "web-api-key" || req.Email != "fiona@example.com" || req.Password != "correct horse" || !req.ReturnSecureToken {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]any{"error": map[string]any{"code": 400, "message": "INVALID_LOGIN_CREDENTIALS"}})
			return
		}
		writeJSON(w, map[string]any{"idToken": idp.mint("fiona", "Fiona", ""), "refreshToken": "rt", "expiresIn": "3600", "localId": "fiona"})
	default:
		http.NotFound(w, r)
	}
}

// mint signs an ID token for sub, as this provider.
func (idp *fakeIdP) mint(sub, name, nonce string) string {
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: idp.key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	now := time.Now()
	extra := map[string]any{"name": name, "email": sub + "@example.com", "auth_time": now.Unix()}
	if nonce != "" {
		extra["nonce"] = nonce
	}
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: idp.srv.URL, Subject: sub, Audience: jwt.Audience{idp.clientID},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Claims(extra).Serialize()
	if err != nil {
		idp.t.Errorf("sign: %v", err)
	}
	return tok
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func TestOIDCSignIn(t *testing.T) {
	idp := newFakeIdP(t, "dashboard-client")
	g := startGateway(t, "--auth", "oidc", "--oidc-issuer", idp.srv.URL, "--oidc-audience", "dashboard-client", "--dashboard-client-id", "dashboard-client")
	b := newBrowser(t)

	b.open(g.url + "/dashboard/")
	b.waitFor("the OIDC button", `document.querySelector('#oidc-signin') && !document.querySelector('#oidc-signin').disabled`)
	if b.text("#dev-signin") != "" {
		t.Error("the dev form is offered in OIDC mode")
	}
	b.click("#oidc-signin")
	b.waitFor("the session screen", `document.querySelector('#session-status')`, 15*time.Second)
	if who := b.text("header .who"); !strings.Contains(who, "Olivia") {
		t.Errorf("header says %q", who)
	}
	var href string
	b.eval("location.href", &href)
	if strings.Contains(href, "code=") || strings.Contains(href, "state=") {
		t.Errorf("the code is left in the address: %s", href)
	}
	idp.mu.Lock()
	redeemed := idp.redeemed
	idp.mu.Unlock()
	if redeemed != 1 {
		t.Errorf("the token endpoint issued %d tokens, want 1", redeemed)
	}

	// An answer that this tab did not start: refused with a sentence, no loop.
	b.open(g.url + "/dashboard/?code=stolen&state=forged")
	b.waitFor("the refusal", `/does not match a sign-in started here/.test((document.querySelector('#signin-message')||{}).textContent||'')`)
}

func TestFirebaseSignIn(t *testing.T) {
	idp := newFakeIdP(t, "project-id")
	g := startGateway(t, "--auth", "oidc", "--oidc-issuer", idp.srv.URL, "--oidc-audience", "project-id",
		"--firebase-api-key", "web-api-key", "--firebase-auth-url", idp.srv.URL)
	b := newBrowser(t)

	b.open(g.url + "/dashboard/")
	b.waitFor("the email form", `document.querySelector('#firebase-signin')`)
	if b.text("#oidc-signin") != "" || b.text("#dev-signin") != "" {
		t.Error("other sign-ins are offered without their configuration")
	}
	b.set("#firebase-signin [name=email]", "fiona@example.com")
	b.set("#firebase-signin [name=password]", "wrong")
	b.click("#firebase-signin button[type=submit]")
	b.waitFor("the refusal", `[...document.querySelectorAll('.notice.error')].some(n => n.textContent === 'The email or password is wrong.')`)
	b.set("#firebase-signin [name=password]", "correct horse")
	b.click("#firebase-signin button[type=submit]")
	b.waitFor("the session screen", `document.querySelector('#session-status')`, 15*time.Second)
	if who := b.text("header .who"); !strings.Contains(who, "Fiona") {
		t.Errorf("header says %q", who)
	}
	if strings.Contains(b.html(), "correct horse") {
		t.Error("the password is left in the page")
	}
}
