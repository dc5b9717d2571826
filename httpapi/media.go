package httpapi

// Media intake for the send endpoints (DESIGN.md section 4 "Media"): an http(s) URL or a data:
// URI becomes bytes plus a MIME type sniffed from those bytes. Everything here treats the
// reference as hostile: the fetch cannot reach private addresses (checked on the resolved IP at
// connection time, so DNS rebinding and redirects do not get around it), the size cap holds
// while reading, and nothing a server says about the type is believed.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
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

	"github.com/gateway/gateway/media"
)

// Media intake errors; the error model maps each to a status and code.
var (
	// errMediaTooLarge: the media is over --media-max-bytes (413 media_too_large).
	errMediaTooLarge = errors.New("media too large")
	// errMediaType: the bytes are not a type the endpoint accepts (415 unsupported_media_type).
	errMediaType = errors.New("unsupported media type")
	// errMediaRef: not an http(s) URL or data: URI, bad encoding, credentials in the URL, or
	// nothing to send (400 invalid_media).
	errMediaRef = errors.New("invalid media reference")
	// errMediaBlocked: the URL leads to a private, loopback or link-local address and
	// --media-allow-private is off (400 media_url_blocked).
	errMediaBlocked = errors.New("media URL not allowed")
	// errMediaFetch: the fetch failed: DNS, connection, timeout, non-2xx status, too many
	// redirects (502 media_fetch_failed).
	errMediaFetch = errors.New("media fetch failed")
)

// Defaults of MediaOptions' zero fields.
const (
	defaultMediaMaxBytes     = 16 << 20
	defaultMediaTimeout      = 20 * time.Second
	defaultMediaMaxRedirects = 5
)

// MediaOptions configure intake.
type MediaOptions struct {
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

// mediaFetcher loads media references. It is safe for concurrent use.
type mediaFetcher struct {
	opts   MediaOptions
	client *http.Client
	// dialCheck decides, on the resolved address, whether a connection may be made. It is
	// checkAddr outside tests (which replace it because their servers are on loopback).
	dialCheck func(netip.AddrPort) error
}

func newMediaFetcher(o MediaOptions) *mediaFetcher {
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMediaMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultMediaTimeout
	}
	if o.MaxRedirects == 0 {
		o.MaxRedirects = defaultMediaMaxRedirects
	} else if o.MaxRedirects < 0 {
		o.MaxRedirects = 0
	}
	f := &mediaFetcher{opts: o}
	f.dialCheck = f.checkAddr
	dialer := &net.Dialer{
		Timeout:   min(o.Timeout, 10*time.Second),
		KeepAlive: 30 * time.Second,
		// Control runs after DNS resolution, once per address tried, before connect: the only
		// point where the address is the one actually used.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &mediaError{kind: errMediaBlocked, msg: "unrecognised address"}
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
				return &mediaError{kind: errMediaFetch, msg: fmt.Sprintf("more than %d redirects", o.MaxRedirects)}
			}
			return checkMediaURL(req.URL)
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
func (f *mediaFetcher) Load(ctx context.Context, ref string) (Media, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Media{}, mediaErr(errMediaRef, "empty reference")
	}
	if len(ref) >= 5 && strings.EqualFold(ref[:5], "data:") {
		return f.loadData(ref[5:])
	}
	u, err := url.Parse(ref)
	if err != nil {
		return Media{}, mediaErr(errMediaRef, "not an http(s) URL or data: URI")
	}
	if err := checkMediaURL(u); err != nil {
		return Media{}, err
	}
	return f.fetch(ctx, u)
}

// checkMediaURL is what any URL, first or redirect target, must satisfy before a request.
func checkMediaURL(u *url.URL) error {
	switch u.Scheme {
	case "http", "https":
	case "":
		return mediaErr(errMediaRef, "not an http(s) URL or data: URI")
	default:
		return mediaErr(errMediaRef, "scheme %q not supported (use http, https or data)", u.Scheme)
	}
	if u.Hostname() == "" {
		return mediaErr(errMediaRef, "URL has no host")
	}
	if u.User != nil {
		// Credentials would be sent to whatever the URL (or a redirect) points at, and logged.
		return mediaErr(errMediaRef, "URL must not carry credentials")
	}
	return nil
}

// checkAddr refuses addresses outside the public internet unless AllowPrivate.
func (f *mediaFetcher) checkAddr(ap netip.AddrPort) error {
	if f.opts.AllowPrivate || !mediaAddrBlocked(ap.Addr()) {
		return nil
	}
	// The message names no address: a caller must not learn what internal names resolve to.
	return mediaErr(errMediaBlocked, "host resolves to a private, loopback or link-local address")
}

// mediaAddrBlocked reports whether ip is not a public unicast address (one rule for media and
// webhook URLs: media.AddrBlocked).
func mediaAddrBlocked(ip netip.Addr) bool { return media.AddrBlocked(ip) }

func (f *mediaFetcher) fetch(ctx context.Context, u *url.URL) (Media, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Media{}, mediaErr(errMediaRef, "not a valid URL")
	}
	req.Header.Set("User-Agent", "gateway-media/1")
	req.Header.Set("Accept", "*/*")
	resp, err := f.client.Do(req)
	if err != nil {
		return Media{}, f.fetchError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Media{}, mediaErr(errMediaFetch, "server answered %s", resp.Status)
	}
	if resp.ContentLength > f.opts.MaxBytes {
		return Media{}, mediaErr(errMediaTooLarge, "%d bytes, the limit is %d", resp.ContentLength, f.opts.MaxBytes)
	}
	data, err := readCapped(resp.Body, f.opts.MaxBytes, resp.ContentLength)
	if err != nil {
		if errors.Is(err, errMediaTooLarge) {
			return Media{}, err
		}
		return Media{}, f.fetchError(ctx, err)
	}
	if len(data) == 0 {
		return Media{}, mediaErr(errMediaRef, "the URL returned no content")
	}
	name := contentDispositionName(resp.Header.Get("Content-Disposition"))
	if name == "" {
		// The final URL: a redirect from a short link names the real file.
		name = urlFileName(resp.Request.URL)
	}
	return Media{Data: data, MimeType: sniffMedia(data), FileName: name}, nil
}

// fetchError turns a client or body-read error into a media error with a clean message.
func (f *mediaFetcher) fetchError(ctx context.Context, err error) error {
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
		return &mediaError{kind: errMediaFetch, msg: fmt.Sprintf("timed out (limit %s)", f.opts.Timeout), cause: cause}
	case errors.Is(ctx.Err(), context.Canceled):
		return &mediaError{kind: errMediaFetch, msg: "canceled", cause: cause}
	case errors.As(err, &dnsErr):
		return &mediaError{kind: errMediaFetch, msg: fmt.Sprintf("cannot resolve host %q", dnsErr.Name), cause: cause}
	}
	return &mediaError{kind: errMediaFetch, msg: cause.Error(), cause: cause}
}

// readCapped reads r to the end, failing with errMediaTooLarge as soon as more than limit bytes
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
			return nil, mediaErr(errMediaTooLarge, "more than %d bytes", limit)
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
func (f *mediaFetcher) loadData(rest string) (Media, error) {
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return Media{}, mediaErr(errMediaRef, "data URI has no comma before its data")
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
		return Media{}, mediaErr(errMediaRef, "data URI carries no data")
	}
	return Media{Data: data, MimeType: sniffMedia(data), FileName: name}, nil
}

// decodeBase64Capped decodes standard or URL-safe base64, padded or not, line-wrapped or not.
// The decoded size is computed from the encoded text first, so nothing over limit is allocated.
func decodeBase64Capped(s string, limit int64) ([]byte, error) {
	if strings.Contains(s, "%") { // percent-encoded inside the URI ('%' is not base64)
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, mediaErr(errMediaRef, "data URI has a bad percent-encoding")
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
		return nil, mediaErr(errMediaTooLarge, "%d bytes, the limit is %d", n*3/4, limit)
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	data, err := enc.DecodeString(s)
	if err != nil {
		return nil, mediaErr(errMediaRef, "data URI is not valid base64")
	}
	return data, nil
}

// decodePercentCapped decodes a percent-encoded (non-base64) data: URI payload.
func decodePercentCapped(s string, limit int64) ([]byte, error) {
	size := int64(len(s) - 2*strings.Count(s, "%"))
	if size > limit {
		return nil, mediaErr(errMediaTooLarge, "%d bytes, the limit is %d", size, limit)
	}
	u, err := url.PathUnescape(s)
	if err != nil {
		return nil, mediaErr(errMediaRef, "data URI has a bad percent-encoding")
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

// Media kinds, named as network message kinds.
const (
	mediaImage    = "image"
	mediaVideo    = "video"
	mediaAudio    = "audio"
	mediaDocument = "document"
)

// mediaKind maps a MIME type to image, video, audio or document (anything else).
func mediaKind(mimeType string) string {
	mt, _, _ := strings.Cut(mimeType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	switch {
	case strings.HasPrefix(mt, "image/"):
		return mediaImage
	case strings.HasPrefix(mt, "video/"):
		return mediaVideo
	case strings.HasPrefix(mt, "audio/"), mt == "application/ogg":
		return mediaAudio
	}
	return mediaDocument
}

// checkImage accepts the image formats send-image supports (SPEC.md 8): JPEG, PNG, GIF, WebP.
func checkImage(m Media) error {
	switch m.MimeType {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return nil
	}
	t := m.MimeType
	if t == "" {
		t = "unknown type"
	}
	return mediaErr(errMediaType, "%s is not a JPEG, PNG, GIF or WebP image", t)
}

// sniffMedia names the type of b from its bytes: net/http's sniffer (WHATWG MIME Sniffing), made
// finer for the media a messaging network carries (MP4 family, Ogg codecs, raw MP3/AAC, AMR,
// FLAC, Matroska) and for documents (Office Open XML, OpenDocument, EPUB, legacy Office, RTF).
func sniffMedia(b []byte) string {
	if len(b) >= 12 && string(b[4:8]) == "ftyp" {
		return sniffFtyp(b)
	}
	if bytes.HasPrefix(b, []byte(`{\rtf`)) {
		return "application/rtf"
	}
	ct := http.DetectContentType(b)
	switch ct {
	case "application/zip":
		return sniffZip(b)
	case "application/ogg":
		return sniffOgg(b)
	case "video/webm":
		if bytes.Contains(b[:min(len(b), 64)], []byte("matroska")) {
			return "video/x-matroska"
		}
	case "application/octet-stream":
		if t := sniffBinary(b); t != "" {
			return t
		}
	}
	return ct
}

// sniffFtyp reads an ISO base media file's major brand: MP4 and its relatives share the box.
func sniffFtyp(b []byte) string {
	brand := string(b[8:12])
	switch {
	case brand == "M4A " || brand == "M4B " || brand == "M4P " || brand == "F4A " || brand == "F4B ":
		return "audio/mp4"
	case brand == "qt  ":
		return "video/quicktime"
	case strings.HasPrefix(brand, "3gp"):
		return "video/3gpp"
	case strings.HasPrefix(brand, "3g2"):
		return "video/3gpp2"
	case brand == "heic" || brand == "heix" || brand == "heim" || brand == "heis":
		return "image/heic"
	case brand == "mif1" || brand == "msf1":
		return "image/heif"
	case brand == "avif" || brand == "avis":
		return "image/avif"
	}
	return "video/mp4"
}

// sniffOgg looks at the first stream's codec header.
func sniffOgg(b []byte) string {
	head := b[:min(len(b), 64)]
	switch {
	case bytes.Contains(head, []byte("\x80theora")):
		return "video/ogg"
	case bytes.Contains(head, []byte("OpusHead")), bytes.Contains(head, []byte("\x01vorbis")),
		bytes.Contains(head, []byte("Speex   ")), bytes.Contains(head, []byte("\x7fFLAC")):
		return "audio/ogg"
	}
	return "application/ogg"
}

// sniffZip tells Office Open XML, OpenDocument and EPUB apart from a plain ZIP. ODF and EPUB
// store a "mimetype" entry first, uncompressed (file(1) reads it the same way); OOXML is
// recognised by its part names, which appear uncompressed in the headers.
func sniffZip(b []byte) string {
	const local = 30 // fixed part of a local file header
	if len(b) > local+8 && binary.LittleEndian.Uint16(b[26:28]) == 8 && string(b[local:local+8]) == "mimetype" {
		start := local + 8 + int(binary.LittleEndian.Uint16(b[28:30]))
		if start < len(b) {
			v := b[start:min(len(b), start+80)]
			end := 0
			for end < len(v) && (v[end] == '.' || v[end] == '/' || v[end] == '-' || v[end] == '+' ||
				v[end] >= 'a' && v[end] <= 'z' || v[end] >= '0' && v[end] <= '9') {
				end++
			}
			if t := string(v[:end]); strings.HasPrefix(t, "application/vnd.oasis.opendocument.") || t == "application/epub+zip" {
				return t
			}
		}
	}
	if bytes.Contains(b, []byte("[Content_Types].xml")) {
		switch {
		case bytes.Contains(b, []byte("word/document.xml")):
			return "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
		case bytes.Contains(b, []byte("xl/workbook.xml")):
			return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
		case bytes.Contains(b, []byte("ppt/presentation.xml")):
			return "application/vnd.openxmlformats-officedocument.presentationml.presentation"
		}
	}
	return "application/zip"
}

// oleMagic opens a Compound File Binary (legacy .doc, .xls, .ppt, .msg).
var oleMagic = []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1")

// sniffBinary recognises formats net/http calls application/octet-stream.
func sniffBinary(b []byte) string {
	switch {
	case bytes.HasPrefix(b, oleMagic):
		// The stream names are stored in UTF-16LE in the directory.
		switch {
		case bytes.Contains(b, utf16le("WordDocument")):
			return "application/msword"
		case bytes.Contains(b, utf16le("Workbook")), bytes.Contains(b, utf16le("Book")):
			return "application/vnd.ms-excel"
		case bytes.Contains(b, utf16le("PowerPoint Document")):
			return "application/vnd.ms-powerpoint"
		}
		return "application/x-ole-storage"
	case bytes.HasPrefix(b, []byte("#!AMR\n")):
		return "audio/amr"
	case bytes.HasPrefix(b, []byte("#!AMR-WB\n")):
		return "audio/amr-wb"
	case bytes.HasPrefix(b, []byte("fLaC")):
		return "audio/flac"
	case len(b) >= 3 && b[0] == 0xFF && b[1]&0xF6 == 0xF0:
		// ADTS: 12-bit sync, layer 00.
		return "audio/aac"
	case len(b) >= 3 && b[0] == 0xFF && b[1]&0xE0 == 0xE0 && (b[1]>>3)&3 != 1 && (b[1]>>1)&3 != 0 && b[2]>>4 != 0xF && (b[2]>>2)&3 != 3:
		// MPEG audio frame without an ID3 tag: 11-bit sync, a valid version, layer, bitrate
		// and sample rate.
		return "audio/mpeg"
	}
	return ""
}

func utf16le(s string) []byte {
	out := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, s[i], 0)
	}
	return out
}
