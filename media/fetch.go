// Package media is the gateway's media intake adapter: an http(s) URL or a data: URI becomes
// bytes plus a MIME type sniffed from those bytes. Everything here treats the reference as
// hostile: the fetch cannot reach private addresses (checked on the resolved IP at connection
// time, so DNS rebinding and redirects do not get around it), the size cap holds while
// reading, and nothing a server says about the type is believed. The address checks are
// the Guard, which other adapters dial through for addresses a user chose.
//
// It imports only the standard library; it never imports the gateway's core packages.
package media

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
)

// Defaults of Options' zero fields.
const (
	defaultMaxBytes     = 16 << 20
	defaultTimeout      = 20 * time.Second
	defaultMaxRedirects = 5
)

// Options configure intake.
type Options struct {
	// MaxBytes caps the decoded size (--media-max-bytes; 0 means 16 MiB). It is enforced while
	// reading, never by buffering an unbounded body.
	MaxBytes int64
	// AllowPrivate lets URLs reach private, loopback, link-local, unspecified and multicast
	// addresses (--media-allow-private).
	AllowPrivate bool
	// Timeout bounds the whole fetch: connect, redirects, headers and body (0 means 20 s).
	Timeout time.Duration
	// MaxRedirects is how many redirects a fetch follows (0 means 5, negative means none).
	// Every redirect target is checked like the first URL.
	MaxRedirects int
}

// Media is a loaded attachment.
type Media struct {
	Data []byte
	// MimeType is sniffed from Data, never taken from headers or the data: URI's label.
	MimeType string
	// FileName comes from Content-Disposition, else the URL path's last segment, else "".
	FileName string
}

// Fetcher loads media references. It is safe for concurrent use.
type Fetcher struct {
	opts   Options
	client *http.Client
	// dialCheck decides, on the resolved address, whether a connection may be made. It is
	// checkAddr outside tests (which replace it because their servers are on loopback).
	dialCheck func(netip.AddrPort) error
}

func NewFetcher(o Options) *Fetcher {
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.MaxRedirects == 0 {
		o.MaxRedirects = defaultMaxRedirects
	} else if o.MaxRedirects < 0 {
		o.MaxRedirects = 0
	}
	f := &Fetcher{opts: o}
	f.dialCheck = f.checkAddr
	dialer := &net.Dialer{
		Timeout:   min(o.Timeout, 10*time.Second),
		KeepAlive: 30 * time.Second,
		// Control runs after DNS resolution, once per address tried, before connect: the only
		// point where the address is the one actually used.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &mediaError{kind: domain.ErrMediaBlocked, msg: "unrecognised address"}
			}
			return f.dialCheck(ap)
		},
	}
	transport := &http.Transport{
		// No proxy: a proxy would connect on our behalf and bypass the address check.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	f.client = &http.Client{
		Transport: transport,
		Timeout:   o.Timeout, // the request context bounds it too; this also holds if that is lost

		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > o.MaxRedirects {
				return &mediaError{kind: domain.ErrMediaFetch, msg: fmt.Sprintf("more than %d redirects", o.MaxRedirects)}
			}
			return checkURL(req.URL)
		},
	}
	return f
}

// mediaError carries a sentinel, a message fit for the API caller (no resolved addresses, no
// full URL with its query string) and, for logs and errors.Is, the underlying cause.
type mediaError struct {
	kind  error
	msg   string
	cause error
}

func (e *mediaError) Error() string { return e.kind.Error() + ": " + e.msg }

func (e *mediaError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

func mediaErr(kind error, format string, args ...any) error {
	return &mediaError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Load takes an http(s) URL or a data: URI (base64 or percent-encoded) and returns the bytes.
func (f *Fetcher) Load(ctx context.Context, ref string) (Media, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Media{}, mediaErr(domain.ErrInvalidMedia, "empty reference")
	}
	if len(ref) >= 5 && strings.EqualFold(ref[:5], "data:") {
		return f.loadData(ref[5:])
	}
	u, err := url.Parse(ref)
	if err != nil {
		return Media{}, mediaErr(domain.ErrInvalidMedia, "not an http(s) URL or data: URI")
	}
	if err := checkURL(u); err != nil {
		return Media{}, err
	}
	return f.fetch(ctx, u)
}

// checkURL is what any URL, first or redirect target, must satisfy before a request.
func checkURL(u *url.URL) error {
	switch u.Scheme {
	case "http", "https":
	case "":
		return mediaErr(domain.ErrInvalidMedia, "not an http(s) URL or data: URI")
	default:
		return mediaErr(domain.ErrInvalidMedia, "scheme %q not supported (use http, https or data)", u.Scheme)
	}
	if u.Hostname() == "" {
		return mediaErr(domain.ErrInvalidMedia, "URL has no host")
	}
	if u.User != nil {
		// Credentials would be sent to whatever the URL (or a redirect) points at, and logged.
		return mediaErr(domain.ErrInvalidMedia, "URL must not carry credentials")
	}
	return nil
}

// checkAddr refuses what the Guard refuses, as a media error (the message names no address: a
// caller must not learn what internal names resolve to).
func (f *Fetcher) checkAddr(ap netip.AddrPort) error {
	if (Guard{AllowPrivate: f.opts.AllowPrivate}).CheckAddr(ap.Addr()) == nil {
		return nil
	}
	return mediaErr(domain.ErrMediaBlocked, "host resolves to a private, loopback or link-local address")
}

func (f *Fetcher) fetch(ctx context.Context, u *url.URL) (Media, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Media{}, mediaErr(domain.ErrInvalidMedia, "not a valid URL")
	}
	req.Header.Set("User-Agent", "gateway-media/1")
	req.Header.Set("Accept", "*/*")
	resp, err := f.client.Do(req)
	if err != nil {
		return Media{}, f.fetchError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Media{}, mediaErr(domain.ErrMediaFetch, "server answered %s", resp.Status)
	}
	if resp.ContentLength > f.opts.MaxBytes {
		return Media{}, mediaErr(domain.ErrMediaTooLarge, "%d bytes, the limit is %d", resp.ContentLength, f.opts.MaxBytes)
	}
	data, err := readCapped(resp.Body, f.opts.MaxBytes, resp.ContentLength)
	if err != nil {
		if errors.Is(err, domain.ErrMediaTooLarge) {
			return Media{}, err
		}
		return Media{}, f.fetchError(ctx, err)
	}
	if len(data) == 0 {
		return Media{}, mediaErr(domain.ErrInvalidMedia, "the URL returned no content")
	}
	name := contentDispositionName(resp.Header.Get("Content-Disposition"))
	if name == "" {
		// The final URL: a redirect from a short link names the real file.
		name = urlFileName(resp.Request.URL)
	}
	return Media{Data: data, MimeType: Sniff(data), FileName: name}, nil
}

// fetchError turns a client or body-read error into a media error with a clean message.
func (f *Fetcher) fetchError(ctx context.Context, err error) error {
	var me *mediaError
	if errors.As(err, &me) { // from the dial check or CheckRedirect
		return me
	}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err // its text repeats the URL, query string and all
	}
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return &mediaError{kind: domain.ErrMediaFetch, msg: fmt.Sprintf("timed out (limit %s)", f.opts.Timeout), cause: cause}
	case errors.Is(ctx.Err(), context.Canceled):
		return &mediaError{kind: domain.ErrMediaFetch, msg: "canceled", cause: cause}
	case errors.As(err, &dnsErr):
		return &mediaError{kind: domain.ErrMediaFetch, msg: fmt.Sprintf("cannot resolve host %q", dnsErr.Name), cause: cause}
	}
	return &mediaError{kind: domain.ErrMediaFetch, msg: cause.Error(), cause: cause}
}

// readCapped reads r to the end, failing with ErrTooLarge as soon as more than limit bytes
// arrive: at most limit+1 bytes are read, whatever the body claims. hint is the declared length
// (-1 when unknown), used only to size the buffer once.
func readCapped(r io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		size = hint + 1 // +1: the read that sees EOF needs no growth
	}
	b := make([]byte, 0, min(size, limit+1))
	lr := io.LimitReader(r, limit+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return nil, mediaErr(domain.ErrMediaTooLarge, "more than %d bytes", limit)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// loadData decodes the part of a data: URI after "data:". The declared type is ignored.
func (f *Fetcher) loadData(rest string) (Media, error) {
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return Media{}, mediaErr(domain.ErrInvalidMedia, "data URI has no comma before its data")
	}
	isBase64, name := false, ""
	params := strings.Split(meta, ";")
	for _, p := range params[1:] {
		p = strings.TrimSpace(p)
		if strings.EqualFold(p, "base64") {
			isBase64 = true
			continue
		}
		// Some producers label the file: data:image/png;name=x.png;base64,...
		if k, v, ok := strings.Cut(p, "="); ok && (strings.EqualFold(k, "name") || strings.EqualFold(k, "filename")) {
			if uv, err := url.PathUnescape(v); err == nil {
				name = cleanFileName(uv)
			}
		}
	}
	var data []byte
	var err error
	if isBase64 {
		data, err = decodeBase64Capped(payload, f.opts.MaxBytes)
	} else {
		data, err = decodePercentCapped(payload, f.opts.MaxBytes)
	}
	if err != nil {
		return Media{}, err
	}
	if len(data) == 0 {
		return Media{}, mediaErr(domain.ErrInvalidMedia, "data URI carries no data")
	}
	return Media{Data: data, MimeType: Sniff(data), FileName: name}, nil
}

// decodeBase64Capped decodes standard or URL-safe base64, padded or not, line-wrapped or not.
// The decoded size is computed from the encoded text first, so nothing over limit is allocated.
func decodeBase64Capped(s string, limit int64) ([]byte, error) {
	if strings.Contains(s, "%") { // percent-encoded inside the URI ('%' is not base64)
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, mediaErr(domain.ErrInvalidMedia, "data URI has a bad percent-encoding")
		}
		s = u
	}
	if strings.ContainsAny(s, " \t\r\n") { // line-wrapped base64
		s = strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, s)
	}
	s = strings.TrimRight(s, "=")
	// Each unpadded character carries 6 bits; a trailing partial byte is dropped.
	n := int64(len(s))
	if n*3/4 > limit {
		return nil, mediaErr(domain.ErrMediaTooLarge, "%d bytes, the limit is %d", n*3/4, limit)
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	data, err := enc.DecodeString(s)
	if err != nil {
		return nil, mediaErr(domain.ErrInvalidMedia, "data URI is not valid base64")
	}
	return data, nil
}

// decodePercentCapped decodes a percent-encoded (non-base64) data: URI payload.
func decodePercentCapped(s string, limit int64) ([]byte, error) {
	size := int64(len(s) - 2*strings.Count(s, "%"))
	if size > limit {
		return nil, mediaErr(domain.ErrMediaTooLarge, "%d bytes, the limit is %d", size, limit)
	}
	u, err := url.PathUnescape(s)
	if err != nil {
		return nil, mediaErr(domain.ErrInvalidMedia, "data URI has a bad percent-encoding")
	}
	return []byte(u), nil
}

// contentDispositionName is the filename parameter (RFC 6266, filename* decoded), cleaned.
func contentDispositionName(h string) string {
	if h == "" {
		return ""
	}
	_, params, err := mime.ParseMediaType(h)
	if err != nil {
		return ""
	}
	return cleanFileName(params["filename"])
}

// urlFileName is the URL path's last segment, or "" when the path ends in a directory.
func urlFileName(u *url.URL) string {
	if u == nil || u.Path == "" || strings.HasSuffix(u.Path, "/") {
		return ""
	}
	return cleanFileName(u.Path)
}

// cleanFileName keeps the last path element and drops control and format characters (a
// right-to-left override can disguise an extension), capped at 255 bytes.
func cleanFileName(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if s == "." || s == ".." {
		return ""
	}
	for len(s) > 255 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
