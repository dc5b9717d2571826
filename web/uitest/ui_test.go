//go:build ui

// Package uitest drives the dashboard in headless Chromium (Debian's chromium), against the
// real gateway binary on the sim network and a fake store platform. It is behind the `ui`
// build tag: `make test-ui` runs it, `make test` does not need a browser.
//
// Pass -screenshots to write PNGs of the main screens to docs/screenshots/.
package uitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gateway/gateway/ecom/ecomtest"
)

var screenshots = flag.Bool("screenshots", false, "write PNGs of the main screens to docs/screenshots")

var gatewayBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "gateway-uitest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	build := exec.Command("go", "build", "-o", gatewayBin, ".")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gateway:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	shop      = "alice-shop.myshopify.com"
	shopToken = "shpat_alice0123456789"
)

// gw is a running gateway binary.
type gw struct {
	t    *testing.T
	url  string
	fake *ecomtest.Platform
	http *http.Client
}

// startGateway runs the binary on the sim network with dev auth (args may change either: the
// last of a repeated flag wins).
func startGateway(t *testing.T, args ...string) *gw {
	t.Helper()
	fake := ecomtest.New()
	t.Cleanup(fake.Close)
	cmd := exec.Command(gatewayBin, append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--network", "sim", "--auth", "dev",
		"--ecom-api-base", fake.APIBase(), "--public-url", "https://gw.example.com", "--log-format", "json", "--log-requests=false"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addrc := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			var line struct {
				Msg, Addr, Level string
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if line.Msg == "gateway listening" && !sent {
				addrc <- line.Addr
				sent = true
			} else if line.Level == "ERROR" {
				t.Logf("gateway: %s", sc.Text())
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case addr := <-addrc:
		return &gw{t: t, url: "http://" + addr, fake: fake, http: &http.Client{Timeout: 10 * time.Second}}
	case <-done:
		t.Fatal("the gateway exited before listening")
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not start listening within 20 s")
	}
	return nil
}

// call is an API call from the test (not the browser); it fails the test on a non-2xx.
func (g *gw) call(method, path, token string, body any) map[string]any {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.url+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := g.http.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		g.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	var out map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

// callList is call for a route that answers a JSON array.
func (g *gw) callList(method, path, token string) []map[string]any {
	g.t.Helper()
	req, _ := http.NewRequest(method, g.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := g.http.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out []map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != 200 {
		g.t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, err)
	}
	return out
}

func (g *gw) token(uid, role string, ttl int) string {
	g.t.Helper()
	r := g.call("POST", "/api/dev/token", "", map[string]any{"uid": uid, "role": role, "name": strings.ToUpper(uid[:1]) + uid[1:], "ttlSeconds": ttl})
	return r["token"].(string)
}

// browser is one headless Chromium tab; JavaScript errors in it fail the test.
type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func chromiumPath(t *testing.T) string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium found: install Debian's chromium (apt-get install chromium) or set CHROMIUM")
	return ""
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	b := &browser{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.mu.Lock()
			b.errs = append(b.errs, "exception: "+e.ExceptionDetails.Error())
			b.mu.Unlock()
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.mu.Lock()
				b.errs = append(b.errs, "console.error: "+strings.Join(parts, " "))
				b.mu.Unlock()
			}
		}
	})
	if err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errs {
			t.Errorf("browser: %s", e)
		}
	})
	return b
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// open loads a page afresh (from about:blank, so a link that only differs in its fragment is a
// new load too).
func (b *browser) open(u string) {
	b.t.Helper()
	b.run(chromedp.Navigate("about:blank"), chromedp.Navigate(u))
}

func (b *browser) eval(js string, out any) {
	b.t.Helper()
	b.run(chromedp.Evaluate(js, out))
}

// waitFor polls a JavaScript condition until it is true (10 s at most, or within).
func (b *browser) waitFor(what, js string, within ...time.Duration) {
	b.t.Helper()
	total := 10 * time.Second
	if len(within) > 0 {
		total = within[0]
	}
	deadline := time.Now().Add(total)
	for {
		var ok bool
		if err := chromedp.Run(b.ctx, chromedp.Evaluate("!!("+js+")", &ok)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var body string
			_ = chromedp.Run(b.ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body))
			b.t.Fatalf("timed out after %v waiting for %s; the page says:\n%s", total, what, body)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// text is the text of the first element matching sel ("" when none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.eval(fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel), &s)
	return s
}

// set types a value into an input as a person would (input and change events fire).
func (b *browser) set(sel, value string) {
	b.t.Helper()
	b.waitFor(sel, fmt.Sprintf("document.querySelector(%q)", sel))
	var ok bool
	b.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true })()`, sel, value), &ok)
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.waitFor(sel, fmt.Sprintf("document.querySelector(%q)", sel))
	b.run(chromedp.Click(sel, chromedp.ByQuery))
}

func (b *browser) go_(hash string) {
	b.t.Helper()
	b.eval(fmt.Sprintf("location.hash = %q", hash), nil)
}

// html is the whole document as it stands, for "nothing secret in the DOM" checks.
func (b *browser) html() string {
	b.t.Helper()
	var s string
	b.eval(`document.documentElement.outerHTML + [...document.querySelectorAll('input,textarea')].map(e => e.value).join(' ')`, &s)
	return s
}

func (b *browser) shot(name string) {
	b.t.Helper()
	if !*screenshots {
		return
	}
	var png []byte
	b.run(chromedp.CaptureScreenshot(&png))
	dir := filepath.Join("..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// qrShown is true once the QR code image is on screen, decoded.
const qrShown = `(() => { const i = document.querySelector('#qr'); return i && i.complete && i.naturalWidth > 0 })()`

func TestClientJourney(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)
	tok := g.token("alice", "client", 3600)

	// The printed client link: the QR code is on screen within 2 s. On a machine busy with other
	// work one load can be slow for reasons of its own, so up to three loads are timed (the page
	// is not cached: each is a first load) and the best must be under 2 s.
	var best time.Duration
	for try := 1; try <= 3; try++ {
		b.run(network.Enable(), network.SetCacheDisabled(true))
		start := time.Now()
		b.open(g.url + "/dashboard/#token=" + tok)
		b.waitFor("the QR code", qrShown)
		toQR := time.Since(start)
		var timing string
		b.eval(`performance.getEntries().map(e => e.name.replace(location.origin, '').split(/[?#]/)[0] + '@' + Math.round(e.responseEnd || e.duration)).join(' ')`, &timing)
		t.Logf("load %d: time to QR from opening the client link %v (ms after navigation start: %s)", try, toQR, timing)
		if best == 0 || toQR < best {
			best = toQR
		}
		if best < 2*time.Second {
			break
		}
	}
	if best >= 2*time.Second {
		t.Errorf("the QR code took %v at best to appear, want under 2 s", best)
	}
	var href string
	b.eval("location.href", &href)
	if strings.Contains(href, "token=") || strings.Contains(b.html(), tok) {
		t.Fatalf("the ID token is left in the address or the page: %s", href)
	}
	var shown string
	b.eval(`document.querySelector('#session-status').dataset.status`, &shown)
	if shown != "SCAN_QR" && shown != "NOT_CREATED" {
		t.Errorf("status %q while the QR code shows", shown)
	}
	if s := b.text("#session-status"); strings.Contains(s, "SCAN_QR") || s == "" {
		t.Errorf("the status reads %q: words, not the API's value", s)
	}
	b.shot("session-qr")

	// The phone scans: the page turns CONNECTED by itself.
	st := g.call("GET", "/api/client/status", tok, nil)
	g.call("POST", "/api/dev/sim/scan", "", map[string]any{"sessionId": st["id"], "phone": "4915112345678"})
	b.waitFor("CONNECTED", `document.querySelector('#session-status').dataset.status === 'CONNECTED'`, 5*time.Second)
	b.waitFor("the QR code gone", `!document.querySelector('#qr')`)
	b.shot("session-connected")

	// Send a text and see it at the sim.
	b.go_("#/send")
	b.set("#send-form [name=phone]", "+49 155 5000 1111")
	b.set("#send-form [name=text]", "hello from the dashboard")
	b.click("#send-form button[type=submit]")
	b.waitFor("the sent notice", `[...document.querySelectorAll('.notice.ok')].some(n => n.textContent.startsWith('Sent to +4915550001111'))`, 20*time.Second)
	b.shot("send")
	msgs := g.call("GET", "/api/dev/sim/messages?to=4915550001111", "", nil)["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["text"] != "hello from the dashboard" {
		t.Fatalf("the sim got %v", msgs)
	}

	// A send that fails says why in a sentence.
	b.set("#send-form [name=phone]", "12")
	b.click("#send-form button[type=submit]")
	b.waitFor("the error sentence", `[...document.querySelectorAll('.notice.error')].some(n => /phone number is not valid/.test(n.textContent))`)

	// The month's usage counts the message.
	b.go_("#/usage")
	b.waitFor("the month's count", `/1 of 1000/.test((document.querySelector('#usage-month')||{}).textContent||'')`)
	b.shot("usage")

	// Save a template, with its live preview.
	b.go_("#/templates")
	b.waitFor("the template editor", `document.querySelector('#template-text')`)
	var topic string
	b.eval(`document.querySelector('#template-topic').value`, &topic)
	text := "Hi {customer_name}, thanks for order {order_number} at {store_name}!"
	b.set("#template-text", text)
	b.waitFor("the preview", `document.querySelector('#template-preview').textContent.startsWith('Hi John, thanks for order #1001 at')`)
	b.click("#template-save")
	b.waitFor("the saved notice", `[...document.querySelectorAll('.notice.ok')].some(n => n.textContent.startsWith('Saved'))`)
	b.shot("templates")
	b.set("#template-test-phone", "4915550002222")
	b.click("#template-test button[type=submit]")
	b.waitFor("the test sent", `[...document.querySelectorAll('.notice.ok')].some(n => n.textContent.includes('test message is sent'))`, 20*time.Second)
	if got := g.call("GET", "/api/dev/sim/messages?to=4915550002222", "", nil)["messages"].([]any); len(got) != 1 ||
		!strings.HasPrefix(got[0].(map[string]any)["text"].(string), "Hi John, thanks for order #1001 at") {
		t.Fatalf("the test message: %v", got)
	}
	saved := false
	for _, tpl := range g.call("GET", "/api/client/templates", tok, nil)["templates"].([]any) {
		m := tpl.(map[string]any)
		if m["topic"] == topic && m["text"] == text && m["isDefault"] == false {
			saved = true
		}
	}
	if !saved {
		t.Fatalf("template %s was not saved", topic)
	}

	// Connect a store manually (access token) against the fake platform.
	g.fake.AddShop(shop, "Alice's Shop", shopToken)
	b.go_("#/store")
	b.set("#connect-token [name=shop]", shop)
	b.set("#connect-token [name=accessToken]", shopToken)
	b.click("#connect-token button[type=submit]")
	b.waitFor("the connected store", `(document.querySelector('#store-shop')||{}).textContent === '`+shop+`'`, 15*time.Second)
	b.shot("store")
	if s := g.call("GET", "/api/client/store", tok, nil); s["connected"] != true || s["shop"] != shop {
		t.Fatalf("store: %v", s)
	}
	if strings.Contains(b.html(), shopToken) {
		t.Fatal("the store access token is left in the page")
	}

	// The webhooks screen is served (events out): its subscription form shows. The campaigns
	// screen lists the user's campaigns (none yet).
	b.go_("#/webhooks")
	b.waitFor("the webhook subscription form", `document.querySelector('#webhook-form') !== null`)
	b.go_("#/campaigns")
	b.waitFor("the empty campaign list", `/No campaign yet/.test(document.querySelector('#view').textContent)`)
	b.go_("#/keys")
	b.waitFor("the keys screen", `/no API key yet/i.test(document.querySelector('#view').textContent)`)

	// Sign out: back to the sign-in, nothing kept.
	b.click("#signout")
	b.waitFor("the sign-in form", `document.querySelector('#dev-signin')`)
	var kept string
	b.eval(`JSON.stringify(sessionStorage)`, &kept)
	if strings.Contains(kept, "eyJ") {
		t.Fatalf("a token is kept after signing out: %s", kept)
	}
}

func TestSignIn(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)

	// The dev form.
	b.open(g.url + "/")
	b.waitFor("the sign-in form", `document.querySelector('#dev-signin')`)
	b.shot("signin")
	b.set("#dev-signin [name=uid]", "carol")
	b.set("#dev-signin [name=name]", "Carol")
	b.click("#dev-signin button[type=submit]")
	b.waitFor("the session screen", `document.querySelector('#session-status')`)
	if who := b.text("header .who"); !strings.Contains(who, "Carol") {
		t.Errorf("header says %q", who)
	}

	// Link with a pair code instead of the QR code.
	b.set("#pair-form [name=phone]", "+44 7700 900123")
	b.click("#pair-form button[type=submit]")
	b.waitFor("the pair code", `/^[A-Z0-9-]{8,9}$/.test((document.querySelector('#pair-code')||{}).textContent||'')`)
	var carol string
	b.eval(`sessionStorage.getItem('gateway.idToken')`, &carol)
	st := g.call("GET", "/api/client/status", carol, nil)
	g.call("POST", "/api/dev/sim/pair", "", map[string]any{"sessionId": st["id"], "code": b.text("#pair-code")})
	b.waitFor("CONNECTED", `document.querySelector('#session-status').dataset.status === 'CONNECTED'`, 5*time.Second)

	// A reload keeps the sign-in (this tab's sessionStorage).
	b.run(chromedp.Reload())
	b.waitFor("the session screen after a reload", `document.querySelector('#session-status')`)

	// A token that expires while the page is open: back to the sign-in, once, with a reason.
	short := g.token("dave", "client", 6)
	b.open(g.url + "/dashboard/#token=" + short)
	b.waitFor("the session screen", `document.querySelector('#session-status')`)
	b.waitFor("the expiry message", `/expired/.test((document.querySelector('#signin-message')||{}).textContent||'')`, 15*time.Second)
	var loads int
	b.eval(`performance.getEntriesByType('navigation').length`, &loads)
	if loads != 1 {
		t.Errorf("the page reloaded itself %d times", loads)
	}
	b.waitFor("the form to stay", `document.querySelector('#dev-signin')`)

	// A token the gateway refuses (its signature altered): back to the sign-in, saying so.
	good := g.token("frank", "client", 3600)
	bad := good[:len(good)-4] + map[bool]string{true: "AAAA", false: "BBBB"}[!strings.HasSuffix(good, "AAAA")]
	b.open(g.url + "/dashboard/#token=" + bad)
	b.waitFor("the refusal message", `/refused/.test((document.querySelector('#signin-message')||{}).textContent||'')`)

	// A link whose token has already expired.
	old := g.token("erin", "client", 1)
	expired := time.Now().Add(1100 * time.Millisecond)
	for time.Now().Before(expired) { // the token's one-second lifetime passes
		time.Sleep(50 * time.Millisecond)
	}
	b.open(g.url + "/dashboard/#token=" + old)
	b.waitFor("the expired-link message", `/expired/.test((document.querySelector('#signin-message')||{}).textContent||'')`)

	// An admin signs in with the form and lands on the admin screens.
	b.set("#dev-signin [name=uid]", "root")
	b.set("#dev-signin [name=role]", "admin")
	b.click("#dev-signin button[type=submit]")
	b.waitFor("the admin keys screen", `document.querySelector('#key-form')`)
}

func TestAdminKeys(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)
	alice := g.token("alice", "client", 3600)
	g.call("GET", "/api/client/status", alice, nil) // her profile exists from her first call
	admin := g.token("admin", "admin", 3600)

	b.open(g.url + "/dashboard/#token=" + admin)
	b.waitFor("the key form", `document.querySelector('#key-form')`)
	b.set("#key-form [name=userId]", "alice")
	b.set("#key-form [name=name]", "CI server")
	b.click("#key-form button[type=submit]")
	b.waitFor("the raw key", `/^svc_live_[0-9a-f]{48}$/.test((document.querySelector('#secret-once')||{}).textContent||'')`)
	raw := b.text("#secret-once")
	masked := "svc_live_***" + raw[len(raw)-4:]
	b.waitFor("the masked key in the list", `document.querySelector('#key-list').textContent.includes('`+masked+`')`)
	if n := strings.Count(b.html(), raw); n != 1 {
		t.Fatalf("the raw key is in the page %d times, want once", n)
	}
	b.shot("admin-keys")
	if v := g.call("POST", "/api/admin/apikeys/validate", "", map[string]any{"rawKey": raw}); v["valid"] != true {
		t.Fatalf("validate: %v", v)
	}

	b.click("#secret-dismiss")
	b.waitFor("the raw key gone", `!document.querySelector('#secret-once')`)
	if strings.Contains(b.html(), raw) {
		t.Fatal("the raw key is still in the page after dismissal")
	}
	b.run(chromedp.Reload())
	b.waitFor("the list after a reload", `document.querySelector('#key-list').textContent.includes('`+masked+`')`)
	if strings.Contains(b.html(), raw) {
		t.Fatal("the raw key came back after a reload")
	}

	// Revoke it from the list.
	b.click("#key-list button.small")
	b.waitFor("revoked", `document.querySelector('#key-list [data-status=revoked]')`)

	b.go_("#/admin/users")
	b.waitFor("the users table", `document.querySelector('#screen-admin-users table')`)
	b.set(`#screen-admin-users input[aria-label="plan of alice"]`, "starter")
	b.waitFor("the update notice", `[...document.querySelectorAll('.notice.ok')].some(n => n.textContent === 'Updated alice.')`)
	b.shot("admin-users")
	plan := ""
	for _, k := range g.callList("GET", "/api/admin/users", admin) {
		if k["id"] == "alice" {
			plan, _ = k["plan"].(string)
		}
	}
	if plan != "starter" {
		t.Fatalf("alice's plan is %q, want starter", plan)
	}
	b.go_("#/admin/sessions")
	b.set("#session-form [name=sessionName]", "support line")
	b.set("#session-form [name=assignToUserId]", "alice")
	b.click("#session-form button[type=submit]")
	b.waitFor("the new session", `document.querySelector('#screen-admin-sessions table') && document.querySelector('#screen-admin-sessions table').textContent.includes('support line')`)
	b.shot("admin-sessions")
}

func TestPageWeight(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)
	tok := g.token("alice", "client", 3600)
	base, _ := url.Parse(g.url)

	var mu sync.Mutex
	var bytes float64
	started, finished := map[network.RequestID]string{}, map[network.RequestID]bool{}
	var foreign []string
	chromedp.ListenTarget(b.ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			u, err := url.Parse(e.Request.URL)
			if err != nil || u.Scheme == "data" || u.Scheme == "about" {
				return
			}
			if u.Host != base.Host {
				foreign = append(foreign, e.Request.URL)
			}
			started[e.RequestID] = e.Request.URL
		case *network.EventLoadingFinished:
			if _, ok := started[e.RequestID]; ok {
				bytes += e.EncodedDataLength
				finished[e.RequestID] = true
			}
		case *network.EventLoadingFailed:
			finished[e.RequestID] = true
		}
	})
	b.run(network.Enable(), network.SetCacheDisabled(true))
	start := time.Now()
	b.run(chromedp.Navigate(g.url + "/dashboard/#token=" + tok))
	b.waitFor("the QR code", qrShown)
	toQR := time.Since(start)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		done := len(finished) >= len(started)
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("first load: %.1f KB transferred in %d requests; QR shown after %v", bytes/1024, len(started), toQR)
	if bytes >= 100*1024 {
		t.Errorf("first load transferred %.0f bytes, want under 100 KB", bytes)
	}
	if len(foreign) > 0 {
		t.Errorf("requests to hosts other than the gateway: %v", foreign)
	}
	if len(started) == 0 {
		t.Error("no request seen: is the network domain enabled?")
	}
}

func TestLandingPagesAndDocs(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)

	b.open(g.url + "/dashboard/connect-store/success?shop=" + shop)
	b.waitFor("the success page", `document.querySelector('#connect-result')`)
	if s := b.text("#connect-result"); !strings.Contains(s, "Your store is connected") || !strings.Contains(s, shop) {
		t.Errorf("success page says %q", s)
	}
	b.shot("connect-success")
	b.open(g.url + "/dashboard/connect-store/error?reason=invalid_state")
	b.waitFor("the error page", `document.querySelector('#connect-result')`)
	if s := b.text("#connect-result"); !strings.Contains(s, "was not connected") || !strings.Contains(s, "did not match a connection started from this dashboard") {
		t.Errorf("error page says %q", s)
	}

	b.open(g.url + "/docs")
	b.waitFor("the API reference", `document.querySelectorAll('.op').length > 40`)
	b.run(chromedp.Click(`details.op summary`, chromedp.ByQuery))
	b.shot("docs")
	if s := b.text("main"); !strings.Contains(s, "/api/v1/messages/send") || !strings.Contains(s, "/api/client/qr") {
		t.Errorf("the reference lacks routes: %.300s", s)
	}
}
