package whatsapp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decoders for thumbnails
	"image/jpeg"
	_ "image/png"
	"math"
	"net/http"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Thumbnail policy: WhatsApp shows the inline JPEG thumbnail while the media downloads.
const (
	thumbMaxSide = 96
	thumbQuality = 60
	// thumbMaxPixels guards against decompression bombs (a small PNG of huge dimensions).
	thumbMaxPixels = 40_000_000
)

// uploadFunc is whatsmeow's Client.Upload (a parameter so message building is testable).
type uploadFunc func(ctx context.Context, data []byte, mt whatsmeow.MediaType) (whatsmeow.UploadResponse, error)

func supportedKind(k domain.Kind) bool { return k.Valid() }

// buildMessage makes the WhatsApp message of m, uploading its media first.
func buildMessage(ctx context.Context, upload uploadFunc, m domain.Message, now time.Time) (*waE2E.Message, error) {
	switch m.Kind {
	case domain.KindText:
		if m.Text == "" {
			return nil, errors.New("empty text")
		}
		return &waE2E.Message{Conversation: proto.String(m.Text)}, nil

	case domain.KindLocation:
		if math.IsNaN(m.Lat) || math.IsNaN(m.Lng) || m.Lat < -90 || m.Lat > 90 || m.Lng < -180 || m.Lng > 180 {
			return nil, fmt.Errorf("invalid coordinates %v, %v", m.Lat, m.Lng)
		}
		loc := &waE2E.LocationMessage{
			DegreesLatitude:  proto.Float64(m.Lat),
			DegreesLongitude: proto.Float64(m.Lng),
		}
		switch {
		case m.LocationName != "":
			loc.Name, loc.Address = proto.String(m.LocationName), optional(m.Address)
		case m.Address != "":
			loc.Name = proto.String(m.Address) // the dashboard's one field: the place's title
		}
		return &waE2E.Message{LocationMessage: loc}, nil

	case domain.KindContact:
		digits := onlyDigits(m.ContactPhone)
		if digits == "" {
			return nil, fmt.Errorf("contact %q has no phone number", m.ContactName)
		}
		name := strings.TrimSpace(m.ContactName)
		if name == "" {
			name = "+" + digits
		}
		return &waE2E.Message{ContactMessage: &waE2E.ContactMessage{
			DisplayName: proto.String(name),
			Vcard:       proto.String(vCard(name, digits)),
		}}, nil

	case domain.KindImage, domain.KindVideo, domain.KindAudio, domain.KindDocument, domain.KindSticker:
		return buildMediaMessage(ctx, upload, m, now)
	}
	return nil, fmt.Errorf("kind %q: %w", m.Kind, network.ErrUnsupported)
}

func buildMediaMessage(ctx context.Context, upload uploadFunc, m domain.Message, now time.Time) (*waE2E.Message, error) {
	if len(m.Data) == 0 {
		return nil, fmt.Errorf("%s message without media data", m.Kind)
	}
	mime := m.MimeType
	if mime == "" {
		mime = http.DetectContentType(m.Data)
	}
	if m.Kind == domain.KindSticker && mime != "image/webp" {
		return nil, fmt.Errorf("a sticker must be WebP, not %s: %w", mime, network.ErrUnsupported)
	}
	mediaType := map[domain.Kind]whatsmeow.MediaType{
		domain.KindSticker:  whatsmeow.MediaImage, // stickers are uploaded as images (mautrix, whatsmeow's mdtest)
		domain.KindImage:    whatsmeow.MediaImage,
		domain.KindVideo:    whatsmeow.MediaVideo,
		domain.KindAudio:    whatsmeow.MediaAudio,
		domain.KindDocument: whatsmeow.MediaDocument,
	}[m.Kind]
	var audio audioInfo
	if m.Kind == domain.KindAudio {
		// Refuse what WhatsApp cannot play before uploading anything.
		var err error
		if audio, err = inspectAudio(m.Data, mime); err != nil {
			return nil, err
		}
		if m.PTT && !audio.voiceNote {
			return nil, fmt.Errorf("audio: a voice note must be Ogg/Opus (or convertible with --ffmpeg), not %s: %w", mime, network.ErrUnsupported)
		}
	}
	up, err := upload(ctx, m.Data, mediaType)
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", m.Kind, err)
	}
	keyTS := proto.Int64(now.Unix())
	caption := optional(m.Caption)

	switch m.Kind {
	case domain.KindImage:
		img := &waE2E.ImageMessage{
			Caption: caption, Mimetype: proto.String(mime),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			MediaKeyTimestamp: keyTS,
		}
		if t, ok := imageThumbnail(m.Data); ok {
			img.JPEGThumbnail = t.jpeg
			img.Width, img.Height = proto.Uint32(uint32(t.width)), proto.Uint32(uint32(t.height))
		}
		return &waE2E.Message{ImageMessage: img}, nil

	case domain.KindSticker:
		st := &waE2E.StickerMessage{
			Mimetype: proto.String(mime),
			URL:      proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			MediaKeyTimestamp: keyTS,
		}
		if w, h, ok := webpSize(m.Data); ok {
			st.Width, st.Height = proto.Uint32(w), proto.Uint32(h)
		}
		return &waE2E.Message{StickerMessage: st}, nil

	case domain.KindVideo:
		vid := &waE2E.VideoMessage{
			Caption: caption, Mimetype: proto.String(mime),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			MediaKeyTimestamp: keyTS,
		}
		info := mp4Info(m.Data)
		if info.seconds > 0 {
			vid.Seconds = proto.Uint32(info.seconds)
		}
		// No video decoder in the standard library: the thumbnail is the file's embedded cover
		// art when it has one, else none (WhatsApp then shows a blank preview).
		if t, ok := imageThumbnail(info.cover); ok {
			vid.JPEGThumbnail = t.jpeg
		}
		return &waE2E.Message{VideoMessage: vid}, nil

	case domain.KindAudio:
		aud := &waE2E.AudioMessage{
			Mimetype: proto.String(audio.mime),
			URL:      proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			MediaKeyTimestamp: keyTS,
		}
		if audio.seconds > 0 {
			aud.Seconds = proto.Uint32(audio.seconds)
		}
		if audio.voiceNote {
			aud.PTT = proto.Bool(true)
			aud.Waveform = audio.waveform
		}
		return &waE2E.Message{AudioMessage: aud}, nil

	default: // document
		name := m.FileName
		if name == "" {
			name = "file"
		}
		doc := &waE2E.DocumentMessage{
			FileName: proto.String(name), Title: proto.String(name), Mimetype: proto.String(mime),
			Caption: caption,
			URL:     proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			MediaKeyTimestamp: keyTS,
		}
		if caption != nil {
			// WhatsApp clients send captioned documents wrapped, and show the caption only then.
			return &waE2E.Message{DocumentWithCaptionMessage: &waE2E.FutureProofMessage{
				Message: &waE2E.Message{DocumentMessage: doc},
			}}, nil
		}
		return &waE2E.Message{DocumentMessage: doc}, nil
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return proto.String(s)
}

func onlyDigits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// vCard is the vCard 3.0 WhatsApp clients send for a shared contact; waid makes the number
// tappable ("Message", "Add contact") on the recipient's phone.
func vCard(name, digits string) string {
	n := vCardEscape(name)
	return "BEGIN:VCARD\nVERSION:3.0\n" +
		"N:;" + n + ";;;\n" +
		"FN:" + n + "\n" +
		"TEL;type=CELL;type=VOICE;waid=" + digits + ":+" + digits + "\n" +
		"END:VCARD"
}

func vCardEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, ",", `\,`, ";", `\;`, "\r\n", `\n`, "\n", `\n`, "\r", `\n`).Replace(s)
}

// thumbnail is a JPEG preview and the source image's dimensions.
type thumbnail struct {
	jpeg          []byte
	width, height int
}

// imageThumbnail decodes JPEG, PNG or GIF bytes and scales them to fit thumbMaxSide. It reports
// false for anything it cannot decode (WebP, say): the message is then sent without one.
func imageThumbnail(data []byte) (thumbnail, bool) {
	if len(data) == 0 {
		return thumbnail{}, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width*cfg.Height > thumbMaxPixels {
		return thumbnail{}, false
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return thumbnail{}, false
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, scaleDown(src, thumbMaxSide), &jpeg.Options{Quality: thumbQuality}); err != nil {
		return thumbnail{}, false
	}
	return thumbnail{jpeg: buf.Bytes(), width: cfg.Width, height: cfg.Height}, true
}

// scaleDown fits src into maxSide×maxSide, averaging a grid of at most 4×4 samples per output
// pixel (a box filter that stays cheap on camera-sized images). Transparent areas become white,
// as JPEG has no alpha.
func scaleDown(src image.Image, maxSide int) *image.RGBA {
	b := src.Bounds()
	sw, sh := b.Dx(), b.Dy()
	dw, dh := sw, sh
	if sw > maxSide || sh > maxSide {
		if sw >= sh {
			dw, dh = maxSide, max(1, sh*maxSide/sw)
		} else {
			dw, dh = max(1, sw*maxSide/sh), maxSide
		}
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for dy := range dh {
		y0, y1 := b.Min.Y+dy*sh/dh, b.Min.Y+(dy+1)*sh/dh
		y1 = max(y1, y0+1)
		ystep := max(1, (y1-y0)/4)
		for dx := range dw {
			x0, x1 := b.Min.X+dx*sw/dw, b.Min.X+(dx+1)*sw/dw
			x1 = max(x1, x0+1)
			xstep := max(1, (x1-x0)/4)
			var r, g, bl, n uint64
			for y := y0; y < y1; y += ystep {
				for x := x0; x < x1; x += xstep {
					pr, pg, pb, pa := src.At(x, y).RGBA()
					// Composite over white (values are alpha-premultiplied, 16-bit).
					white := 0xffff - uint64(pa)
					r += uint64(pr) + white
					g += uint64(pg) + white
					bl += uint64(pb) + white
					n++
				}
			}
			dst.SetRGBA(dx, dy, color.RGBA{
				R: uint8(r / n >> 8), G: uint8(g / n >> 8), B: uint8(bl / n >> 8), A: 0xff,
			})
		}
	}
	return dst
}

// mediaInfo is what can be read from an MP4/MOV/M4A container without decoding it.
type mediaInfo struct {
	seconds uint32
	cover   []byte // embedded cover art (JPEG or PNG), if any
}

// mp4Info walks the ISO-BMFF boxes of data: the duration from moov/mvhd and the cover art
// from moov/udta/meta/ilst/covr/data. Anything else (or a malformed file) yields zero values.
func mp4Info(data []byte) mediaInfo {
	var info mediaInfo
	moov, ok := mp4Child(data, "moov")
	if !ok {
		return info
	}
	if mvhd, ok := mp4Child(moov, "mvhd"); ok && len(mvhd) >= 4 {
		var timescale, duration uint64
		switch mvhd[0] { // version
		case 0:
			if len(mvhd) >= 20 {
				timescale = uint64(binary.BigEndian.Uint32(mvhd[12:16]))
				duration = uint64(binary.BigEndian.Uint32(mvhd[16:20]))
			}
		case 1:
			if len(mvhd) >= 32 {
				timescale = uint64(binary.BigEndian.Uint32(mvhd[20:24]))
				duration = binary.BigEndian.Uint64(mvhd[24:32])
			}
		}
		if timescale > 0 && duration/timescale < math.MaxUint32 {
			info.seconds = uint32((duration + timescale/2) / timescale)
		}
	}
	udta, ok := mp4Child(moov, "udta")
	if !ok {
		return info
	}
	meta, ok := mp4Child(udta, "meta")
	if !ok {
		return info
	}
	// ISO meta is a full box (4 bytes of version and flags before its children); QuickTime's
	// is not. Tell them apart by whether a child box header starts right away.
	if len(meta) >= 8 && string(meta[4:8]) != "hdlr" {
		meta = meta[4:]
	}
	ilst, ok := mp4Child(meta, "ilst")
	if !ok {
		return info
	}
	covr, ok := mp4Child(ilst, "covr")
	if !ok {
		return info
	}
	if d, ok := mp4Child(covr, "data"); ok && len(d) > 8 {
		info.cover = d[8:] // 4 bytes type indicator, 4 bytes locale
	}
	return info
}

// mp4Child returns the payload of the first box of type typ among the boxes in data.
func mp4Child(data []byte, typ string) ([]byte, bool) {
	for len(data) >= 8 {
		size := uint64(binary.BigEndian.Uint32(data[:4]))
		header := uint64(8)
		switch size {
		case 0: // to the end of the enclosing box
			size = uint64(len(data))
		case 1: // 64-bit size follows the type
			if len(data) < 16 {
				return nil, false
			}
			size, header = binary.BigEndian.Uint64(data[8:16]), 16
		}
		if size < header || size > uint64(len(data)) {
			return nil, false
		}
		if string(data[4:8]) == typ {
			return data[header:size], true
		}
		data = data[size:]
	}
	return nil, false
}

// webpSize reads a WebP's canvas size from its VP8X, VP8 or VP8L header (ok false when it is
// none of them).
func webpSize(b []byte) (w, h uint32, ok bool) {
	if len(b) < 30 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, false
	}
	switch string(b[12:16]) {
	case "VP8X":
		w = 1 + (uint32(b[24]) | uint32(b[25])<<8 | uint32(b[26])<<16)
		h = 1 + (uint32(b[27]) | uint32(b[28])<<8 | uint32(b[29])<<16)
		return w, h, true
	case "VP8 ":
		if b[23] != 0x9d || b[24] != 0x01 || b[25] != 0x2a {
			return 0, 0, false
		}
		return uint32(binary.LittleEndian.Uint16(b[26:28]) & 0x3fff), uint32(binary.LittleEndian.Uint16(b[28:30]) & 0x3fff), true
	case "VP8L":
		if b[20] != 0x2f {
			return 0, 0, false
		}
		bits := binary.LittleEndian.Uint32(b[21:25])
		return 1 + bits&0x3fff, 1 + (bits>>14)&0x3fff, true
	}
	return 0, 0, false
}
