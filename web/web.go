// Package web is the dashboard: plain HTML, CSS and ES modules under static/, embedded in the
// binary and served by the gateway at /dashboard/ (DESIGN.md section 11). The page talks to
// the gateway only through its HTTP API. Nothing here imports another package of the gateway;
// httpapi registers the routes and calls Site.Serve.
//
// Caching: every asset is addressed as /dashboard/v/<version>/<file>, where version is a hash
// of all embedded files, so assets are cached for a year (immutable) and a new build changes
// every address. The pages (index.html, docs.html) are revalidated on each load (no-cache with
// an ETag). Bodies are gzipped once at start, and sent gzipped to browsers that accept it.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"sort"
	"strings"

	"github.com/valyala/fasthttp"
)

//go:embed static
var static embed.FS

// Pages that are served at their own addresses (not under /v/<version>/).
const (
	PageIndex = "index.html"
	PageDocs  = "docs.html"
)

type file struct {
	body, gz    []byte
	contentType string
	etag        string
}

// Site is the embedded dashboard, read and compressed once.
type Site struct {
	files   map[string]*file
	version string
}

// New reads the embedded files. Pages get the version written into their asset addresses
// ({{version}}).
func New() (*Site, error) {
	raw := map[string][]byte{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		raw[strings.TrimPrefix(p, "static/")] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(raw[n]))
		h.Write(raw[n])
	}
	s := &Site{files: map[string]*file{}, version: hex.EncodeToString(h.Sum(nil))[:12]}
	for _, n := range names {
		body := raw[n]
		if strings.HasSuffix(n, ".html") {
			body = bytes.ReplaceAll(body, []byte("{{version}}"), []byte(s.version))
		}
		f := &file{body: body, contentType: contentType(n)}
		sum := sha256.Sum256(body)
		f.etag = `"` + hex.EncodeToString(sum[:8]) + `"`
		if compressible(n) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(body)
			zw.Close()
			if buf.Len() < len(body) {
				f.gz = buf.Bytes()
			}
		}
		s.files[n] = f
	}
	for _, p := range []string{PageIndex, PageDocs} {
		if s.files[p] == nil {
			return nil, fmt.Errorf("web: %s is missing", p)
		}
	}
	return s, nil
}

// Version is the hash that addresses this build's assets.
func (s *Site) Version() string { return s.version }

// Has reports whether name is an embedded file.
func (s *Site) Has(name string) bool { return s.files[name] != nil }

// Serve writes the embedded file name, or reports false when there is none. immutable marks an
// asset whose address carries the current version; otherwise the browser revalidates it.
// The caller sets the security headers.
func (s *Site) Serve(ctx *fasthttp.RequestCtx, name string, immutable bool) bool {
	f := s.files[path.Clean(name)]
	if f == nil {
		return false
	}
	h := &ctx.Response.Header
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	h.Set("Vary", "Accept-Encoding")
	if immutable {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if match := ctx.Request.Header.Peek("If-None-Match"); len(match) > 0 && bytes.Contains(match, []byte(f.etag)) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return true
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	if f.gz != nil && bytes.Contains(ctx.Request.Header.Peek("Accept-Encoding"), []byte("gzip")) {
		h.Set("Content-Encoding", "gzip")
		ctx.SetBody(f.gz)
		return true
	}
	ctx.SetBody(f.body)
	return true
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".json":
		return "application/json"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func compressible(name string) bool {
	switch path.Ext(name) {
	case ".js", ".css", ".html", ".svg", ".json":
		return true
	}
	return false
}
