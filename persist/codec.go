package persist

import (
	"errors"
	"fmt"

	"github.com/gateway/gateway/domain"
	json "github.com/goccy/go-json"
)

// ErrNewerVersion is returned by Decode for a record written by a newer gateway: reading it
// with an older schema could silently drop fields, and writing it back would lose them.
var ErrNewerVersion = errors.New("persist: record version is newer than this build reads")

// Encode returns the record encoding: one version byte (1 to 255), then v as JSON.
func Encode(version byte, v any) ([]byte, error) {
	if version == 0 {
		return nil, fmt.Errorf("%w: record version 0", domain.ErrRecordInvalid)
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("persist: encode: %w", err)
	}
	out := make([]byte, 1+len(body))
	out[0] = version
	copy(out[1:], body)
	return out, nil
}

// Decode reads a record written by Encode into v and returns its version, so the caller can
// upgrade older shapes. It refuses versions above maxVersion with ErrNewerVersion.
func Decode(data []byte, maxVersion byte, v any) (version byte, err error) {
	if len(data) == 0 {
		return 0, fmt.Errorf("%w: empty record", domain.ErrRecordInvalid)
	}
	version = data[0]
	switch {
	case version == 0:
		return 0, fmt.Errorf("%w: record version 0", domain.ErrRecordInvalid)
	case version > maxVersion:
		return version, fmt.Errorf("%w: version %d, this build reads up to %d", ErrNewerVersion, version, maxVersion)
	}
	if err := json.Unmarshal(data[1:], v); err != nil {
		return version, fmt.Errorf("persist: decode version %d: %w", version, err)
	}
	return version, nil
}
