package whatsapp

// Audio as WhatsApp clients expect it: Ogg/Opus goes out as a voice note (PTT) with a
// waveform and its duration; MP3, AAC/M4A and AMR go out as audio files; anything else is
// refused with a clear error (WhatsApp clients cannot play Ogg/Vorbis, Speex, FLAC or WAV).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/gateway/gateway/network"
)

// waveformBars is how many bars WhatsApp draws for a voice note (one byte each, 0 to 100).
const waveformBars = 64

// voiceNoteMime is the MIME type WhatsApp's own clients give voice notes.
const voiceNoteMime = "audio/ogg; codecs=opus"

// audioInfo is what the adapter learned about an audio file.
type audioInfo struct {
	voiceNote bool   // Ogg/Opus: sent as PTT
	mime      string // the MIME type to send
	seconds   uint32
	waveform  []byte // voice notes only
}

// inspectAudio decides how an audio file is sent, or refuses it (network.ErrUnsupported).
func inspectAudio(data []byte, mime string) (audioInfo, error) {
	base := strings.ToLower(strings.TrimSpace(strings.SplitN(mime, ";", 2)[0]))
	if isOgg(data) {
		switch oggCodec(data) {
		case "opus":
			secs, wave := opusStats(data)
			return audioInfo{voiceNote: true, mime: voiceNoteMime, seconds: secs, waveform: wave}, nil
		case "":
			return audioInfo{}, fmt.Errorf("audio: an Ogg file with no Opus stream: %w", network.ErrUnsupported)
		default:
			return audioInfo{}, fmt.Errorf("audio: Ogg/%s cannot be played by WhatsApp; send Ogg/Opus (a voice note), MP3, M4A/AAC or AMR: %w",
				oggCodec(data), network.ErrUnsupported)
		}
	}
	switch base {
	case "audio/mpeg", "audio/mp3", "audio/aac", "audio/mp4", "audio/x-m4a", "audio/m4a", "audio/amr", "audio/3gpp":
		info := audioInfo{mime: base}
		if base == "audio/mp3" {
			info.mime = "audio/mpeg"
		}
		if s := mp4Info(data).seconds; s > 0 {
			info.seconds = s
		}
		return info, nil
	}
	return audioInfo{}, fmt.Errorf("audio: %q cannot be played by WhatsApp; send Ogg/Opus (a voice note), MP3, M4A/AAC or AMR: %w",
		base, network.ErrUnsupported)
}

func isOgg(data []byte) bool { return bytes.HasPrefix(data, []byte("OggS")) }

// oggPage is one page of an Ogg stream.
type oggPage struct {
	granule  int64
	packets  [][]byte // complete or partial packets, as the lacing values split them
	headerOK bool
}

// oggPages splits an Ogg stream into pages (stops at the first damaged one).
func oggPages(data []byte) []oggPage {
	var pages []oggPage
	for len(data) >= 27 && bytes.HasPrefix(data, []byte("OggS")) {
		segs := int(data[26])
		if len(data) < 27+segs {
			break
		}
		lacing := data[27 : 27+segs]
		body := data[27+segs:]
		p := oggPage{granule: int64(binary.LittleEndian.Uint64(data[6:14])), headerOK: true}
		off, cur := 0, 0
		for _, l := range lacing {
			cur += int(l)
			if l < 255 {
				if off+cur > len(body) {
					return pages
				}
				p.packets = append(p.packets, body[off:off+cur])
				off += cur
				cur = 0
			}
		}
		total := off + cur
		if total > len(body) {
			break
		}
		pages = append(pages, p)
		data = body[total:]
	}
	return pages
}

// oggCodec names the codec of the first stream: "opus", "vorbis", "speex", "flac", or "".
func oggCodec(data []byte) string {
	pages := oggPages(data)
	if len(pages) == 0 || len(pages[0].packets) == 0 {
		return ""
	}
	first := pages[0].packets[0]
	switch {
	case bytes.HasPrefix(first, []byte("OpusHead")):
		return "opus"
	case len(first) > 7 && bytes.Equal(first[1:7], []byte("vorbis")):
		return "vorbis"
	case bytes.HasPrefix(first, []byte("Speex")):
		return "speex"
	case bytes.HasPrefix(first, []byte("\x7fFLAC")):
		return "flac"
	}
	return "unknown"
}

// opusStats returns the duration of an Ogg/Opus stream (from the last granule position, in
// 48 kHz samples, minus the pre-skip) and a waveform drawn from the audio packets' sizes:
// Opus is variable-bitrate, so louder passages take more bytes. It is an approximation (the
// adapter has no Opus decoder), but it has the voice note's shape.
func opusStats(data []byte) (seconds uint32, waveform []byte) {
	pages := oggPages(data)
	var preSkip int64
	if len(pages) > 0 && len(pages[0].packets) > 0 && len(pages[0].packets[0]) >= 12 {
		preSkip = int64(binary.LittleEndian.Uint16(pages[0].packets[0][10:12]))
	}
	var sizes []int
	var last int64
	for i, p := range pages {
		if p.granule > 0 {
			last = p.granule
		}
		if i < 2 { // OpusHead and OpusTags
			continue
		}
		for _, pkt := range p.packets {
			sizes = append(sizes, len(pkt))
		}
	}
	if last > preSkip {
		seconds = uint32((last - preSkip + 47_999) / 48_000)
	}
	return seconds, waveformOf(sizes)
}

// waveformOf scales per-packet sizes into waveformBars values from 0 to 100.
func waveformOf(sizes []int) []byte {
	wave := make([]byte, waveformBars)
	if len(sizes) == 0 {
		return wave
	}
	sums := make([]float64, waveformBars)
	counts := make([]int, waveformBars)
	for i, s := range sizes {
		b := i * waveformBars / len(sizes)
		sums[b] += float64(s)
		counts[b]++
	}
	maxAvg := 0.0
	for b := range sums {
		if counts[b] > 0 {
			sums[b] /= float64(counts[b])
		}
		maxAvg = max(maxAvg, sums[b])
	}
	if maxAvg == 0 {
		return wave
	}
	for b := range wave {
		wave[b] = byte(sums[b] * 100 / maxAvg)
	}
	return wave
}
