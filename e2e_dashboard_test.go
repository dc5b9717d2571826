package main

// The dashboard's HTTP side (DESIGN.md section 11): its pages, assets, headers and sign-in
// routes. What it does in a browser is tested in web/uitest (make test-ui).

import (
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/gateway/gateway/httpapi/openapitest"
)

func TestDashboardPages(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(noRedirect.CloseIdleConnections)

	t.Run("root redirects to the dashboard", func(t *testing.T) {
		tg := tg.with(t)
		res, err := noRedirect.Get(tg.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/dashboard/" {
			t.Fatalf("GET / = %d Location %q, want 302 /dashboard/", res.StatusCode, res.Header.Get("Location"))
		}
		openapitest.Check(t, "GET", "/", res.StatusCode, res.Header.Get("Content-Type"), nil)
	})

	var page string
	for _, path := range []string{"/dashboard/", "/dashboard/connect-store/success?shop=a.myshopify.com", "/dashboard/connect-store/error?reason=invalid_state", "/docs"} {
		t.Run("page "+path, func(t *testing.T) {
			tg := tg.with(t)
			r := tg.do("GET", path, nil, nil)
			want(t, r, 200, "")
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("content type %q", ct)
			}
			csp := r.header.Get("Content-Security-Policy")
			for _, d := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, d) {
					t.Errorf("CSP %q lacks %q", csp, d)
				}
			}
			if cc := r.header.Get("Cache-Control"); cc != "no-cache" || r.header.Get("ETag") == "" {
				t.Errorf("a page must be revalidated: Cache-Control %q, ETag %q", cc, r.header.Get("ETag"))
			}
			if strings.Contains(string(r.raw), "{{version}}") || strings.Contains(string(r.raw), "//cdn") {
				t.Errorf("page has a template marker or a CDN address:\n%s", r.raw)
			}
			if path == "/dashboard/" {
				page = string(r.raw)
			}
		})
	}

	t.Run("assets are versioned, immutable, gzipped and revalidated", func(t *testing.T) {
		tg := tg.with(t)
		m := regexp.MustCompile(`/dashboard/v/([0-9a-f]+)/app\.js`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no versioned app.js in the page:\n%s", page)
		}
		r := tg.do("GET", m[0], nil, nil)
		want(t, r, 200, "")
		if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("Cache-Control %q, want immutable", cc)
		}
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/javascript") {
			t.Errorf("content type %q", r.header.Get("Content-Type"))
		}
		req, _ := http.NewRequest("GET", tg.url+m[0], nil)
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := tg.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Content-Encoding %q, want gzip", res.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		if string(plain) != string(r.raw) {
			t.Error("the gzipped body differs from the plain one")
		}
		req, _ = http.NewRequest("GET", tg.url+m[0], nil)
		req.Header.Set("If-None-Match", r.header.Get("ETag"))
		res2, err := tg.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res2.Body.Close()
		if res2.StatusCode != http.StatusNotModified {
			t.Errorf("If-None-Match: status %d, want 304", res2.StatusCode)
		}
		old := tg.do("GET", "/dashboard/v/000000000000/app.js", nil, nil)
		want(t, old, 200, "")
		if cc := old.header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("another version's asset: Cache-Control %q, want no-cache", cc)
		}
		want(t, tg.do("GET", "/dashboard/v/"+m[1]+"/nope.js", nil, nil), 404, "not_found")
		want(t, tg.do("GET", "/dashboard/v/"+m[1]+"/index.html", nil, nil), 404, "not_found")
	})

	t.Run("config", func(t *testing.T) {
		tg := tg.with(t)
		r := tg.do("GET", "/dashboard/config.json", nil, nil)
		want(t, r, 200, "")
		c := r.obj()
		if c["auth"] != "dev" || c["devSignIn"] != true || c["oidc"] != nil || c["firebase"] != nil {
			t.Fatalf("config %s", r.raw)
		}
	})

	t.Run("dev token signs in", func(t *testing.T) {
		tg := tg.with(t)
		r := tg.do("POST", "/api/dev/token", nil, map[string]any{"uid": "dora", "name": "Dora", "role": "admin"})
		want(t, r, 200, "")
		tok := r.str("token")
		want(t, tg.do("GET", "/api/admin/users", bearerAuth(tok), nil), 200, "")
		want(t, tg.do("POST", "/api/dev/token", nil, map[string]any{"name": "no uid"}), 400, "validation_failed")
		want(t, tg.do("POST", "/api/dev/token", nil, map[string]any{"uid": "x", "role": "root"}), 400, "validation_failed")
		want(t, tg.do("POST", "/api/dev/token", nil, `{"uid":`), 400, "invalid_json")
	})
}

func TestClientUsage(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	alice := tg.token("alice", "")
	r := tg.do("GET", "/api/client/usage", bearerAuth(alice), nil)
	want(t, r, 200, "")
	u := r.obj()
	if u["plan"] != "free" || u["messagesSent"] != 0.0 || u["monthlyLimit"] != 1000.0 || u["remaining"] != 1000.0 {
		t.Fatalf("usage %s", r.raw)
	}
	want(t, tg.do("GET", "/api/client/usage", nil, nil), 401, "missing_credentials")
}

func TestDashboardDevTokenInternalOnly(t *testing.T) {
	sideBySide(t)
	// Loopback is not internal here: the dev sign-in is refused and not offered.
	tg := startGW(t, "--internal-cidrs", "10.99.0.0/16")
	want(t, tg.do("POST", "/api/dev/token", nil, map[string]any{"uid": "mallory", "role": "admin"}), 403, "internal_only")
	r := tg.do("GET", "/dashboard/config.json", nil, nil)
	want(t, r, 200, "")
	if r.obj()["devSignIn"] != false {
		t.Fatalf("devSignIn offered outside --internal-cidrs: %s", r.raw)
	}
}

// `make run` prints a ready dashboard link for an admin and a client, whose tokens work.
func TestDevHelpPrintsDashboardLinks(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	var out strings.Builder
	addr, err := net.ResolveTCPAddr("tcp", strings.TrimPrefix(tg.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	printDevHelp(&out, addr, tg.issuer)
	links := regexp.MustCompile(`(admin|client): +http://localhost:\d+/dashboard/#token=([A-Za-z0-9_.-]+)`).FindAllStringSubmatch(out.String(), -1)
	if len(links) != 2 {
		t.Fatalf("want an admin and a client link in:\n%s", out.String())
	}
	for _, l := range links {
		status := 403
		if l[1] == "admin" {
			status = 200
		}
		want(t, tg.do("GET", "/api/admin/users", bearerAuth(l[2]), nil), status, "")
	}
}
