package persist

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// dropEmptyLogs removes the empty memtable (.mem) and value-log (.vlog) files a crash can
// leave in a Badger directory, before Badger opens it.
//
// Badger creates such a file and only then sizes it and writes its header. A process killed in
// between (kill -9, power loss) leaves a file of 0 bytes, and badger v4.9.6's Open refuses the
// directory from then on: the mapping of the empty file answers z.NewFile ("Create a new
// file"), which openMemTables and the value log's open take for an error (upstream
// dgraph-io/badger#2207; the open fix, #2331, skips such files the same way). A file of 0 bytes
// holds no entry: no write reached it, and no key points into it. Removing it loses nothing, and
// Badger numbers its next file after the highest one left.
func dropEmptyLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("persist: read badger directory %q: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return fmt.Errorf("persist: stat %q: %w", filepath.Join(dir, name), err)
		}
		if info.Size() != 0 {
			continue
		}
		path := filepath.Join(dir, name)
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("persist: remove the empty %q a crash left: %w", path, err)
		}
		log.Warn("removed an empty file a crash left before Badger sized it", "file", name)
	}
	return nil
}
