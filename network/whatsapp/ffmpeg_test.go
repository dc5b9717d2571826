package whatsapp

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// wavSine is a mono 16-bit PCM WAV file of a 440 Hz tone.
func wavSine(seconds float64) []byte {
	const rate = 16000
	n := int(seconds * rate)
	data := make([]byte, 44+2*n)
	copy(data, "RIFF")
	binary.LittleEndian.PutUint32(data[4:], uint32(36+2*n))
	copy(data[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(data[16:], 16)
	binary.LittleEndian.PutUint16(data[20:], 1) // PCM
	binary.LittleEndian.PutUint16(data[22:], 1) // mono
	binary.LittleEndian.PutUint32(data[24:], rate)
	binary.LittleEndian.PutUint32(data[28:], rate*2)
	binary.LittleEndian.PutUint16(data[32:], 2)
	binary.LittleEndian.PutUint16(data[34:], 16)
	copy(data[36:], "data")
	binary.LittleEndian.PutUint32(data[40:], uint32(2*n))
	for i := range n {
		v := int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate))
		binary.LittleEndian.PutUint16(data[44+2*i:], uint16(v))
	}
	return data
}

// fakeFFmpeg writes a script that plays ffmpeg: it records its arguments and writes out (an
// Ogg/Opus stream) to its last argument, or fails with a message when out is nil.
func fakeFFmpeg(t *testing.T, out []byte) (path, argsFile string) {
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" > " + argsFile + "\n"
	if out == nil {
		script += "echo 'Invalid data found when processing input' >&2\nexit 1\n"
	} else {
		src := filepath.Join(dir, "opus.ogg")
		if err := os.WriteFile(src, out, 0o600); err != nil {
			t.Fatal(err)
		}
		script += "for last; do :; done\ncp " + src + " \"$last\"\n"
	}
	path = filepath.Join(dir, "ffmpeg")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path, argsFile
}

// Without ffmpeg a voice note WhatsApp cannot play is refused before anything is sent (and
// CheckAudio says so for the HTTP layer); with one, it is converted to Ogg/Opus and goes out
// as a voice note (PTT); a conversion that fails is a definite refusal with ffmpeg's words.
func TestVoiceNoteConversion(t *testing.T) {
	t.Parallel()
	wav := wavSine(0.5)
	if err := CheckAudio(wav, "audio/wav", false, false); !errors.Is(err, network.ErrUnsupported) {
		t.Fatalf("CheckAudio without ffmpeg: %v", err)
	}
	if err := CheckAudio(wav, "audio/wav", false, true); err != nil {
		t.Fatalf("CheckAudio with ffmpeg: %v", err)
	}
	if err := CheckAudio([]byte("ID3\x04"), "audio/mpeg", false, false); err != nil {
		t.Fatalf("CheckAudio of an MP3: %v", err)
	}

	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)
	msg := domain.Message{ID: "V1", To: phoneB, Kind: domain.KindAudio, Data: wav, MimeType: "audio/wav"}
	if _, err := s.c.Send(ctxT(t), msg); !errors.Is(err, network.ErrUnsupported) || !strings.Contains(err.Error(), "Ogg/Opus") {
		t.Fatalf("WAV without ffmpeg: %v, want ErrUnsupported saying what to send", err)
	}
	if n := len(h.srv.Uploads()); n != 0 {
		t.Fatalf("%d uploads of a refused voice note", n)
	}

	ffmpeg, args := fakeFFmpeg(t, oggStream(opusHead(), []int{30, 40, 50}))
	h.net.ffmpeg = ffmpeg
	msg.ID = "V2"
	if _, err := s.c.Send(ctxT(t), msg); err != nil {
		t.Fatalf("WAV with ffmpeg: %v", err)
	}
	got := h.srv.Messages()
	if last := got[len(got)-1]; last.ID != "V2" || last.MediaType != "ptt" {
		t.Fatalf("sent %+v, want a voice note (ptt)", last)
	}
	used, _ := os.ReadFile(args)
	for _, want := range []string{"-c:a libopus", "-f ogg", "-ac 1", "-ar 48000"} {
		if !strings.Contains(string(used), want) {
			t.Fatalf("ffmpeg ran with %q, want %s", used, want)
		}
	}

	h.net.ffmpeg, _ = fakeFFmpeg(t, nil)
	msg.ID = "V3"
	if _, err := s.c.Send(ctxT(t), msg); !errors.Is(err, network.ErrUnsupported) || !strings.Contains(err.Error(), "Invalid data") {
		t.Fatalf("failed conversion: %v, want ErrUnsupported with ffmpeg's message", err)
	}
}

// The real ffmpeg (Debian's package; .ci/run installs it; skipped only under -short) turns a
// WAV into an Ogg/Opus voice note of the same length.
func TestVoiceNoteConversionRealFFmpeg(t *testing.T) {
	if testing.Short() {
		t.Skip("ffmpeg tests skip under -short")
	}
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatalf("ffmpeg not found (apt-get install ffmpeg; the test skips only under -short): %v", err)
	}
	n := &Network{ffmpeg: ffmpeg}
	m, err := n.prepareAudio(ctxT(t), domain.Message{Kind: domain.KindAudio, Data: wavSine(2), MimeType: "audio/wav"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := inspectAudio(m.Data, m.MimeType)
	if err != nil || !info.voiceNote || info.seconds != 2 || m.MimeType != voiceNoteMime {
		t.Fatalf("converted: %+v, %v (%s); want a 2 s Ogg/Opus voice note", info, err, m.MimeType)
	}
	// Ogg/Opus is left alone; an MP3 stays an audio file.
	opus := oggStream(opusHead(), []int{30})
	if m, err := n.prepareAudio(ctxT(t), domain.Message{Kind: domain.KindAudio, Data: opus, MimeType: "audio/ogg"}); err != nil || &m.Data[0] != &opus[0] {
		t.Fatalf("Ogg/Opus converted again: %v", err)
	}
}
