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

// checkImage accepts the image formats send-image supports (SPEC.md 8): JPEG, PNG, GIF, WebP.
func checkImage(m Media) error { return media.CheckImage(m) }

// mediaKind maps a MIME type to image, video, audio or document (anything else).
func mediaKind(mimeType string) string { return media.Kind(mimeType) }
