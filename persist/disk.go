package persist

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gateway/gateway/domain"
)

// Free-space watching. Badger writes its write-ahead log (.mem) and value log (.vlog) through
// memory maps of files created at full size but sparse; writing into a hole when the file
// system has no block left raises SIGBUS, which no Go code can recover from. So the watcher
// (1) allocates those files' blocks ahead of Badger's writes (fallocate), so a write into
// them never needs a new block, and (2) refuses commits while free space is under
// the floor, which leaves room for Badger's own flushes and compactions.
const (
	diskCheckEvery = 200 * time.Millisecond
	// diskHysteresis is how far above the floor free space must come back before commits are
	// accepted again, so the state does not flap around the floor.
	diskHysteresis = 16 << 20
	// allocateLead is how far ahead of Badger's writes the mapped files are allocated: more
	// than Badger can write in one diskCheckEvery (80 MiB/s of commits).
	allocateLead = 16 << 20
)

// mappedFile is what the watcher knows of one Badger .mem or .vlog file.
type mappedFile struct {
	base      int64 // the committed-bytes counter when the file was first seen
	allocated int64 // bytes allocated from the start
}

// diskGuard watches the file system of one directory. low is read on every Commit (one atomic
// load); the rest is owned by the watcher goroutine, except cause (mu).
type diskGuard struct {
	dir   string
	floor uint64
	log   *slog.Logger
	// free reports the bytes available to us on dir's file system (statfs); tests replace it.
	free func(dir string) (uint64, error)
	// allocate gives a file real blocks from its start to an offset (fallocate); tests
	// replace it.
	allocate func(path string, upTo int64) error

	// valueThreshold and vlogFile are Badger's (shape): values this large go to the value log.
	valueThreshold, vlogFile int64

	low atomic.Bool
	// walBytes and vlogBytes count what was committed (writer goroutines); files is the
	// watcher's own.
	walBytes, vlogBytes atomic.Int64
	files               map[string]*mappedFile

	mu    sync.Mutex
	cause string
}

func newDiskGuard(dir string, floor uint64, log *slog.Logger) *diskGuard {
	return &diskGuard{dir: dir, floor: floor, log: log, free: freeBytes, allocate: allocateFile, files: map[string]*mappedFile{}}
}

// err is ErrStorageUnavailable with the cause while space is low, else nil.
func (g *diskGuard) err() error {
	if !g.low.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Errorf("%w: %s", domain.ErrStorageUnavailable, g.cause)
}

// setLow marks the storage unavailable (commits refused) with cause.
func (g *diskGuard) setLow(cause string) {
	g.mu.Lock()
	g.cause = cause
	g.mu.Unlock()
	if !g.low.Swap(true) {
		g.log.Warn("storage unavailable: refusing new writes until space returns", "dir", g.dir, "cause", cause)
	}
}

// check runs one round: allocate Badger's new mapped files, then compare free space with the
// floor. Called by the watcher, and once before Badger opens.
func (g *diskGuard) check() {
	g.allocateMapped()
	free, err := g.free(g.dir)
	if err != nil {
		// Unknown free space: keep the current state; allocation failures still count.
		return
	}
	switch {
	case free < g.floor:
		g.setLow(fmt.Sprintf("%s free on the data disk, under the floor of %s (--min-free-disk)", mib(free), mib(g.floor)))
	case g.low.Load() && free >= g.floor+min(diskHysteresis, g.floor/4+1):
		g.low.Store(false)
		g.log.Info("storage available again", "dir", g.dir, "free", mib(free))
	}
}

// beforeWrite checks free space right before a group is written (one statfs), so a disk
// filled by someone else between two watcher rounds is seen before Badger writes into it.
// nil guard (in-memory Badger): always nil.
func (g *diskGuard) beforeWrite() error {
	if g == nil {
		return nil
	}
	if free, err := g.free(g.dir); err == nil && free < g.floor {
		g.setLow(fmt.Sprintf("%s free on the data disk, under the floor of %s (--min-free-disk)", mib(free), mib(g.floor)))
	}
	return g.err()
}

// allocateMapped keeps allocateLead bytes of real blocks ahead of where Badger writes in each
// .mem and .vlog file. Those files are written sequentially from the start, so the write
// position is at most what was committed since the file appeared (counted generously: entry
// headers and a quarter more); allocating them whole instead would cost twice the memtable
// and value-log sizes per file.
func (g *diskGuard) allocateMapped() {
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		return
	}
	walBytes, vlogBytes := g.walBytes.Load(), g.vlogBytes.Load()
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		name := e.Name()
		var written int64
		switch {
		case strings.HasSuffix(name, ".mem"):
			written = walBytes
		case strings.HasSuffix(name, ".vlog"):
			written = vlogBytes
		default:
			continue
		}
		seen[name] = true
		f, ok := g.files[name]
		if !ok {
			f = &mappedFile{base: written}
			g.files[name] = f
		}
		target := 4<<10 + (written-f.base)*5/4 + allocateLead
		if info, err := e.Info(); err == nil && info.Size() > 0 {
			target = min(target, info.Size()) // never past the file's own (mapped) size
		}
		if target <= f.allocated {
			continue
		}
		if err := g.allocate(filepath.Join(g.dir, name), target); err != nil {
			if noSpace(err) {
				g.setLow(fmt.Sprintf("no space to allocate %s: %v", name, err))
			}
			continue
		}
		f.allocated = target
	}
	for name := range g.files {
		if !seen[name] {
			delete(g.files, name)
		}
	}
}

// wrote counts bytes handed to Badger in a committed group (for allocateMapped).
func (g *diskGuard) wrote(wal, vlog int64) {
	if g == nil {
		return
	}
	g.walBytes.Add(wal)
	if vlog > 0 {
		g.vlogBytes.Add(vlog)
	}
}

// watch runs check every diskCheckEvery until stop closes.
func (g *diskGuard) watch(stop <-chan struct{}) {
	t := time.NewTicker(diskCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.check()
		}
	}
}

// noSpace says whether err is the file system's "no space left" (or quota) error.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
