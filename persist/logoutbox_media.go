package persist

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// A LogOutbox keeps a message's media over BlobMin apart from the log, a file each in
// DATA/outbox/media, the accept record naming it (DataRef), as the outbox on a store with Blobs
// does. In the record, the media would be base64 (4/3 of it) in a record of at most
// outlog.MaxRecord bytes: about 12 MiB of media, under --media-max-bytes' 16 MiB, and every
// byte of it kept in the log's segments for their retention, long after the message is sent.
//
// A file is written and synced (with its directory) before its accept is queued, so no
// durable accept names a file that is not; it is removed once its message's outcome is
// durable (Checkpoint, after the log's sync), at once when its accept never was (refused,
// cut off, voided), and at boot when no pending message names it (a crash between the two).
const (
	logMediaDir    = "media"
	logMediaPrefix = "m-"
)

// logMedia is the directory of a LogOutbox's media files.
type logMedia struct{ dir string }

// mediaDrop is a media file to remove once the log is durable past pos (0: at once).
type mediaDrop struct {
	pos  outlog.Pos
	name string
}

// put writes data to a new file, synced with its directory, and returns its name.
func (m logMedia) put(data []byte) (string, error) {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return "", fmt.Errorf("%s: media: %w", outboxTable, err)
	}
	for {
		var rnd [16]byte
		for i := 0; i < len(rnd); i += 8 {
			v := rand.Uint64()
			for j := range 8 {
				rnd[i+j] = byte(v >> (8 * j))
			}
		}
		name := logMediaPrefix + hex.EncodeToString(rnd[:])
		err := m.write(name, data)
		if errors.Is(err, fs.ErrExist) {
			continue // 128 random bits taken: never in practice, but never overwritten
		}
		if err != nil {
			return "", fmt.Errorf("%s: media: %w", outboxTable, err)
		}
		return name, nil
	}
}

// write creates file name with data and syncs it and the directory that lists it. A file
// left half-written by a crash is named by no record: boot's sweep removes it.
func (m logMedia) write(name string, data []byte) error {
	path := filepath.Join(m.dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = outlog.SyncDir(m.dir)
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// get reads the file name; domain.ErrRecordNotFound when there is none.
func (m logMedia) get(name string) ([]byte, error) {
	if !validMediaName(name) {
		return nil, fmt.Errorf("%w: media file name %q", domain.ErrRecordInvalid, name)
	}
	data, err := os.ReadFile(filepath.Join(m.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: media file %s", domain.ErrRecordNotFound, name)
	}
	return data, err
}

// remove removes the file name (none: nothing to do).
func (m logMedia) remove(name string) error {
	if !validMediaName(name) {
		return nil
	}
	if err := os.Remove(filepath.Join(m.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// sweep removes every file keep does not name, and returns how many it removed.
func (m logMedia) sweep(keep map[string]bool) (int, error) {
	ents, err := os.ReadDir(m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() || keep[e.Name()] || !strings.HasPrefix(e.Name(), logMediaPrefix) {
			continue
		}
		if err := os.Remove(filepath.Join(m.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// validMediaName tells whether name is one put gives: a record's name is never a path.
func validMediaName(name string) bool {
	return strings.HasPrefix(name, logMediaPrefix) && filepath.Base(name) == name && !strings.ContainsAny(name, `/\`)
}

// recordTooLarge is the error of an accept whose record the log cannot hold: a 413 to the
// caller (domain.ErrMediaTooLarge), who would otherwise retry the same message for ever.
func recordTooLarge(n int) error {
	return fmt.Errorf("%w: the message's record is %d bytes, over the outbox log's largest (%d)", domain.ErrMediaTooLarge, n, outlog.MaxRecord)
}

// putMedia writes e's media to a file of its own when it is over BlobMin, and returns the
// file's name ("": the accept record holds the media).
func (lo *LogOutbox) putMedia(e *domain.OutboxEntry) (string, error) {
	if len(e.Message.Data) <= BlobMin {
		return "", nil
	}
	return lo.media.put(e.Message.Data)
}

// loadMedia reads the media of an entry whose body names file ref (none: nothing to do).
func (lo *LogOutbox) loadMedia(e *domain.OutboxEntry, ref string) error {
	if ref == "" {
		return nil
	}
	data, err := lo.media.get(ref)
	if err != nil {
		return fmt.Errorf("%s %q: media: %w", outboxTable, e.ID, err)
	}
	e.Message.Data = data
	return nil
}

// unused removes media file name at once: no record names it (its accept was refused before it
// was queued, or was a duplicate's).
func (lo *LogOutbox) unused(name string) {
	if name == "" {
		return
	}
	if err := lo.media.remove(name); err != nil {
		lo.logger.Load().Warn("outbox: remove an unused media file (the next boot will)", "file", name, "err", err)
	}
}

// dropMedia queues media file name for removal once the log is durable past pos (the record
// that settled or voided its message; 0: at the next removal). mu held.
func (lo *LogOutbox) dropMedia(pos outlog.Pos, name string) {
	if name != "" {
		lo.unmedia = append(lo.unmedia, mediaDrop{pos: pos, name: name})
	}
}

// removeMedia removes the media files queued for removal whose records lie before d, where
// the log is durable: a crash can no longer bring their messages back as pending.
func (lo *LogOutbox) removeMedia(d outlog.Pos) {
	lo.mu.Lock()
	var now []string
	keep := lo.unmedia[:0]
	for _, m := range lo.unmedia {
		if m.pos < d {
			now = append(now, m.name)
		} else {
			keep = append(keep, m)
		}
	}
	clear(lo.unmedia[len(keep):])
	lo.unmedia = keep
	lo.mu.Unlock()
	for _, name := range now {
		if err := lo.media.remove(name); err != nil {
			lo.logger.Load().Warn("outbox: remove a settled message's media file (the next boot will)", "file", name, "err", err)
		}
	}
}
