package whatsapp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// fakeUpload records uploads and returns a fixed response.
type fakeUpload struct {
	types []whatsmeow.MediaType
	err   error
}

func (f *fakeUpload) upload(_ context.Context, data []byte, mt whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	f.types = append(f.types, mt)
	if f.err != nil {
		return whatsmeow.UploadResponse{}, f.err
	}
	return whatsmeow.UploadResponse{
		URL: "https://mmg.example/x.enc", DirectPath: "/v/x.enc", MediaKey: []byte("key"),
		FileEncSHA256: []byte("enc"), FileSHA256: []byte("sha"), FileLength: uint64(len(data)),
	}, nil
}

func pngImage(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{R: uint8(x), G: uint8(y), B: 200, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeJPEG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("thumbnail is not a JPEG: %v", err)
	}
	return img
}

func TestBuildText(t *testing.T) {
	msg, err := buildMessage(context.Background(), nil, domain.Message{Kind: domain.KindText, Text: "héllo"}, time.Now())
	if err != nil || msg.GetConversation() != "héllo" {
		t.Fatalf("text: %v, %v", msg, err)
	}
	if _, err := buildMessage(context.Background(), nil, domain.Message{Kind: domain.KindText}, time.Now()); err == nil {
		t.Fatal("empty text accepted")
	}
	if _, err := buildMessage(context.Background(), nil, domain.Message{Kind: "hologram"}, time.Now()); !errors.Is(err, network.ErrUnsupported) {
		t.Fatalf("an unknown kind: %v", err)
	}
}

func TestBuildImage(t *testing.T) {
	up := &fakeUpload{}
	now := time.Unix(1700000000, 0)
	data := pngImage(t, 400, 100)
	msg, err := buildMessage(context.Background(), up.upload,
		domain.Message{Kind: domain.KindImage, Data: data, MimeType: "image/png", Caption: "look"}, now)
	if err != nil {
		t.Fatal(err)
	}
	img := msg.GetImageMessage()
	if img == nil || len(up.types) != 1 || up.types[0] != whatsmeow.MediaImage {
		t.Fatalf("image message %v, uploads %v", msg, up.types)
	}
	if img.GetCaption() != "look" || img.GetMimetype() != "image/png" || img.GetURL() == "" ||
		img.GetDirectPath() == "" || string(img.GetMediaKey()) != "key" || img.GetFileLength() != uint64(len(data)) ||
		img.GetMediaKeyTimestamp() != now.Unix() {
		t.Fatalf("image fields: %v", img)
	}
	if img.GetWidth() != 400 || img.GetHeight() != 100 {
		t.Fatalf("dimensions %dx%d", img.GetWidth(), img.GetHeight())
	}
	b := decodeJPEG(t, img.GetJPEGThumbnail()).Bounds()
	if b.Dx() != thumbMaxSide || b.Dy() != thumbMaxSide/4 {
		t.Fatalf("thumbnail %v, want %dx%d", b, thumbMaxSide, thumbMaxSide/4)
	}

	// Bytes the standard library cannot decode (WebP here) are sent without a thumbnail.
	msg, err = buildMessage(context.Background(), up.upload,
		domain.Message{Kind: domain.KindImage, Data: []byte("RIFF\x00\x00\x00\x00WEBPVP8 "), MimeType: "image/webp"}, now)
	if err != nil || msg.GetImageMessage().GetJPEGThumbnail() != nil {
		t.Fatalf("webp: %v, %v", msg, err)
	}
}

func TestBuildMediaErrors(t *testing.T) {
	up := &fakeUpload{err: errors.New("503 from media host")}
	if _, err := buildMessage(context.Background(), up.upload, domain.Message{Kind: domain.KindAudio, Data: []byte("ID3x"), MimeType: "audio/mpeg"}, time.Now()); err == nil || !strings.Contains(err.Error(), "503 from media host") {
		t.Fatalf("upload error: %v", err)
	}
	if _, err := buildMessage(context.Background(), up.upload, domain.Message{Kind: domain.KindVideo}, time.Now()); err == nil {
		t.Fatal("video without data accepted")
	}
}

func TestBuildDocument(t *testing.T) {
	up := &fakeUpload{}
	m := domain.Message{Kind: domain.KindDocument, Data: []byte("%PDF-1.7"), FileName: "invoice.pdf", MimeType: "application/pdf"}
	msg, err := buildMessage(context.Background(), up.upload, m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	doc := msg.GetDocumentMessage()
	if doc.GetFileName() != "invoice.pdf" || doc.GetTitle() != "invoice.pdf" || doc.GetMimetype() != "application/pdf" || up.types[0] != whatsmeow.MediaDocument {
		t.Fatalf("document: %v", doc)
	}
	// With a caption, the document is wrapped as WhatsApp clients send it.
	m.Caption = "your invoice"
	msg, err = buildMessage(context.Background(), up.upload, m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	inner := msg.GetDocumentWithCaptionMessage().GetMessage().GetDocumentMessage()
	if inner.GetCaption() != "your invoice" || inner.GetFileName() != "invoice.pdf" || msg.GetDocumentMessage() != nil {
		t.Fatalf("captioned document: %v", msg)
	}
	// Without a name or type: defaults.
	msg, err = buildMessage(context.Background(), up.upload, domain.Message{Kind: domain.KindDocument, Data: []byte("plain words")}, time.Now())
	if err != nil || msg.GetDocumentMessage().GetFileName() != "file" || !strings.HasPrefix(msg.GetDocumentMessage().GetMimetype(), "text/plain") {
		t.Fatalf("defaults: %v, %v", msg, err)
	}
}

func TestBuildAudioAndVideo(t *testing.T) {
	up := &fakeUpload{}
	cover := pngImage(t, 64, 64)
	mp4 := mp4File(90_000, 90_000*42, cover) // 42 s
	msg, err := buildMessage(context.Background(), up.upload, domain.Message{Kind: domain.KindVideo, Data: mp4, MimeType: "video/mp4", Caption: "clip"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	vid := msg.GetVideoMessage()
	if vid.GetSeconds() != 42 || vid.GetCaption() != "clip" || vid.GetMimetype() != "video/mp4" || up.types[0] != whatsmeow.MediaVideo {
		t.Fatalf("video: %v", vid)
	}
	decodeJPEG(t, vid.GetJPEGThumbnail())

	// A video without cover art has no thumbnail (no frame decoder in the standard library).
	msg, err = buildMessage(context.Background(), up.upload, domain.Message{Kind: domain.KindVideo, Data: mp4File(1000, 5000, nil)}, time.Now())
	if err != nil || msg.GetVideoMessage().GetJPEGThumbnail() != nil || msg.GetVideoMessage().GetSeconds() != 5 {
		t.Fatalf("video without cover: %v, %v", msg, err)
	}

	msg, err = buildMessage(context.Background(), up.upload, domain.Message{Kind: domain.KindAudio, Data: mp4File(44100, 44100*3, nil), MimeType: "audio/mp4"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if aud := msg.GetAudioMessage(); aud.GetSeconds() != 3 || aud.GetMimetype() != "audio/mp4" || aud.GetPTT() {
		t.Fatalf("audio: %v", aud)
	}
}

func TestBuildLocation(t *testing.T) {
	msg, err := buildMessage(context.Background(), nil, domain.Message{Kind: domain.KindLocation, Lat: -33.86, Lng: 151.21, Address: "Sydney Opera House"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	loc := msg.GetLocationMessage()
	if loc.GetDegreesLatitude() != -33.86 || loc.GetDegreesLongitude() != 151.21 || loc.GetName() != "Sydney Opera House" {
		t.Fatalf("location: %v", loc)
	}
	for _, bad := range [][2]float64{{91, 0}, {0, -181}, {math.NaN(), 0}} {
		if _, err := buildMessage(context.Background(), nil, domain.Message{Kind: domain.KindLocation, Lat: bad[0], Lng: bad[1]}, time.Now()); err == nil {
			t.Errorf("coordinates %v accepted", bad)
		}
	}
}

func TestBuildContact(t *testing.T) {
	msg, err := buildMessage(context.Background(), nil, domain.Message{Kind: domain.KindContact, ContactName: "Doe; John, Jr.", ContactPhone: "+44 (20) 7946-0000"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := msg.GetContactMessage()
	want := "BEGIN:VCARD\nVERSION:3.0\nN:;Doe\\; John\\, Jr.;;;\nFN:Doe\\; John\\, Jr.\nTEL;type=CELL;type=VOICE;waid=442079460000:+442079460000\nEND:VCARD"
	if c.GetDisplayName() != "Doe; John, Jr." || c.GetVcard() != want {
		t.Fatalf("contact:\n%s\nwant:\n%s", c.GetVcard(), want)
	}
	msg, err = buildMessage(context.Background(), nil, domain.Message{Kind: domain.KindContact, ContactPhone: "15550001111"}, time.Now())
	if err != nil || msg.GetContactMessage().GetDisplayName() != "+15550001111" {
		t.Fatalf("unnamed contact: %v, %v", msg, err)
	}
	if _, err := buildMessage(context.Background(), nil, domain.Message{Kind: domain.KindContact, ContactName: "x"}, time.Now()); err == nil {
		t.Fatal("contact without a number accepted")
	}
}

func TestImageThumbnailLimits(t *testing.T) {
	// A PNG header claiming 100000×100000 pixels is not decoded.
	var hdr bytes.Buffer
	hdr.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], 100000)
	binary.BigEndian.PutUint32(ihdr[4:], 100000)
	ihdr[8], ihdr[9] = 8, 6
	binary.Write(&hdr, binary.BigEndian, uint32(len(ihdr)))
	hdr.WriteString("IHDR")
	hdr.Write(ihdr)
	hdr.Write([]byte{0, 0, 0, 0})
	if _, ok := imageThumbnail(hdr.Bytes()); ok {
		t.Fatal("decompression bomb decoded")
	}
	// Small images are not scaled up; transparency becomes white.
	img := image.NewNRGBA(image.Rect(0, 0, 10, 5))
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	th, ok := imageThumbnail(buf.Bytes())
	if !ok || th.width != 10 || th.height != 5 {
		t.Fatalf("small image: %+v %v", th, ok)
	}
	out := decodeJPEG(t, th.jpeg)
	if r, g, b, _ := out.At(5, 2).RGBA(); r>>8 < 240 || g>>8 < 240 || b>>8 < 240 {
		t.Fatalf("transparent pixel became %d,%d,%d", r>>8, g>>8, b>>8)
	}
}

// mp4File builds a minimal MP4: ftyp, then moov with mvhd (version 0) and, if cover is given,
// udta/meta/ilst/covr/data holding it.
func mp4File(timescale, duration uint32, cover []byte) []byte {
	box := func(typ string, payload ...[]byte) []byte {
		var body []byte
		for _, p := range payload {
			body = append(body, p...)
		}
		b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
		return append(append(b, typ...), body...)
	}
	mvhd := make([]byte, 100)
	binary.BigEndian.PutUint32(mvhd[12:], timescale)
	binary.BigEndian.PutUint32(mvhd[16:], duration)
	moov := [][]byte{box("mvhd", mvhd)}
	if cover != nil {
		data := box("data", []byte{0, 0, 0, 14, 0, 0, 0, 0}, cover)
		meta := box("meta", []byte{0, 0, 0, 0}, box("hdlr", make([]byte, 25)), box("ilst", box("covr", data)))
		moov = append(moov, box("udta", meta))
	}
	return append(box("ftyp", []byte("isom\x00\x00\x02\x00isomiso2mp41")), box("moov", moov...)...)
}

func TestMP4InfoMalformed(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("not a video"), {0, 0, 0, 200, 'm', 'o', 'o', 'v'}, {0, 0, 0, 1, 'm', 'o', 'o', 'v'}} {
		if info := mp4Info(data); info.seconds != 0 || info.cover != nil {
			t.Errorf("mp4Info(%q) = %+v", data, info)
		}
	}
}
