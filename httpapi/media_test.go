package httpapi

import (
	"archive/zip"
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
func newTestMediaFetcher(t *testing.T, o MediaOptions) *mediaFetcher {
	t.Helper()
	f := newMediaFetcher(o)
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
	f := newTestMediaFetcher(t, MediaOptions{})
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
			if err := checkImage(m); err != nil {
				t.Fatalf("checkImage: %v", err)
			}
		})
	}
}

func TestMediaDataURIForms(t *testing.T) {
	t.Parallel()
	f := newTestMediaFetcher(t, MediaOptions{})
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
		wantMediaErr(t, checkImage(m), errMediaType)
		if k := mediaKind(m.MimeType); k != mediaDocument {
			t.Fatalf("mediaKind = %q, want document", k)
		}
	})
}

func TestMediaCheckImageRefusesOthers(t *testing.T) {
	t.Parallel()
	f := newTestMediaFetcher(t, MediaOptions{})
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
			wantMediaErr(t, checkImage(m), errMediaType)
		})
	}
	wantMediaErr(t, checkImage(Media{}), errMediaType)
}

func TestMediaBadReferences(t *testing.T) {
	t.Parallel()
	f := newTestMediaFetcher(t, MediaOptions{AllowPrivate: true})
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
			wantMediaErr(t, err, errMediaRef)
		})
	}
}

func TestMediaDataURISizeCap(t *testing.T) {
	t.Parallel()
	const limit = 4096
	f := newTestMediaFetcher(t, MediaOptions{MaxBytes: limit})
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
		wantMediaErr(t, err, errMediaTooLarge)
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
	wantMediaErr(t, err, errMediaTooLarge)
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

	f := newTestMediaFetcher(t, MediaOptions{MaxBytes: limit, AllowPrivate: true, Timeout: 10 * time.Second})
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
			wantMediaErr(t, err, errMediaTooLarge)
			_, err = f.Load(context.Background(), srv.URL+"/?n="+strconv.Itoa(50*limit))
			wantMediaErr(t, err, errMediaTooLarge)
		})
	}
	t.Run("declared length over the cap", func(t *testing.T) {
		start := time.Now()
		_, err := f.Load(context.Background(), huge.URL+"/")
		wantMediaErr(t, err, errMediaTooLarge)
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

	strict := newTestMediaFetcher(t, MediaOptions{})
	for _, host := range []string{"127.0.0.1", "localhost", "[::ffff:127.0.0.1]"} {
		t.Run("refused "+host, func(t *testing.T) {
			_, err := strict.Load(context.Background(), "http://"+host+":"+port+"/a.png")
			wantMediaErr(t, err, errMediaBlocked)
			if strings.Contains(err.Error(), "127.0.0.1") {
				t.Fatalf("error %q reveals the resolved address", err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was reached %d times", n)
	}

	open := newTestMediaFetcher(t, MediaOptions{AllowPrivate: true})
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
	f := newTestMediaFetcher(t, MediaOptions{MaxRedirects: 3})
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
		wantMediaErr(t, err, errMediaFetch)
	})
	t.Run("to a blocked address", func(t *testing.T) {
		_, err := f.Load(context.Background(), allowed.URL+"/to-blocked")
		wantMediaErr(t, err, errMediaBlocked)
		if n := blockedHits.Load(); n != 0 {
			t.Fatalf("the blocked server was reached %d times", n)
		}
	})
	t.Run("to ftp", func(t *testing.T) {
		_, err := f.Load(context.Background(), allowed.URL+"/to-ftp")
		wantMediaErr(t, err, errMediaRef)
	})
	t.Run("to a URL with credentials", func(t *testing.T) {
		_, err := f.Load(context.Background(), allowed.URL+"/to-credentials")
		wantMediaErr(t, err, errMediaRef)
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
	f := newTestMediaFetcher(t, MediaOptions{AllowPrivate: true, Timeout: 300 * time.Millisecond})
	cases := []struct {
		path string
		want error
	}{
		{"/missing.png", errMediaFetch},
		{"/broken", errMediaFetch},
		{"/empty", errMediaRef},
		{"/stall-headers", errMediaFetch},
		{"/stall-body", errMediaFetch},
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
		wantMediaErr(t, err, errMediaFetch)
	})
	t.Run("dns failure", func(t *testing.T) {
		// .invalid never resolves (RFC 6761).
		_, err := f.Load(context.Background(), "http://no-such-host.invalid/a.png")
		wantMediaErr(t, err, errMediaFetch)
	})
	t.Run("caller canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := f.Load(ctx, srv.URL+"/stall-headers")
		wantMediaErr(t, err, errMediaFetch)
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
	f := newTestMediaFetcher(t, MediaOptions{AllowPrivate: true})
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

func TestMediaAddrBlocked(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1":          true,
		"127.8.9.10":         true,
		"10.1.2.3":           true,
		"172.16.0.1":         true,
		"172.31.255.255":     true,
		"192.168.1.1":        true,
		"169.254.169.254":    true, // cloud metadata
		"0.0.0.0":            true,
		"0.1.2.3":            true,
		"100.64.0.1":         true,
		"224.0.0.1":          true,
		"239.255.255.250":    true,
		"255.255.255.255":    true,
		"::":                 true,
		"::1":                true,
		"fe80::1":            true,
		"fe80::1%eth0":       true,
		"fc00::1":            true,
		"fd12:3456::1":       true,
		"ff02::1":            true,
		"::ffff:127.0.0.1":   true,
		"::ffff:10.0.0.1":    true,
		"64:ff9b::a00:1":     true, // NAT64 of 10.0.0.1
		"2002:c0a8:101::1":   true, // 6to4 of 192.168.1.1
		"2001:db8::1":        true,
		"8.8.8.8":            false,
		"1.1.1.1":            false,
		"172.32.0.1":         false,
		"100.128.0.1":        false,
		"2606:4700::1111":    false,
		"::ffff:8.8.8.8":     false,
		"64:ff9b::808:808":   false, // NAT64 of 8.8.8.8
		"2002:808:808::1":    false, // 6to4 of 8.8.8.8
		"2a00:1450:4001::1b": false,
	} {
		if got := mediaAddrBlocked(netip.MustParseAddr(addr)); got != want {
			t.Errorf("mediaAddrBlocked(%s) = %v, want %v", addr, got, want)
		}
	}
	if !mediaAddrBlocked(netip.Addr{}) {
		t.Error("the zero address is not blocked")
	}
}

// zipBytes builds a ZIP whose first entry is stored (as ODF and EPUB require for "mimetype").
func mediaZip(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i, file := range files {
		h := &zip.FileHeader{Name: file[0], Method: zip.Deflate}
		if i == 0 {
			h.Method = zip.Store
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(file[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mediaFtyp(brand string, compatible ...string) []byte {
	box := []byte(brand + "\x00\x00\x02\x00" + strings.Join(compatible, ""))
	return append(append(mediaBE32(uint32(8+len(box))), "ftyp"...), append(box, make([]byte, 32)...)...)
}

func mediaBE32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func mediaUTF16(s string) string { return string(utf16le(s)) }

func TestSniffMedia(t *testing.T) {
	t.Parallel()
	ole := func(stream string) []byte {
		return append(append([]byte(nil), oleMagic...), append(make([]byte, 500), mediaUTF16(stream)...)...)
	}
	cases := []struct {
		name string
		data []byte
		want string
		kind string
	}{
		{"png", mediaPNG(t), "image/png", mediaImage},
		{"jpeg", mediaJPEG(t), "image/jpeg", mediaImage},
		{"gif", mediaGIF(t), "image/gif", mediaImage},
		{"webp", mediaWebP(), "image/webp", mediaImage},
		{"heic", mediaFtyp("heic", "mif1heic"), "image/heic", mediaImage},
		{"mp4", mediaFtyp("isom", "isomiso2avc1mp41"), "video/mp4", mediaVideo},
		{"mp4 without mp4 brand", mediaFtyp("avc1", "avc1"), "video/mp4", mediaVideo},
		{"m4a", mediaFtyp("M4A ", "M4A mp42isom"), "audio/mp4", mediaAudio},
		{"quicktime", mediaFtyp("qt  ", "qt  "), "video/quicktime", mediaVideo},
		{"3gp", mediaFtyp("3gp4", "isom3gp4"), "video/3gpp", mediaVideo},
		{"webm", []byte("\x1A\x45\xDF\xA3\x9f\x42\x86\x81\x01\x42\x82\x84webm"), "video/webm", mediaVideo},
		{"matroska", []byte("\x1A\x45\xDF\xA3\xa3\x42\x86\x81\x01\x42\x82\x88matroska"), "video/x-matroska", mediaVideo},
		{"avi", []byte("RIFF\x00\x00\x00\x00AVI LIST"), "video/avi", mediaVideo},
		{"ogg opus", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x01\x13OpusHead\x01\x01"), "audio/ogg", mediaAudio},
		{"ogg vorbis", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x01\x1e\x01vorbis"), "audio/ogg", mediaAudio},
		{"ogg theora", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x01\x2a\x80theora"), "video/ogg", mediaVideo},
		{"mp3 id3", []byte("ID3\x04\x00\x00\x00\x00\x00\x00"), "audio/mpeg", mediaAudio},
		{"mp3 frame", []byte("\xFF\xFB\x90\x64\x00\x00\x00\x00"), "audio/mpeg", mediaAudio},
		{"aac adts", []byte("\xFF\xF1\x50\x80\x02\x1F\xFC"), "audio/aac", mediaAudio},
		{"amr", []byte("#!AMR\n\x3c\x00"), "audio/amr", mediaAudio},
		{"flac", []byte("fLaC\x00\x00\x00\x22"), "audio/flac", mediaAudio},
		{"wav", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), "audio/wave", mediaAudio},
		{"pdf", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), "application/pdf", mediaDocument},
		{"docx", mediaZip(t, [2]string{"[Content_Types].xml", "<Types/>"}, [2]string{"_rels/.rels", "<Relationships/>"}, [2]string{"word/document.xml", "<w:document/>"}),
			"application/vnd.openxmlformats-officedocument.wordprocessingml.document", mediaDocument},
		{"xlsx", mediaZip(t, [2]string{"[Content_Types].xml", "<Types/>"}, [2]string{"xl/workbook.xml", "<workbook/>"}),
			"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", mediaDocument},
		{"pptx", mediaZip(t, [2]string{"[Content_Types].xml", "<Types/>"}, [2]string{"ppt/presentation.xml", "<p:presentation/>"}),
			"application/vnd.openxmlformats-officedocument.presentationml.presentation", mediaDocument},
		{"odt", mediaZip(t, [2]string{"mimetype", "application/vnd.oasis.opendocument.text"}, [2]string{"content.xml", "<office/>"}),
			"application/vnd.oasis.opendocument.text", mediaDocument},
		{"epub", mediaZip(t, [2]string{"mimetype", "application/epub+zip"}, [2]string{"META-INF/container.xml", "<container/>"}),
			"application/epub+zip", mediaDocument},
		{"plain zip", mediaZip(t, [2]string{"a.txt", "hello"}), "application/zip", mediaDocument},
		{"doc", ole("WordDocument"), "application/msword", mediaDocument},
		{"xls", ole("Workbook"), "application/vnd.ms-excel", mediaDocument},
		{"ppt", ole("PowerPoint Document"), "application/vnd.ms-powerpoint", mediaDocument},
		{"other ole", ole("Something"), "application/x-ole-storage", mediaDocument},
		{"rtf", []byte(`{\rtf1\ansi hello}`), "application/rtf", mediaDocument},
		{"text", []byte("name,phone\nann,123\n"), "text/plain; charset=utf-8", mediaDocument},
		{"binary", []byte{0, 1, 2, 3, 4, 5}, "application/octet-stream", mediaDocument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := sniffMedia(c.data)
			if got != c.want {
				t.Fatalf("sniffMedia = %q, want %q", got, c.want)
			}
			if k := mediaKind(got); k != c.kind {
				t.Fatalf("mediaKind(%q) = %q, want %q", got, k, c.kind)
			}
		})
	}
}

func TestMediaKind(t *testing.T) {
	t.Parallel()
	for mt, want := range map[string]string{
		"image/png":                 mediaImage,
		"IMAGE/JPEG":                mediaImage,
		"video/mp4":                 mediaVideo,
		"audio/ogg; codecs=opus":    mediaAudio,
		"application/ogg":           mediaAudio,
		"application/pdf":           mediaDocument,
		"text/plain; charset=utf-8": mediaDocument,
		"":                          mediaDocument,
	} {
		if got := mediaKind(mt); got != want {
			t.Errorf("mediaKind(%q) = %q, want %q", mt, got, want)
		}
	}
}

// TestMediaConcurrent loads from one fetcher in parallel (run with -race).
func TestMediaConcurrent(t *testing.T) {
	t.Parallel()
	pngData := mediaPNG(t)
	srv, hits := mediaServe(t, func(w http.ResponseWriter, r *http.Request) { w.Write(pngData) })
	f := newTestMediaFetcher(t, MediaOptions{AllowPrivate: true})
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
