package web

import (
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// Every address a page names and every module a script imports is an embedded file, and no
// file reaches for another host: the dashboard works offline and under its CSP.
func TestFilesResolve(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	asset := regexp.MustCompile(`/dashboard/v/` + s.Version() + `/([A-Za-z0-9_.-]+)`)
	imports := regexp.MustCompile(`(?m)^import .* from '\./([A-Za-z0-9_.-]+)';$`)
	external := regexp.MustCompile(`(?i)(src|href)=["']?(https?:)?//|@import|cdn\.`)
	seen := 0
	for name, f := range s.files {
		body := string(f.body)
		if strings.Contains(body, "{{version}}") {
			t.Errorf("%s: the version marker is left in", name)
		}
		if m := external.FindString(body); m != "" {
			t.Errorf("%s: refers to another host (%q)", name, m)
		}
		for _, m := range asset.FindAllStringSubmatch(body, -1) {
			if !s.Has(m[1]) {
				t.Errorf("%s names %s, which is not embedded", name, m[1])
			}
		}
		for _, m := range imports.FindAllStringSubmatch(body, -1) {
			seen++
			if !s.Has(m[1]) {
				t.Errorf("%s imports %s, which is not embedded", name, m[1])
			}
		}
	}
	if seen < 5 {
		t.Errorf("found %d imports: is the import pattern stale?", seen)
	}
	if !s.Has("app.js") || !s.Has("docs.js") || !s.Has("app.css") {
		t.Error("app.js, docs.js or app.css is missing")
	}
}

func TestServe(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.Set("Accept-Encoding", "gzip, br")
	if !s.Serve(&ctx, "app.js", true) {
		t.Fatal("app.js not served")
	}
	h := &ctx.Response.Header
	if string(h.Peek("Content-Encoding")) != "gzip" || !strings.Contains(string(h.Peek("Cache-Control")), "immutable") ||
		!strings.HasPrefix(string(h.ContentType()), "text/javascript") {
		t.Fatalf("headers: %s", h.String())
	}
	etag := string(h.Peek("ETag"))
	var again fasthttp.RequestCtx
	again.Request.Header.Set("If-None-Match", etag)
	s.Serve(&again, "app.js", false)
	if again.Response.StatusCode() != fasthttp.StatusNotModified {
		t.Fatalf("If-None-Match: %d", again.Response.StatusCode())
	}
	if s.Serve(&again, "../web.go", false) || s.Serve(&again, "nope.js", false) {
		t.Fatal("served a file that is not embedded")
	}
}
