package media

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strings"

	"github.com/gateway/gateway/domain"
)

// Media kinds, named as network message kinds.
const (
	KindImage    = "image"
	KindVideo    = "video"
	KindAudio    = "audio"
	KindDocument = "document"
)

// Kind maps a MIME type to image, video, audio or document (anything else).
func Kind(mimeType string) string {
	mt, _, _ := strings.Cut(mimeType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	switch {
	case strings.HasPrefix(mt, "image/"):
		return KindImage
	case strings.HasPrefix(mt, "video/"):
		return KindVideo
	case strings.HasPrefix(mt, "audio/"), mt == "application/ogg":
		return KindAudio
	}
	return KindDocument
}

// CheckImage accepts the image formats send-image supports (SPEC.md 8): JPEG, PNG, GIF, WebP.
func CheckImage(m Media) error {
	switch m.MimeType {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return nil
	}
	t := m.MimeType
	if t == "" {
		t = "unknown type"
	}
	return mediaErr(domain.ErrMediaType, "%s is not a JPEG, PNG, GIF or WebP image", t)
}

// Sniff names the type of b from its bytes: net/http's sniffer (WHATWG MIME Sniffing), made
// finer for the media a messaging network carries (MP4 family, Ogg codecs, raw MP3/AAC, AMR,
// FLAC, Matroska) and for documents (Office Open XML, OpenDocument, EPUB, legacy Office, RTF).
func Sniff(b []byte) string {
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
