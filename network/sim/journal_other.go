//go:build !linux

package sim

import (
	"errors"
	"os"
)

// mapJournals: elsewhere, journals append with write(2).
const mapJournals = false

var errNoMap = errors.New("sim: journal not mappable")

func mapFile(*os.File, []byte, int64) ([]byte, error) { return nil, errNoMap }

func unmapFile([]byte) {}

func populateWrite([]byte) error { return errNoMap }
