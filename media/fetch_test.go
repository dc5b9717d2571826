package media

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// testImage is a 2x2 image with some colour, for the encoders.
func mediaTestImage() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	img.Set(1, 1, color.RGBA{B: 255, A: 255})
	return img
}

func mediaPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, mediaTestImage()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mediaJPEG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, mediaTestImage(), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mediaGIF(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, mediaTestImage(), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpBytes is a 1x1 lossless WebP: RIFF header, "WEBP", one VP8L chunk (odd size, so padded).
func mediaWebP() []byte {
	vp8l := []byte{0x2f, 0x00, 0x00, 0x00, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07}
	var b bytes.Buffer
	b.WriteString("RIFF")
	b.Write(mediaLE32(uint32(4 + 8 + len(vp8l) + 1)))
	b.WriteString("WEBPVP8L")
	b.Write(mediaLE32(uint32(len(vp8l))))
	b.Write(vp8l)
	b.WriteByte(0)
	return b.Bytes()
}

func mediaLE32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func mediaDataURI(label string, b []byte) string {
	return "data:" + label + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// newTestFetcher builds a fetcher and closes its idle connections when the test ends.
func newTestFetcher(t *testing.T, o Options) *Fetcher {
	t.Helper()
	f := NewFetcher(o)
	t.Cleanup(f.client.CloseIdleConnections)
	return f
}

// serve starts an httptest server (on 127.0.0.1) that counts its requests.
func mediaServe(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func mediaServerAddr(t *testing.T, srv *httptest.Server) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func wantMediaErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func TestMediaDataURIImages(t *testing.T) {
	t.Parallel()
	f := newTestFetcher(t, Options{})
	cases := []struct {
		name, label, want string
		data              []byte
	}{
		{"png", "image/png", "image/png", mediaPNG(t)},
		{"jpeg", "image/jpeg", "image/jpeg", mediaJPEG(t)},
		{"gif", "image/gif", "image/gif", mediaGIF(t)},
		{"webp", "image/webp", "image/webp", mediaWebP()},
		// The label is not believed: the bytes decide.
		{"png labelled jpeg", "image/jpeg", "image/png", mediaPNG(t)},
		{"no label", "", "image/png", mediaPNG(t)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := f.Load(context.Background(), mediaDataURI(c.label, c.data))
			if err != nil {
				t.Fatal(err)
			}
			if m.MimeType != c.want {
				t.Fatalf("MimeType = %q, want %q", m.MimeType, c.want)
			}
			if !bytes.Equal(m.Data, c.data) {
				t.Fatal("data differs from what was encoded")
			}
			if m.FileName != "" {
				t.Fatalf("FileName = %q, want none", m.FileName)
			}
			if err := CheckImage(m); err != nil {
				t.Fatalf("CheckImage: %v", err)
			}
		})
	}
}

func TestMediaDataURIForms(t *testing.T) {
	t.Parallel()
	f := newTestFetcher(t, Options{})
	p := mediaPNG(t)
	std := base64.StdEncoding.EncodeToString(p)
	wrapped := ""
	for i := 0; i < len(std); i += 20 {
		wrapped += std[i:min(i+20, len(std))] + "\r\n"
	}
	cases := map[string]string{
		"upper-case scheme":   "DATA:image/png;BASE64," + std,
		"unpadded":            "data:image/png;base64," + base64.RawStdEncoding.EncodeToString(p),
		"url-safe alphabet":   "data:image/png;base64," + base64.URLEncoding.EncodeToString(p),
		"line-wrapped":        "data:image/png;base64," + wrapped,
		"percent-encoded b64": "data:image/png;base64," + url.QueryEscape(std),
		"surrounding spaces":  "  data:image/png;base64," + std + "\n",
	}
	for name, ref := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := f.Load(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Data, p) || m.MimeType != "image/png" {
				t.Fatalf("got %d bytes of %q, want the PNG", len(m.Data), m.MimeType)
			}
		})
	}
	t.Run("percent-encoded text", func(t *testing.T) {
		m, err := f.Load(context.Background(), "data:text/plain;name=note%20one.txt,hello%20world%21")
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != "hello world!" || m.MimeType != "text/plain; charset=utf-8" || m.FileName != "note one.txt" {
			t.Fatalf("got %q %q %q", m.Data, m.MimeType, m.FileName)
		}
		wantMediaErr(t, CheckImage(m), domain.ErrMediaType)
		if k := Kind(m.MimeType); k != KindDocument {
			t.Fatalf("Kind = %q, want document", k)
		}
	})
}

func TestMediaCheckImageRefusesOthers(t *testing.T) {
	t.Parallel()
	f := newTestFetcher(t, Options{})
	for name, data := range map[string][]byte{
		"text": []byte("just some text, not an image"),
		"pdf":  []byte("%PDF-1.7\n1 0 obj\n"),
		"bmp":  append([]byte("BM"), make([]byte, 60)...),
	} {
		t.Run(name, func(t *testing.T) {
			m, err := f.Load(context.Background(), mediaDataURI("image/png", data))
			if err != nil {
				t.Fatal(err)
			}
			wantMediaErr(t, CheckImage(m), domain.ErrMediaType)
		})
	}
	wantMediaErr(t, CheckImage(Media{}), domain.ErrMediaType)
}

func TestMediaBadReferences(t *testing.T) {
	t.Parallel()
	f := newTestFetcher(t, Options{AllowPrivate: true})
	cases := map[string]string{
		"empty":                "",
		"bad base64":           "data:image/png;base64,iVBOR*w0K!!",
		"base64 one char left": "data:image/png;base64,QUJDR",
		"bad percent escape":   "data:text/plain,abc%zz",
		"no comma":             "data:image/png;base64",
		"empty data":           "data:image/png;base64,",
		"ftp":                  "ftp://example.com/a.png",
		"file":                 "file:///etc/passwd",
		"javascript":           "javascript:alert(1)",
		"not a url":            "just words",
		"relative path":        "/images/a.png",
		"no host":              "http:///a.png",
		"credentials":          "http://user:secret@127.0.0.1/a.png",
		"user only":            "https://user@127.0.0.1/a.png",
		"control characters":   "http://exa\x00mple.com/",
	}
	for name, ref := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := f.Load(context.Background(), ref)
			wantMediaErr(t, err, domain.ErrInvalidMedia)
		})
	}
}

func TestMediaDataURISizeCap(t *testing.T) {
	t.Parallel()
	const limit = 4096
	f := newTestFetcher(t, Options{MaxBytes: limit})
	exact := bytes.Repeat([]byte{0xAB}, limit)
	over := bytes.Repeat([]byte{0xAB}, limit+1)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		m, err := f.Load(context.Background(), "data:;base64,"+enc.EncodeToString(exact))
		if err != nil {
			t.Fatalf("exactly the cap: %v", err)
		}
		if len(m.Data) != limit {
			t.Fatalf("got %d bytes, want %d", len(m.Data), limit)
		}
		_, err = f.Load(context.Background(), "data:;base64,"+enc.EncodeToString(over))
		wantMediaErr(t, err, domain.ErrMediaTooLarge)
	}
	// Line-wrapping does not count towards the size.
	wrapped := strings.Join(strings.SplitAfter(base64.StdEncoding.EncodeToString(exact), "A"), "\n")
	if _, err := f.Load(context.Background(), "data:;base64,"+wrapped); err != nil {
		t.Fatalf("wrapped, exactly the cap: %v", err)
	}
	// Percent-encoded: an escape is one byte.
	pct := strings.Repeat("%41", limit)
	if m, err := f.Load(context.Background(), "data:,"+pct); err != nil || len(m.Data) != limit {
		t.Fatalf("percent-encoded, exactly the cap: %d bytes, %v", len(m.Data), err)
	}
	_, err := f.Load(context.Background(), "data:,"+pct+"B")
	wantMediaErr(t, err, domain.ErrMediaTooLarge)
}

func TestMediaURLSizeCap(t *testing.T) {
	t.Parallel()
	const limit = 4096
	body := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	withLength, _ := mediaServe(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(body(n))
	})
	// Chunked: flushing before the end forces Transfer-Encoding: chunked.
	chunked, _ := mediaServe(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Write(body(n / 2))
		w.(http.Flusher).Flush()
		w.Write(body(n - n/2))
	})
	// Declares a huge length, sends a little and stalls: only refusing on the header is fast.
	huge, _ := mediaServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<40))
		w.Write(body(10))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	// The servers are set up as described.
	for _, c := range []struct {
		srv     *httptest.Server
		length  int64
		chunked bool
	}{{withLength, limit, false}, {chunked, -1, true}} {
		resp, err := http.Get(c.srv.URL + "/?n=" + strconv.Itoa(limit))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ContentLength != c.length || (len(resp.TransferEncoding) > 0) != c.chunked {
			t.Fatalf("server set up wrong: length %d, transfer encoding %v", resp.ContentLength, resp.TransferEncoding)
		}
	}

	f := newTestFetcher(t, Options{MaxBytes: limit, AllowPrivate: true, Timeout: 10 * time.Second})
	for name, srv := range map[string]*httptest.Server{"content-length": withLength, "chunked": chunked} {
		t.Run(name, func(t *testing.T) {
			m, err := f.Load(context.Background(), srv.URL+"/?n="+strconv.Itoa(limit))
			if err != nil {
				t.Fatalf("exactly the cap: %v", err)
			}
			if len(m.Data) != limit {
				t.Fatalf("got %d bytes, want %d", len(m.Data), limit)
			}
			_, err = f.Load(context.Background(), srv.URL+"/?n="+strconv.Itoa(limit+1))
			wantMediaErr(t, err, domain.ErrMediaTooLarge)
			_, err = f.Load(context.Background(), srv.URL+"/?n="+strconv.Itoa(50*limit))
			wantMediaErr(t, err, domain.ErrMediaTooLarge)
		})
	}
	t.Run("declared length over the cap", func(t *testing.T) {
		start := time.Now()
		_, err := f.Load(context.Background(), huge.URL+"/")
		wantMediaErr(t, err, domain.ErrMediaTooLarge)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %s: the body was read instead of refused on its header", d)
		}
	})
}

func TestMediaPrivateAddresses(t *testing.T) {
	t.Parallel()
	pngData := mediaPNG(t)
	srv, hits := mediaServe(t, func(w http.ResponseWriter, r *http.Request) { w.Write(pngData) })
	port := strconv.Itoa(int(mediaServerAddr(t, srv).Port()))

	strict := newTestFetcher(t, Options{})
	for _, host := range []string{"127.0.0.1", "localhost", "[::ffff:127.0.0.1]"} {
		t.Run("refused "+host, func(t *testing.T) {
			_, err := strict.Load(context.Background(), "http://"+host+":"+port+"/a.png")
			wantMediaErr(t, err, domain.ErrMediaBlocked)
			if strings.Contains(err.Error(), "127.0.0.1") {
				t.Fatalf("error %q reveals the resolved address", err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was reached %d times", n)
	}

	open := newTestFetcher(t, Options{AllowPrivate: true})
	m, err := open.Load(context.Background(), srv.URL+"/a.png")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, pngData) || m.MimeType != "image/png" || m.FileName != "a.png" {
		t.Fatalf("got %d bytes of %q named %q", len(m.Data), m.MimeType, m.FileName)
	}
}

// TestMediaRedirects pretends one loopback server is public (the dial check is swapped) and
// checks that every redirect target goes through the same checks.
func TestMediaRedirects(t *testing.T) {
	t.Parallel()
	pngData := mediaPNG(t)
	blocked, blockedHits := mediaServe(t, func(w http.ResponseWriter, r *http.Request) { w.Write(pngData) })
	var allowed *httptest.Server
	allowed, _ = mediaServe(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/to-blocked":
			http.Redirect(w, r, blocked.URL+"/secret.png", http.StatusFound)
		case r.URL.Path == "/to-ftp":
			http.Redirect(w, r, "ftp://example.com/a.png", http.StatusFound)
		case r.URL.Path == "/to-credentials":
			http.Redirect(w, r, "http://u:p@"+allowed.Listener.Addr().String()+"/img/final.png", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
			if n == 0 {
				http.Redirect(w, r, "/img/final.png", http.StatusMovedPermanently)
				return
			}
			http.Redirect(w, r, "/hop/"+strconv.Itoa(n-1), http.StatusFound)
		case r.URL.Path == "/img/final.png":
			w.Write(pngData)
		default:
			http.NotFound(w, r)
		}
	})
	f := newTestFetcher(t, Options{MaxRedirects: 3})
	public := mediaServerAddr(t, allowed)
	f.dialCheck = func(ap netip.AddrPort) error {
		if ap == public {
			return nil
		}
		return f.checkAddr(ap)
	}

	t.Run("followed", func(t *testing.T) {
		m, err := f.Load(context.Background(), allowed.URL+"/hop/2") // 3 redirects
		if err != nil {
			t.Fatal(err)
		}
		if m.MimeType != "image/png" || m.FileName != "final.png" {
			t.Fatalf("got %q named %q", m.MimeType, m.FileName)
		}
	})
	t.Run("too many", func(t *testing.T) {
		_, err := f.Load(context.Background(), allowed.URL+"/hop/3") // 4 redirects
		wantMediaErr(t, err, domain.ErrMediaFetch)
	})
	t.Run("to a blocked address", func(t *testing.T) {
		_, err := f.Load(context.Background(), allowed.URL+"/to-blocked")
		wantMediaErr(t, err, domain.ErrMediaBlocked)
		if n := blockedHits.Load(); n != 0 {
			t.Fatalf("the blocked server was reached %d times", n)
		}
	})
	t.Run("to ftp", func(t *testing.T) {
		_, err := f.Load(context.Background(), allowed.URL+"/to-ftp")
		wantMediaErr(t, err, domain.ErrInvalidMedia)
	})
	t.Run("to a URL with credentials", func(t *testing.T) {
		_, err := f.Load(context.Background(), allowed.URL+"/to-credentials")
		wantMediaErr(t, err, domain.ErrInvalidMedia)
	})
}

func TestMediaFetchFailures(t *testing.T) {
	t.Parallel()
	srv, _ := mediaServe(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing.png":
			http.NotFound(w, r)
		case "/broken":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/empty":
			w.WriteHeader(http.StatusOK)
		case "/stall-headers":
			<-r.Context().Done()
		case "/stall-body":
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("\x89PNG"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	})
	f := newTestFetcher(t, Options{AllowPrivate: true, Timeout: 300 * time.Millisecond})
	cases := []struct {
		path string
		want error
	}{
		{"/missing.png", domain.ErrMediaFetch},
		{"/broken", domain.ErrMediaFetch},
		{"/empty", domain.ErrInvalidMedia},
		{"/stall-headers", domain.ErrMediaFetch},
		{"/stall-body", domain.ErrMediaFetch},
	}
	for _, c := range cases {
		t.Run(strings.TrimPrefix(c.path, "/"), func(t *testing.T) {
			start := time.Now()
			_, err := f.Load(context.Background(), srv.URL+c.path)
			wantMediaErr(t, err, c.want)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s with a 300ms timeout", d)
			}
		})
	}
	t.Run("status in message", func(t *testing.T) {
		_, err := f.Load(context.Background(), srv.URL+"/missing.png?token=s3cret")
		if !strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("error %q: want the status and not the query string", err)
		}
	})
	t.Run("timeout keeps its cause", func(t *testing.T) {
		_, err := f.Load(context.Background(), srv.URL+"/stall-headers")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v does not wrap context.DeadlineExceeded", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = f.Load(context.Background(), "http://"+addr+"/a.png")
		wantMediaErr(t, err, domain.ErrMediaFetch)
	})
	t.Run("dns failure", func(t *testing.T) {
		// .invalid never resolves (RFC 6761).
		_, err := f.Load(context.Background(), "http://no-such-host.invalid/a.png")
		wantMediaErr(t, err, domain.ErrMediaFetch)
	})
	t.Run("caller canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := f.Load(ctx, srv.URL+"/stall-headers")
		wantMediaErr(t, err, domain.ErrMediaFetch)
		wantMediaErr(t, err, context.Canceled)
	})
}

func TestMediaFileNames(t *testing.T) {
	t.Parallel()
	pngData := mediaPNG(t)
	srv, _ := mediaServe(t, func(w http.ResponseWriter, r *http.Request) {
		if cd := r.URL.Query().Get("cd"); cd != "" {
			w.Header().Set("Content-Disposition", cd)
		}
		w.Header().Set("Content-Type", "application/pdf") // not believed
		w.Write(pngData)
	})
	f := newTestFetcher(t, Options{AllowPrivate: true})
	cases := []struct {
		name, path, cd, want string
	}{
		{"from path", "/media/photo.png", "", "photo.png"},
		{"escaped path", "/media/my%20photo.png", "", "my photo.png"},
		{"query ignored", "/media/photo.png?size=large", "", "photo.png"},
		{"directory", "/media/", "", ""},
		{"root", "/", "", ""},
		{"content-disposition wins", "/download", `attachment; filename="report.png"`, "report.png"},
		{"rfc 5987", "/download", `attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.png`, "résumé.png"},
		{"traversal stripped", "/download", `attachment; filename="../../etc/passwd"`, "passwd"},
		{"bidi override dropped", "/download", "attachment; filename*=UTF-8''a%E2%80%AEgnp.exe", "agnp.exe"},
		{"bad header falls back", "/x/fallback.png", `attachment; filename="unterminated`, "fallback.png"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := srv.URL + c.path
			if c.cd != "" {
				sep := "?"
				if strings.Contains(ref, "?") {
					sep = "&"
				}
				ref += sep + "cd=" + url.QueryEscape(c.cd)
			}
			m, err := f.Load(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			if m.FileName != c.want {
				t.Fatalf("FileName = %q, want %q", m.FileName, c.want)
			}
			if m.MimeType != "image/png" {
				t.Fatalf("MimeType = %q: the header was believed", m.MimeType)
			}
		})
	}
}

// zipBytes builds a ZIP whose first entry is stored (as ODF and EPUB require for "mimetype").
// TestMediaConcurrent loads from one fetcher in parallel (run with -race).
func TestMediaConcurrent(t *testing.T) {
	t.Parallel()
	pngData := mediaPNG(t)
	srv, hits := mediaServe(t, func(w http.ResponseWriter, r *http.Request) { w.Write(pngData) })
	f := newTestFetcher(t, Options{AllowPrivate: true})
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			m, err := f.Load(context.Background(), fmt.Sprintf("%s/%d.png", srv.URL, i))
			if err == nil && m.FileName != fmt.Sprintf("%d.png", i) {
				err = fmt.Errorf("FileName %q", m.FileName)
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := hits.Load(); n != 16 {
		t.Fatalf("%d requests, want 16", n)
	}
}
