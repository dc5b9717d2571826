package engine

import "github.com/gateway/gateway/actors"

// The domain errors, re-exported for the HTTP layer: they are declared once, in actors.
var (
	ErrUnknownKey        = actors.ErrUnknownKey
	ErrKeyRevoked        = actors.ErrKeyRevoked
	ErrKeyExpired        = actors.ErrKeyExpired
	ErrInsufficientScope = actors.ErrInsufficientScope
	ErrRateLimited       = actors.ErrRateLimited
	ErrQuotaExceeded     = actors.ErrQuotaExceeded
	ErrUnavailable       = actors.ErrUnavailable
	ErrUserNotFound      = actors.ErrUserNotFound
	ErrKeyNotFound       = actors.ErrKeyNotFound
	ErrSessionNotFound   = actors.ErrSessionNotFound
	ErrAlreadyExists     = actors.ErrAlreadyExists
	ErrValidation        = actors.ErrValidation
	ErrForbidden         = actors.ErrForbidden
)
