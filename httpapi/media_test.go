package httpapi

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"
)

// Every media error reaches the client with its status and code, wrapped as the fetcher and the
// send handlers wrap them.
func TestMediaErrorStatus(t *testing.T) {
	f := newMediaFetcher(MediaOptions{MaxBytes: 4})
	load := func(ref string) error {
		_, err := f.Load(context.Background(), ref)
		return err
	}
	for _, c := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"too large", load("data:,12345"), fasthttp.StatusRequestEntityTooLarge, "media_too_large"},
		{"not an image", checkImage(Media{MimeType: "text/plain"}), fasthttp.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"bad reference", load("ftp://example.com/a.png"), fasthttp.StatusBadRequest, "invalid_media"},
		{"private address", load("http://127.0.0.1:1/a.png"), fasthttp.StatusBadRequest, "media_url_blocked"},
		{"fetch failed", load("http://no-such-host.invalid/a.png"), fasthttp.StatusBadGateway, "media_fetch_failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, code := statusOf(c.err)
			if status != c.status || code != c.code {
				t.Fatalf("statusOf(%v) = %d %s, want %d %s", c.err, status, code, c.status, c.code)
			}
		})
	}
	if mediaKind("video/mp4") != "video" {
		t.Fatal("mediaKind")
	}
}
