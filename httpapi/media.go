package httpapi

// Media intake for the send endpoints (DESIGN.md section 4 "Media"): package media fetches and
// sniffs (an SSRF-safe adapter); this file binds it to the HTTP layer. The send handlers parse
// the request fields and call s.media.Load; statusOf maps media's errors to statuses and codes.

import "github.com/gateway/gateway/media"

// MediaOptions configure intake (--media-max-bytes, --media-allow-private).
type MediaOptions = media.Options

// Media is a loaded attachment.
type Media = media.Media

// mediaFetcher loads media references; safe for concurrent use.
type mediaFetcher = media.Fetcher

func newMediaFetcher(o MediaOptions) *mediaFetcher { return media.NewFetcher(o) }

// Media intake errors, mapped by statusOf.
var (
	errMediaTooLarge = media.ErrTooLarge   // 413 media_too_large
	errMediaType     = media.ErrType       // 415 unsupported_media_type
	errMediaRef      = media.ErrRef        // 400 invalid_media
	errMediaBlocked  = media.ErrURLBlocked // 400 media_url_blocked
	errMediaFetch    = media.ErrFetch      // 502 media_fetch_failed
)

// checkImage accepts the image formats send-image supports (SPEC.md 8): JPEG, PNG, GIF, WebP.
func checkImage(m Media) error { return media.CheckImage(m) }

// mediaKind maps a MIME type to image, video, audio or document (anything else).
func mediaKind(mimeType string) string { return media.Kind(mimeType) }
