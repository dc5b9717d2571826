package whatsapp

// Voice notes from audio WhatsApp cannot play as one. A voice note (PTT) must be Ogg/Opus;
// with `--ffmpeg` the adapter converts the audio it would otherwise refuse (Ogg/Vorbis, WAV,
// FLAC, WebM…) to mono 48 kHz Ogg/Opus, as WhatsApp's own clients record, and sends that as
// the voice note. MP3, M4A/AAC and AMR stay audio files: WhatsApp plays them as they are.
// Without ffmpeg such audio is refused with network.ErrUnsupported, and CheckAudio lets the
// HTTP layer refuse it before accepting the message.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

const (
	// ffmpegTimeout bounds one conversion (a voice note is minutes long at most).
	ffmpegTimeout = 2 * time.Minute
	// ffmpegMaxOut bounds the converted file (Opus at 32 kbit/s: about 4 KB a second).
	ffmpegMaxOut = 64 << 20
)

// CheckAudio tells whether an audio file can be sent (as a voice note when ptt): nil when
// WhatsApp plays it as it is, or when convert is set (the gateway has an ffmpeg) and it can be
// converted to a voice note; else an error wrapping network.ErrUnsupported that says what to
// send instead.
func CheckAudio(data []byte, mime string, ptt, convert bool) error {
	info, err := inspectAudio(data, mime)
	if err == nil && ptt && !info.voiceNote {
		err = fmt.Errorf("audio: a voice note must be Ogg/Opus: %w", network.ErrUnsupported)
	}
	if err != nil && convert && errors.Is(err, network.ErrUnsupported) {
		return nil
	}
	return err
}

// prepareAudio converts an audio message WhatsApp cannot play into an Ogg/Opus voice note when
// the Network has an ffmpeg; other messages are returned as they are.
func (n *Network) prepareAudio(ctx context.Context, m domain.Message) (domain.Message, error) {
	if m.Kind != domain.KindAudio || n.ffmpeg == "" {
		return m, nil
	}
	info, err := inspectAudio(m.Data, m.MimeType)
	if (err == nil && (info.voiceNote || !m.PTT)) || (err != nil && !errors.Is(err, network.ErrUnsupported)) {
		return m, nil
	}
	out, err := convertToOpus(ctx, n.ffmpeg, m.Data)
	if err != nil {
		return m, fmt.Errorf("audio: could not convert it to a voice note: %w: %w", network.ErrUnsupported, err)
	}
	m.Data, m.MimeType = out, voiceNoteMime
	return m, nil
}

// convertToOpus runs ffmpeg on data (through temporary files: MP4-family inputs need a
// seekable file) and checks that what comes out is Ogg/Opus.
func convertToOpus(ctx context.Context, ffmpeg string, data []byte) ([]byte, error) {
	dir, err := os.MkdirTemp("", "gateway-ffmpeg-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out.ogg")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ffmpegTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
		"-i", in, "-vn", "-map_metadata", "-1", "-ac", "1", "-ar", "48000",
		"-c:a", "libopus", "-b:a", "32k", "-application", "voip", "-f", "ogg", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ffmpeg: %w: %s", err, bytes.TrimSpace(lastBytes(stderr.Bytes(), 500)))
	}
	st, err := os.Stat(out)
	if err != nil {
		return nil, fmt.Errorf("ffmpeg wrote nothing: %w", err)
	}
	if st.Size() > ffmpegMaxOut {
		return nil, fmt.Errorf("ffmpeg wrote %d bytes, more than a voice note can be", st.Size())
	}
	conv, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if !isOgg(conv) || oggCodec(conv) != "opus" {
		return nil, errors.New("ffmpeg did not write Ogg/Opus")
	}
	return conv, nil
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
