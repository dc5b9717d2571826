package whatsapp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// oggStream builds a minimal Ogg stream: the first packet (codec header), a tags packet, then
// audio packets of the given sizes, one page each, granule advancing 960 samples (20 ms).
func oggStream(head []byte, sizes []int) []byte {
	var out bytes.Buffer
	page := func(seq uint32, granule int64, pkt []byte) {
		var h [27]byte
		copy(h[:], "OggS")
		binary.LittleEndian.PutUint64(h[6:14], uint64(granule))
		binary.LittleEndian.PutUint32(h[18:22], seq)
		var lacing []byte
		n := len(pkt)
		for n >= 255 {
			lacing = append(lacing, 255)
			n -= 255
		}
		lacing = append(lacing, byte(n))
		h[26] = byte(len(lacing))
		out.Write(h[:])
		out.Write(lacing)
		out.Write(pkt)
	}
	page(0, 0, head)
	page(1, 0, []byte("OpusTags\x00\x00\x00\x00\x00\x00\x00\x00"))
	granule := int64(312) // the pre-skip below
	for i, s := range sizes {
		granule += 960
		page(uint32(i+2), granule, bytes.Repeat([]byte{0x55}, s))
	}
	return out.Bytes()
}

func opusHead() []byte {
	h := []byte("OpusHead\x01\x01\x00\x00\x80\xbb\x00\x00\x00\x00\x00")
	binary.LittleEndian.PutUint16(h[10:12], 312)
	return h
}

func TestInspectAudio(t *testing.T) {
	// 150 packets of 20 ms: 3 s, loud in the middle.
	sizes := make([]int, 150)
	for i := range sizes {
		sizes[i] = 20
		if i >= 50 && i < 100 {
			sizes[i] = 120
		}
	}
	info, err := inspectAudio(oggStream(opusHead(), sizes), "audio/ogg")
	if err != nil {
		t.Fatal(err)
	}
	if !info.voiceNote || info.mime != voiceNoteMime || info.seconds != 3 || len(info.waveform) != waveformBars {
		t.Fatalf("ogg/opus: %+v, want a 3 s voice note with a waveform", info)
	}
	if info.waveform[0] >= info.waveform[32] || info.waveform[32] != 100 {
		t.Fatalf("waveform %v, want the loud middle at 100 and quieter edges", info.waveform)
	}

	vorbis := oggStream([]byte("\x01vorbis\x00\x00\x00\x00"), []int{10})
	if _, err := inspectAudio(vorbis, "audio/ogg"); !errors.Is(err, network.ErrUnsupported) {
		t.Fatalf("ogg/vorbis: %v, want ErrUnsupported", err)
	}
	for _, mime := range []string{"audio/flac", "audio/wav", "audio/webm"} {
		if _, err := inspectAudio([]byte("xxxx"), mime); !errors.Is(err, network.ErrUnsupported) {
			t.Fatalf("%s: %v, want ErrUnsupported", mime, err)
		}
	}
	if info, err := inspectAudio([]byte("ID3\x04"), "audio/mpeg"); err != nil || info.voiceNote || info.mime != "audio/mpeg" {
		t.Fatalf("mp3: %+v, %v; want a plain audio file", info, err)
	}
}

// An Ogg/Opus file is sent as a voice note: PTT, the voice note MIME type, a waveform.
func TestBuildVoiceNote(t *testing.T) {
	up := &fakeUpload{}
	data := oggStream(opusHead(), []int{30, 40, 50})
	msg, err := buildMessage(context.Background(), up.upload, domain.Message{Kind: domain.KindAudio, Data: data, MimeType: "audio/ogg"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a := msg.GetAudioMessage()
	if !a.GetPTT() || a.GetMimetype() != voiceNoteMime || len(a.GetWaveform()) != waveformBars || a.GetSeconds() != 1 {
		t.Fatalf("audio message %+v, want a PTT voice note with a waveform", a)
	}
}
